//===- Checkpoint.h - Training state on disk --------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A checkpoint directory holds one complete training state per write and a
// file naming the newest:
//
//   DIR/latest            "state-<step>-<nonce>\n", replaced atomically
//   DIR/state-<step>-<nonce>/params.npz      parameters by name
//   DIR/state-<step>-<nonce>/optimizer.npz   Optimizer::exportState()
//   DIR/state-<step>-<nonce>/state.json      {"step": K, "config": "..."}
//
// A state is written into a fresh directory, which becomes the newest only
// when `latest` is renamed into place: an interrupted write leaves the
// previous state intact. Older states are removed after the switch.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_CHECKPOINT_H
#define ZBRT_CHECKPOINT_H

#include "zbrt/Npz.h"

#include <cstdint>
#include <string>

namespace zbrt {

struct Checkpoint {
  /// Training steps completed.
  int64_t step = 0;
  /// What the state belongs to (model and optimizer); a resume checks it.
  std::string config;
  NpzArchive params;
  NpzArchive optimizer;
};

/// Writes `checkpoint` as the newest state in `dir` (created if missing).
bool writeCheckpoint(const std::string &dir, const Checkpoint &checkpoint,
                     std::string &error);

/// Reads the newest state of `dir`. On failure returns false and sets
/// `error`, naming the directory and what is wrong with it.
bool readCheckpoint(const std::string &dir, Checkpoint &checkpoint,
                    std::string &error);

} // namespace zbrt

#endif // ZBRT_CHECKPOINT_H
