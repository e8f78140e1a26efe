//===- Checkpoint.h - Training state on disk --------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A checkpoint directory holds one complete training state per write and a
// file naming the newest:
//
//   DIR/latest      "state-<step>-<pid>-<nonce>\n", replaced atomically
//   DIR/state-<step>-<pid>-<nonce>/params.npz     parameters by name
//   DIR/state-<step>-<pid>-<nonce>/optimizer.npz  Optimizer::exportState()
//   DIR/state-<step>-<pid>-<nonce>/state.json     {"step": K, "config": ...}
//
// A state is written into a fresh directory, which becomes the newest only
// when `latest` is renamed into place: an interrupted write leaves the
// previous state intact. Older states are removed after the switch.
//
//   DIR/.lock             held (flock) by the run writing DIR; its process id
//
// A run that writes checkpoints holds DIR's lock for as long as it trains
// (CheckpointLock): a second run given the same DIR is refused rather than
// writing states and temporary files over the first's.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_CHECKPOINT_H
#define ZBRT_CHECKPOINT_H

#include "zbrt/Npz.h"

#include <cstdint>
#include <memory>
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

/// Creates checkpoint directory `dir` (and its parents) if missing. On
/// failure returns false and sets `error`, naming it.
bool createCheckpointDir(const std::string &dir, std::string &error);

/// Writes `checkpoint` as the newest state in `dir` (created if missing).
bool writeCheckpoint(const std::string &dir, const Checkpoint &checkpoint,
                     std::string &error);

/// An exclusive hold on a checkpoint directory for one run: an advisory
/// lock (flock) on DIR/.lock, released when this is destroyed or the
/// process ends, however it ends.
class CheckpointLock {
public:
  /// Creates `dir` if missing and locks it. When another process holds it,
  /// or the lock cannot be taken, returns null and sets `error` (naming
  /// that process where the lock file says).
  static std::unique_ptr<CheckpointLock> acquire(const std::string &dir,
                                                 std::string &error);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

private:
  explicit CheckpointLock(int fd) : fd(fd) {}
  int fd;
};

/// Reads the newest state of `dir`. On failure returns false and sets
/// `error`, naming the directory and what is wrong with it.
bool readCheckpoint(const std::string &dir, Checkpoint &checkpoint,
                    std::string &error);

} // namespace zbrt

#endif // ZBRT_CHECKPOINT_H
