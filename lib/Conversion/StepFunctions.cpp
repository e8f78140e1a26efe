//===- StepFunctions.cpp - Rank programs to step functions ----------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// A rank's program is first planned symbolically: which function each
// action calls with which values (parameters, data slices, seeds, or values
// earlier actions produced), and from which action to which every value
// lives; a program that uses a value before it exists is rejected here.
// Then one of two emitters builds the step function:
//
// - the loop form: actions that do the same thing to another microbatch
//   share a template; values that outlive their action get an offset in one
//   arena (best fit, in program order). The step function loops over a
//   constant table with one row per action, [template, microbatch,
//   offsets...], and switches to the template's code, which reads its
//   inputs from and writes its results to views of the arena;
// - the unrolled form: every action inline, every value an SSA value.
//
//===----------------------------------------------------------------------===//

#include "StepLowering.h"

using namespace mlir;
using namespace zb;
using namespace zb::detail;

LogicalResult RankLowering::lower(sched::ProgramOp program, int64_t r,
                                  Region &region, bool unrolled) {
  rank = r;
  unroll = unrolled;
  if (failed(plan(region)))
    return failure();
  lookUpRuntime();
  return unroll ? emitUnrolled(program) : emitLoop(program);
}

LogicalResult zb::detail::lowerRankProgram(OpBuilder &b, func::FuncOp model,
                                           ArrayRef<StageFunctions> stages,
                                           int64_t numMicrobatches,
                                           sched::ProgramOp program,
                                           int64_t rank, Region &region,
                                           bool unroll) {
  RankLowering lowering(b, model, stages, numMicrobatches);
  return lowering.lower(program, rank, region, unroll);
}
