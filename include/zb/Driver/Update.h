//===- Update.h - Where a process's optimizer step runs ---------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// The training loop (Training.h) checks and applies each step's update
// through a ParamUpdate, which knows where the parameters, the gradients
// and the optimizer state live:
//
// - on the host: zbrt::Optimizer on ModelData's arrays and the step's
//   gradients as the program returned them;
// - compiled: the rank's `@zb_rank<r>_update` (--zb-emit-optimizer) on host
//   memory, or on device memory, where the parameters, the gradients and
//   the state then stay from step to step (the host copies are brought up
//   to date for checkpoints and at the end); the norm check adds the sums
//   of squares the step program computed (`@zb_rank<r>_grad_squares`).
//
// Both take the same steps: on the CPU, the compiled update gives the host
// optimizer's bits whenever the gradients are not clipped (the norm is
// summed in another order, so a clipping factor may differ in its last
// bits).
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_UPDATE_H
#define ZB_DRIVER_UPDATE_H

#include "zb/Driver/ModelData.h"

#include "zbrt/CUDA.h"
#include "zbrt/Executable.h"
#include "zbrt/Optimizer.h"

#include <memory>
#include <string>
#include <vector>

namespace zb {

/// One process's optimizer step over its parameters.
class ParamUpdate {
public:
  virtual ~ParamUpdate();
  /// Adds to `squares` the squares of the step's gradients that count in
  /// the global norm on this process, and to `nonFinite` a positive count
  /// when one of them is not finite. `grads`: the step's gradients on the
  /// host by name (empty where they stayed on the device).
  virtual bool addSquares(const zbrt::NpzArchive &grads, double &squares,
                          double &nonFinite, std::string &error) = 0;
  /// Keeps the parameters and state that update() changes, for restore().
  virtual bool save(std::string &error) = 0;
  /// One optimizer step with the gradients multiplied by `clipScale` (1:
  /// as computed; f32 gradients by it rounded to f32).
  virtual bool update(const zbrt::NpzArchive &grads, double clipScale,
                      std::string &error) = 0;
  /// Back to what save() kept.
  virtual bool restore(std::string &error) = 0;
  /// Brings the host's copies up to date: the parameters in ModelData and
  /// the zbrt::Optimizer's state (checkpoints, dumps, the end of a run).
  virtual bool syncToHost(std::string &error) = 0;
};

/// zbrt::Optimizer on `params` (this process's, in ModelData); `counted`:
/// per parameter, whether its gradient counts in the norm here.
std::unique_ptr<ParamUpdate>
makeHostUpdate(ModelData &data, llvm::ArrayRef<const ModelArg *> params,
               llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer);

/// What a rank's step program leaves for a compiled update after each
/// step: where the parameters and the step's gradients are on the device
/// (`cuda` null: they are the host arrays), and the gradients' sums of
/// squares (`@zb_rank<r>_grad_squares`, run with the step and read back
/// with its loss).
struct RankBuffers {
  const zbrt::CUDARuntime *cuda = nullptr;
  std::vector<void *> params, grads;
  std::vector<double> gradSquares;
};

/// The compiled update `update` (`@zb_rank<r>_update` for `optimizer`'s
/// kind) on `params`, whose gradients' sums of squares `buffers` holds
/// after each step, taking its state (and step count) from `optimizer` and
/// handing it back on syncToHost(). With `buffers.cuda`, everything it
/// touches is device memory. Null with `error` set when memory runs out.
std::unique_ptr<ParamUpdate>
makeCompiledUpdate(zbrt::EntryFn update, ModelData &data,
                   llvm::ArrayRef<const ModelArg *> params,
                   llvm::ArrayRef<bool> counted, zbrt::Optimizer &optimizer,
                   const RankBuffers &buffers, std::string &error);

} // namespace zb

#endif // ZB_DRIVER_UPDATE_H
