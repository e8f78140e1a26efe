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
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/file.h>
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

/// Whether `name` is the name of a folder writeCheckpoint makes:
/// state-<step>-<pid>-<nonce>, each part decimal digits.
static bool isStateName(const std::string &name) {
  std::string_view rest(name);
  if (rest.substr(0, 6) != "state-")
    return false;
  rest.remove_prefix(6);
  for (int part = 0; part < 3; ++part) {
    size_t digits = 0;
    while (digits < rest.size() &&
           std::isdigit(static_cast<unsigned char>(rest[digits])))
      ++digits;
    if (digits == 0)
      return false;
    rest.remove_prefix(digits);
    if (part < 2) {
      if (rest.empty() || rest.front() != '-')
        return false;
      rest.remove_prefix(1);
    }
  }
  return rest.empty();
}

bool zbrt::createCheckpointDir(const std::string &dir, std::string &error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    error = "cannot create checkpoint directory '" + dir + "': " + ec.message();
  return !ec;
}

bool zbrt::writeCheckpoint(const std::string &dir, const Checkpoint &checkpoint,
                           std::string &error) {
  if (!createCheckpointDir(dir, error))
    return false;
  auto nonce = std::chrono::steady_clock::now().time_since_epoch().count();
  std::string name = "state-" + std::to_string(checkpoint.step) + "-" +
                     std::to_string(getpid()) + "-" + std::to_string(nonce);
  fs::path state = fs::path(dir) / name;
  std::error_code ec;
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
  // The new state is in place: drop the older ones, the folders this
  // writer made and finished alone (state-<step>-<pid>-<nonce> holding a
  // state.json; not what else the folder holds, nor a state that another
  // process is still writing).
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, ec)) {
    std::string other = entry.path().filename().string();
    if (other != name && isStateName(other) && !entry.is_symlink() &&
        entry.is_directory() &&
        fs::is_regular_file(entry.path() / "state.json", ec))
      fs::remove_all(entry.path(), ec);
  }
  return true;
}

namespace {
/// Reads state.json as the writer writes it: one object of "step" (a
/// non-negative integer) and "config" (a string), each once, in either
/// order, with any JSON whitespace, and nothing after it. Each method
/// returns false with `problem` set at the first thing that is not so.
class StateReader {
public:
  explicit StateReader(std::string_view json) : json(json) {}

  bool read(int64_t &step, std::string &config) {
    bool haveStep = false, haveConfig = false;
    if (!expect('{'))
      return false;
    skipSpace();
    if (peek() == '}')
      ++at;
    else
      while (true) {
        std::string key;
        if (!string(key) || !expect(':'))
          return false;
        bool &have = key == "step" ? haveStep : haveConfig;
        if (key != "step" && key != "config")
          return fail("unknown key '" + printable(key) + "'");
        if (have)
          return fail("\"" + key + "\" appears twice");
        have = true;
        if (!(key == "step" ? integer(step) : string(config)))
          return false;
        skipSpace();
        if (peek() == ',') {
          ++at;
          continue;
        }
        if (!expect('}'))
          return false;
        break;
      }
    skipSpace();
    if (at != json.size())
      return fail("text after the object");
    if (!haveStep || !haveConfig)
      return fail(haveStep ? "no \"config\"" : "no \"step\"");
    return true;
  }

  std::string problem;

private:
  char peek() const { return at < json.size() ? json[at] : '\0'; }
  bool fail(std::string what) {
    problem = std::move(what);
    return false;
  }
  void skipSpace() {
    while (at < json.size() && std::strchr(" \t\r\n", json[at]) && json[at])
      ++at;
  }
  bool expect(char c) {
    skipSpace();
    if (peek() != c)
      return fail(std::string("expected '") + c + "' at byte " +
                  std::to_string(at));
    ++at;
    return true;
  }
  /// A non-negative integer of at most 18 digits.
  bool integer(int64_t &value) {
    skipSpace();
    size_t start = at;
    while (at < json.size() &&
           std::isdigit(static_cast<unsigned char>(json[at])))
      ++at;
    size_t digits = at - start;
    if (digits == 0 || digits > 18 || std::strchr(".eE", peek()) && peek())
      return fail("\"step\" is not a non-negative integer");
    value = std::stoll(std::string(json.substr(start, digits)));
    return true;
  }
  /// A JSON string, its escapes undone (\u as UTF-8).
  bool string(std::string &value) {
    if (!expect('"'))
      return false;
    value.clear();
    while (at < json.size()) {
      auto c = static_cast<unsigned char>(json[at++]);
      if (c == '"')
        return true;
      if (c < 0x20)
        return fail("a control byte in a string");
      if (c != '\\') {
        value += static_cast<char>(c);
        continue;
      }
      static const char escapes[] = "\"\\/bfnrt",
                        meanings[] = "\"\\/\b\f\n\r\t";
      char e = peek();
      ++at;
      if (const char *p = std::strchr(escapes, e); p && e) {
        value += meanings[p - escapes];
        continue;
      }
      std::string_view hex = json.substr(std::min(at, json.size()), 4);
      if (e != 'u' || hex.size() != 4 ||
          !std::all_of(hex.begin(), hex.end(), [](char d) {
            return std::isxdigit(static_cast<unsigned char>(d));
          }))
        return fail("a string escape that is not \\\", \\\\, \\/, \\b, "
                    "\\f, \\n, \\r, \\t or \\u and four hex digits");
      at += 4;
      unsigned code = std::stoul(std::string(hex), nullptr, 16);
      if (code >= 0xD800 && code < 0xE000)
        return fail("a \\u escape of a UTF-16 surrogate");
      if (code < 0x80) {
        value += static_cast<char>(code);
      } else if (code < 0x800) {
        value += static_cast<char>(0xC0 | code >> 6);
        value += static_cast<char>(0x80 | (code & 0x3F));
      } else {
        value += static_cast<char>(0xE0 | code >> 12);
        value += static_cast<char>(0x80 | (code >> 6 & 0x3F));
        value += static_cast<char>(0x80 | (code & 0x3F));
      }
    }
    return fail("a string that does not end");
  }

  std::string_view json;
  size_t at = 0;
};
} // namespace

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
    error = prefix + "'latest' names '" + printable(latest) +
            "', not a state directory";
    return false;
  }
  fs::path state = fs::path(dir) / latest;
  std::string json;
  if (!readText(state / "state.json", json)) {
    error = prefix + "'" + (state / "state.json").string() + "' is missing";
    return false;
  }
  StateReader reader(json);
  if (!reader.read(checkpoint.step, checkpoint.config)) {
    error = prefix + "'" + (state / "state.json").string() +
            "' has no valid \"step\" and \"config\" (" + reader.problem + ")";
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

std::unique_ptr<CheckpointLock> CheckpointLock::acquire(const std::string &dir,
                                                        std::string &error) {
  if (!createCheckpointDir(dir, error))
    return nullptr;
  std::string path = dir + "/.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  int rc;
  do
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int code = errno;
    if (code == EWOULDBLOCK) {
      char text[32] = {};
      ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
      std::string holder = got > 0 ? std::string(text, got) : "";
      while (!holder.empty() &&
             std::isspace(static_cast<unsigned char>(holder.back())))
        holder.pop_back();
      error = "checkpoint directory '" + dir + "' is in use by another run" +
              (holder.empty() ? "" : " (process " + holder + ")") +
              "; give each run its own --checkpoint";
    } else {
      error = "cannot lock '" + path + "': " + std::strerror(code);
    }
    ::close(fd);
    return nullptr;
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                     static_cast<ssize_t>(pid.size())) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<CheckpointLock>(new CheckpointLock(fd));
}

CheckpointLock::~CheckpointLock() { ::close(fd); }
