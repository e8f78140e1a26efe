//===- Profile.cpp - Measured per-stage costs, as JSON --------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/Profile.h"

#include "zb/Schedule/Export.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using llvm::StringRef;

std::string zb::sched::writeProfile(const StageProfile &profile) {
  llvm::json::Array stages;
  for (size_t s = 0; s < profile.f.size(); ++s)
    stages.push_back(llvm::json::Object{{"stage", static_cast<int64_t>(s)},
                                        {"f", profile.f[s]},
                                        {"b", profile.b[s]},
                                        {"w", profile.w[s]}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}",
                      llvm::json::Value(llvm::json::Object{
                          {"unit", "ms"}, {"stages", std::move(stages)}}))
     << "\n";
  return text;
}

/// The largest time a profile may give, in ms.
static constexpr double kMaxProfileCost = 1e12;

/// Whether `text` nests arrays and objects deeper than `limit` (outside
/// strings): llvm::json::parse recurses once per level.
static bool nestsDeeperThan(StringRef text, int limit) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if ((c == '[' || c == '{') && ++depth > limit)
      return true;
    else if (c == ']' || c == '}')
      --depth;
  }
  return false;
}

std::optional<std::string>
zb::sched::parseProfile(StringRef text, int numStages, StageProfile &costs) {
  // A profile nests three levels; far deeper input would exhaust the
  // parser's stack.
  if (nestsDeeperThan(text, 64))
    return std::string("invalid JSON: nested more than 64 levels deep");
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return "invalid JSON: " + llvm::toString(json.takeError());
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *entries = root ? root->getArray("stages") : nullptr;
  if (!entries)
    return std::string("expected an object with a \"stages\" array");
  // The times are read as milliseconds: a profile in any other unit would
  // be misread.
  if (const llvm::json::Value *unit = root->get("unit");
      unit && unit->getAsString() != std::optional<StringRef>("ms"))
    return std::string("\"unit\" must be \"ms\", the unit the times are "
                       "read in");

  // Any number of stages: as many as the entries.
  bool anyCount = numStages < 0;
  if (anyCount)
    numStages = static_cast<int>(entries->size());
  costs.f.assign(numStages, -1.0);
  costs.b.assign(numStages, -1.0);
  costs.w.assign(numStages, 0.0);
  for (auto [index, entry] : llvm::enumerate(*entries)) {
    std::string where = "entry " + std::to_string(index) + " of \"stages\"";
    const llvm::json::Object *object = entry.getAsObject();
    if (!object)
      return where + " is not an object";
    std::optional<int64_t> stage = object->getInteger("stage");
    if (!stage)
      return where + " has no integer \"stage\"";
    if (*stage < 0 || *stage >= numStages)
      return where + " names stage " + std::to_string(*stage) +
             (anyCount
                  ? ", but there are " + std::to_string(numStages) + " entries"
                  : ", but the model has " + std::to_string(numStages) +
                        " stages");
    if (costs.f[*stage] >= 0)
      return "stage " + std::to_string(*stage) + " appears twice";
    std::optional<double> f = object->getNumber("f");
    std::optional<double> b = object->getNumber("b");
    std::optional<double> w = object->getNumber("w");
    if (!f || !b)
      return where + " (stage " + std::to_string(*stage) +
             ") needs numbers \"f\" and \"b\"";
    // Past 1e12 ms (three decades) a time is no measurement, and sums of
    // such would overflow.
    for (double value : {*f, *b, w.value_or(0.0)})
      if (!std::isfinite(value) || value < 0 || value > kMaxProfileCost)
        return where + " (stage " + std::to_string(*stage) +
               ") has a cost that is negative, not finite or past 1e12 ms";
    costs.f[*stage] = *f;
    costs.b[*stage] = *b;
    costs.w[*stage] = w.value_or(0.0);
  }
  for (int stage = 0; stage < numStages; ++stage)
    if (costs.f[stage] < 0)
      return "no entry for stage " + std::to_string(stage);
  return std::nullopt;
}

std::optional<std::string> zb::sched::readProfile(StringRef path, int numStages,
                                                  StageProfile &profile) {
  // A profile is a few KB.
  std::string text;
  if (std::optional<std::string> problem =
          zb::schedule::readInputFile(path.str(), uint64_t(64) << 20, text))
    return problem;
  return parseProfile(text, numStages, profile);
}
