//===- Checkpoint.cpp - Training state on disk ----------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace zbrt;
namespace fs = std::filesystem;

/// Escapes `text` for a JSON string.
static std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

bool zbrt::writeCheckpoint(const std::string &dir, const Checkpoint &checkpoint,
                           std::string &error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create checkpoint directory '" + dir + "': " + ec.message();
    return false;
  }
  auto nonce = std::chrono::steady_clock::now().time_since_epoch().count();
  std::string name = "state-" + std::to_string(checkpoint.step) + "-" +
                     std::to_string(getpid()) + "-" + std::to_string(nonce);
  fs::path state = fs::path(dir) / name;
  fs::create_directory(state, ec);
  if (ec) {
    error = "cannot create '" + state.string() + "': " + ec.message();
    return false;
  }
  std::string json = "{\"step\": " + std::to_string(checkpoint.step) +
                     ", \"config\": " + jsonString(checkpoint.config) + "}\n";
  if (!writeNpz((state / "params.npz").string(), checkpoint.params, error) ||
      !writeNpz((state / "optimizer.npz").string(), checkpoint.optimizer,
                error) ||
      !writeFileAtomically((state / "state.json").string(), json, error) ||
      !writeFileAtomically((fs::path(dir) / "latest").string(), name + "\n",
                           error)) {
    fs::remove_all(state, ec);
    return false;
  }
  // The new state is in place: drop the older ones.
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, ec)) {
    std::string other = entry.path().filename().string();
    if (other != name && other.rfind("state-", 0) == 0 && entry.is_directory())
      fs::remove_all(entry.path(), ec);
  }
  return true;
}

/// The integer after `"key":` in `json`, or false.
static bool findInteger(const std::string &json, const std::string &key,
                        int64_t &value) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos)
    return false;
  at = json.find(':', at);
  if (at == std::string::npos)
    return false;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(json.c_str() + at + 1, &end, 10);
  if (errno || end == json.c_str() + at + 1)
    return false;
  value = parsed;
  return true;
}

/// The string after `"key":` in `json` (JSON escapes undone), or false.
static bool findString(const std::string &json, const std::string &key,
                       std::string &value) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos)
    return false;
  at = json.find('"', json.find(':', at));
  if (at == std::string::npos)
    return false;
  value.clear();
  for (size_t i = at + 1; i < json.size(); ++i) {
    char c = json[i];
    if (c == '"')
      return true;
    if (c == '\\' && i + 1 < json.size()) {
      char next = json[++i];
      if (next == 'u') {
        // Four hex digits (the writer escapes control bytes so); anything
        // else makes the file malformed.
        std::string digits = json.substr(i + 1, 4);
        if (digits.size() != 4 ||
            !std::all_of(digits.begin(), digits.end(), [](char d) {
              return std::isxdigit(static_cast<unsigned char>(d));
            }))
          return false;
        value += static_cast<char>(std::strtol(digits.c_str(), nullptr, 16));
        i += 4;
        continue;
      }
      value += next;
      continue;
    }
    value += c;
  }
  return false;
}

static bool readText(const fs::path &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  text = buffer.str();
  return true;
}

bool zbrt::readCheckpoint(const std::string &dir, Checkpoint &checkpoint,
                          std::string &error) {
  std::string prefix = "checkpoint '" + dir + "': ";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = prefix + "not a directory";
    return false;
  }
  std::string latest;
  if (!readText(fs::path(dir) / "latest", latest)) {
    error = prefix + "no 'latest' file (not a checkpoint directory, or no "
                     "state was ever written to it)";
    return false;
  }
  while (!latest.empty() && std::isspace(static_cast<unsigned char>(latest.back())))
    latest.pop_back();
  if (latest.rfind("state-", 0) != 0 || latest.find('/') != std::string::npos) {
    error = prefix + "'latest' names '" + latest + "', not a state directory";
    return false;
  }
  fs::path state = fs::path(dir) / latest;
  std::string json;
  if (!readText(state / "state.json", json)) {
    error = prefix + "'" + (state / "state.json").string() + "' is missing";
    return false;
  }
  if (!findInteger(json, "step", checkpoint.step) || checkpoint.step < 0 ||
      !findString(json, "config", checkpoint.config)) {
    error = prefix + "'" + (state / "state.json").string() +
            "' has no valid \"step\" and \"config\"";
    return false;
  }
  std::string npzError;
  if (!readNpz((state / "params.npz").string(), checkpoint.params, npzError) ||
      !readNpz((state / "optimizer.npz").string(), checkpoint.optimizer,
               npzError)) {
    error = prefix + npzError;
    return false;
  }
  return true;
}
