//===- TransposeToRuntime.cpp - Transposing copies to runtime calls -------===//
//
// Part of ZeroBubble MLIR.
//
// A copy that moves a buffer's innermost dimension (attention's K^T, the
// transposed operands autodiff materialises) lowers to loops that read one
// element at a time, `rows` floats apart: a tenth of the speed of a copy.
// The runtime transposes 8 x 8 blocks in registers instead.
//
//===----------------------------------------------------------------------===//

#include "zb/Conversion/Passes.h"
#include "zb/Conversion/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace zb {
#define GEN_PASS_DEF_ZBLOWERTRANSPOSESTORUNTIME
#include "zb/Conversion/Passes.h.inc"
} // namespace zb

using namespace mlir;

namespace {
/// A permutation copy as a batch of 2-D transposes: loop dimension `i` is
/// the output's innermost, `j` the input's; the others (at most two) batch.
struct TransposePlan {
  Value in, out;
  int64_t rows = 0, cols = 0;
  /// Where `i` is among the input's dimensions and `j` among the output's.
  unsigned rowsInInput = 0, colsInOutput = 0;
  SmallVector<int64_t> batchSizes;
  SmallVector<unsigned> batchInInput, batchInOutput;
};
} // namespace

/// Whether `type` is an f32 buffer of `rank` whose innermost stride is 1.
static bool isUnitStrideF32(Type type, unsigned rank) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.getElementType().isF32() || memref.getRank() != rank)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(memref.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

/// Recognises `op` as a transposing copy on buffers, or fails.
static FailureOr<TransposePlan> planTranspose(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op.getNumParallelLoops() != op.getNumLoops())
    return failure();
  // The body yields the input element as it is.
  Block *body = op.getBlock();
  if (!body || body->getOperations().size() != 1)
    return failure();
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield || yield.getNumOperands() != 1 ||
      yield.getOperand(0) != body->getArgument(0))
    return failure();
  unsigned rank = op.getNumLoops();
  OpOperand *input = op.getDpsInputOperand(0);
  OpOperand *init = op.getDpsInitOperand(0);
  if (rank < 2 || rank > 4 || !isUnitStrideF32(input->get().getType(), rank) ||
      !isUnitStrideF32(init->get().getType(), rank))
    return failure();
  AffineMap inMap = op.getMatchingIndexingMap(input);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  if (!inMap.isPermutation() || !outMap.isPermutation())
    return failure();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return failure();
  unsigned i = outMap.getDimPosition(rank - 1);
  unsigned j = inMap.getDimPosition(rank - 1);
  // The innermost dimension stays: the loops copy rows, and vectorise.
  if (i == j)
    return failure();
  MLIRContext *ctx = op->getContext();
  auto position = [&](AffineMap map, unsigned dim) {
    return *map.getResultPosition(getAffineDimExpr(dim, ctx));
  };
  TransposePlan plan;
  plan.in = input->get();
  plan.out = init->get();
  // The runtime reads and writes different memory.
  if (plan.in == plan.out)
    return failure();
  plan.rows = ranges[i];
  plan.cols = ranges[j];
  plan.rowsInInput = position(inMap, i);
  plan.colsInOutput = position(outMap, j);
  for (unsigned d = 0; d < rank; ++d)
    if (d != i && d != j) {
      plan.batchSizes.push_back(ranges[d]);
      plan.batchInInput.push_back(position(inMap, d));
      plan.batchInOutput.push_back(position(outMap, d));
    }
  return plan;
}

unsigned zb::lowerTransposesToCalls(ModuleOp module) {
  SmallVector<std::pair<linalg::LinalgOp, TransposePlan>> copies;
  module.walk([&](linalg::LinalgOp op) {
    if (FailureOr<TransposePlan> plan = planTranspose(op); succeeded(plan))
      copies.emplace_back(op, *plan);
  });
  if (copies.empty())
    return 0;
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx);
  OpBuilder moduleStart = OpBuilder::atBlockBegin(module.getBody());
  declareRuntimeFunction(moduleStart, module, kHostTransposeFn,
                         FunctionType::get(ctx,
                                           {i64, i64, i64, i64, ptr, i64, i64,
                                            i64, ptr, i64, i64, i64},
                                           {}),
                         /*cInterface=*/false);
  IRRewriter rewriter(ctx);
  for (auto &[op, plan] : copies) {
    rewriter.setInsertionPoint(op);
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    auto i64Const = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(),
                                          v);
    };
    auto [in, inStrides] = describeBuffer(rewriter, loc, plan.in, f32);
    auto [out, outStrides] = describeBuffer(rewriter, loc, plan.out, f32);
    // Up to two batch dimensions; a missing one runs once.
    Value batch[2] = {i64Const(1), i64Const(1)};
    Value inBatch[2] = {i64Const(0), i64Const(0)};
    Value outBatch[2] = {inBatch[0], inBatch[1]};
    for (auto [b, size] : llvm::enumerate(plan.batchSizes)) {
      batch[b] = i64Const(size);
      inBatch[b] = inStrides[plan.batchInInput[b]];
      outBatch[b] = outStrides[plan.batchInOutput[b]];
    }
    func::CallOp::create(
        rewriter, loc, kHostTransposeFn, TypeRange(),
        ValueRange{batch[0], batch[1], i64Const(plan.rows), i64Const(plan.cols),
                   in, inBatch[0], inBatch[1], inStrides[plan.rowsInInput], out,
                   outBatch[0], outBatch[1], outStrides[plan.colsInOutput]});
    rewriter.eraseOp(op);
  }
  return copies.size();
}

namespace {
struct LowerTransposesToRuntimePass
    : zb::impl::ZBLowerTransposesToRuntimeBase<LowerTransposesToRuntimePass> {
  void runOnOperation() override { zb::lowerTransposesToCalls(getOperation()); }
};
} // namespace
