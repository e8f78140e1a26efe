//===- Profile.h - Measured per-stage costs, as JSON ------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The profile a pipelined run writes (zb-run --profile) and the schedule
// reads back (--zb-schedule costs=..., --zb-pipeline costs=...):
//
//   {"unit": "ms", "stages": [{"stage": 0, "f": 1.5, "b": 1.2, "w": 0.8},
//                             ...]}
//
// one entry per stage ("w" optional on input, 0 when absent; "unit"
// optional on input, "ms" where present). One writer and one reader, both
// llvm::json.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DIALECT_SCHED_PROFILE_H
#define ZB_DIALECT_SCHED_PROFILE_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace zb::sched {

/// Per-stage F, B and W times (ms), indexed by stage.
struct StageProfile {
  std::vector<double> f, b, w;
};

/// The profile as JSON text.
std::string writeProfile(const StageProfile &profile);

/// Parses a profile of a model with `numStages` stages (-1: as many as it
/// lists, numbered from 0); on failure returns a message (without a file
/// name) naming the entry and what is wrong.
std::optional<std::string> parseProfile(llvm::StringRef text, int numStages,
                                        StageProfile &profile);

/// parseProfile() on the file at `path`.
std::optional<std::string> readProfile(llvm::StringRef path, int numStages,
                                       StageProfile &profile);

} // namespace zb::sched

#endif // ZB_DIALECT_SCHED_PROFILE_H
