//===- RegionStash.h - Values handed between stage regions -----*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_LIB_TRANSFORMS_REGIONSTASH_H
#define ZB_LIB_TRANSFORMS_REGIONSTASH_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Region.h"
#include "llvm/ADT/SmallVector.h"

namespace zb {
namespace pipe {
class StageOp;
} // namespace pipe

/// Whether `op` is cheaper to recreate wherever its result is needed than
/// to keep or transfer: an operand-free constant, a tensor.empty, or a
/// linalg.fill of such values.
bool isRematerialisable(mlir::Operation *op);

/// Recreates the rematerialisable `value` with `builder` (its cheap operands
/// first), recording the copies in `mapping`; returns the copy.
mlir::Value rematerialise(mlir::OpBuilder &builder, mlir::Value value,
                          mlir::IRMapping &mapping);

/// Makes the single-block `region` self-contained. A value it uses from
/// outside that a rematerialisable op produces is recreated at the start of
/// the block, and so is a reshape (tensor.collapse_shape, expand_shape) of
/// an outside value, from that value; every other such value becomes a
/// block argument (inserted from position `firstArg` on, in order of first
/// use) and is returned: the stash the producing region must hand over.
llvm::SmallVector<mlir::Value> stashValuesUsedFromAbove(mlir::Region &region,
                                                        unsigned firstArg);

/// Records the stage's cost_f, cost_b and, once split, cost_w: the FLOPs
/// of its forward, of its backward (B once split) and of W
/// (zb::estimateFlops). The one definition --zb-autodiff,
/// --zb-split-backward and --zb-mark-triangular-products record.
void recordStageCosts(pipe::StageOp stage);

/// The stage's mem_b: the bytes its forward region stashes per microbatch,
/// leaving out its parameters (held once, not per microbatch). The one
/// definition --zb-autodiff and --zb-split-backward record.
int64_t forwardStashBytes(pipe::StageOp stage);

/// The split stage's mem_w: the bytes of its B→W stash per microbatch,
/// leaving out the parameters the forward stash handed on. The one
/// definition --zb-split-backward and --zb-narrow-stash record.
int64_t backwardWeightStashBytes(pipe::StageOp stage);

} // namespace zb

#endif // ZB_LIB_TRANSFORMS_REGIONSTASH_H
