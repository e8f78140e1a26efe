//===- GemmToRuntime.cpp - Matmul-family linalg ops to runtime gemm -------===//
//
// Part of ZeroBubble MLIR.
//
// One matcher for both targets: --zb-lower-gemm-to-runtime (host BLAS) and
// --zb-lower-gemm-to-cublas (cuBLAS) differ only in the callee.
//
//===----------------------------------------------------------------------===//

#include "zb/Analysis/GroupedProduct.h"
#include "zb/Autodiff/Autodiff.h"
#include "zb/Conversion/GPUPasses.h"
#include "zb/Conversion/Passes.h"
#include "zb/Conversion/Transforms.h"
#include "zb/Dialect/ZB/ZBDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zb-lower-gemm-to-runtime"

namespace zb {
#define GEN_PASS_DEF_ZBLOWERGEMMTORUNTIME
#include "zb/Conversion/Passes.h.inc"
#define GEN_PASS_DEF_ZBLOWERGEMMTOCUBLAS
#include "zb/Conversion/GPUPasses.h.inc"
} // namespace zb

using namespace mlir;

namespace {
/// A contraction recognised as a (batched) row-major GEMM
/// C = op(A) * op(B) + C (or, over a C zeroed just before, = op(A) * op(B)).
struct GemmPlan {
  Value a, b, c;
  /// f32 or f64, the same for all three.
  Type element;
  bool transA = false, transB = false;
  bool hasBatch = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  /// The terms the product needs (ZBRT_TERMS_* in zbrt.h): 0 for all.
  int32_t terms = 0;
};
} // namespace

/// The loop dimensions that `map`'s results name, or failure if a result is
/// not a plain dimension.
static FailureOr<SmallVector<unsigned>> resultDims(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return failure();
    dims.push_back(dim.getPosition());
  }
  return dims;
}

/// Whether `type` is a statically shaped tensor or memref of `rank` with
/// `element`s (f32 or f64); a memref's innermost stride must be 1.
static bool isGemmOperandType(Type type, unsigned rank, Type element) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !isa<MemRefType, RankedTensorType>(shaped) ||
      !(element.isF32() || element.isF64()) ||
      shaped.getElementType() != element || shaped.getRank() != rank ||
      !shaped.hasStaticShape())
    return false;
  auto memref = dyn_cast<MemRefType>(shaped);
  if (!memref)
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(memref.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

namespace {
/// How a contraction maps onto a (batched) row-major GEMM: its
/// contraction dimensions and each operand's transposition.
struct GemmShape {
  linalg::ContractionDimensions dims;
  bool transA = false, transB = false, transC = false;
};
} // namespace

/// Whether `op`'s body is exactly `out + in0 * in1` (either order of each):
/// linalg::isaContractionOpInterface also accepts unary ops around them,
/// which a gemm call would drop.
static bool hasMulAddBody(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  Operation *mul = zb::autodiff::mulAddProduct(body);
  if (!mul)
    return false;
  Value in0 = body->getArgument(0), in1 = body->getArgument(1);
  return (mul->getOperand(0) == in0 && mul->getOperand(1) == in1) ||
         (mul->getOperand(0) == in1 && mul->getOperand(1) == in0);
}

/// The GEMM `op` is, on tensors or buffers, or failure.
static FailureOr<GemmShape> gemmShapeOf(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !linalg::isaContractionOpInterface(op) || !hasMulAddBody(op))
    return failure();
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() > 1)
    return failure();
  GemmShape shape{*dims};
  bool hasBatch = !dims->batch.empty();
  unsigned rank = hasBatch ? 3 : 2;
  Type element = getElementTypeOrSelf(op->getOperand(0).getType());
  for (OpOperand &operand : op->getOpOperands())
    if (!isGemmOperandType(operand.get().getType(), rank, element))
      return failure();

  // Each operand must be [batch,] (row, col) or [batch,] (col, row).
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto layout = [&](AffineMap map, unsigned row, unsigned col,
                    bool &transposed) -> bool {
    FailureOr<SmallVector<unsigned>> ds = resultDims(map);
    if (failed(ds) || ds->size() != rank)
      return false;
    unsigned first = 0;
    if (hasBatch) {
      if ((*ds)[0] != dims->batch[0])
        return false;
      first = 1;
    }
    unsigned d0 = (*ds)[first], d1 = (*ds)[first + 1];
    transposed = d0 == col && d1 == row;
    return transposed || (d0 == row && d1 == col);
  };
  unsigned m = dims->m[0], n = dims->n[0], k = dims->k[0];
  if (!layout(maps[0], m, k, shape.transA) ||
      !layout(maps[1], k, n, shape.transB) ||
      !layout(maps[2], m, n, shape.transC))
    return failure();
  return shape;
}

bool zb::isGemm(linalg::LinalgOp op) { return succeeded(gemmShapeOf(op)); }

/// Recognises `op` as a GEMM on buffers, or says why not.
static FailureOr<GemmPlan> planGemm(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return failure();
  FailureOr<GemmShape> shape = gemmShapeOf(op);
  if (failed(shape))
    return failure();
  const linalg::ContractionDimensions &dims = shape->dims;
  unsigned m = dims.m[0], n = dims.n[0], k = dims.k[0];
  GemmPlan plan;
  plan.hasBatch = !dims.batch.empty();
  plan.transA = shape->transA;
  plan.transB = shape->transB;
  bool transC = shape->transC;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  plan.a = op.getDpsInputOperand(0)->get();
  plan.b = op.getDpsInputOperand(1)->get();
  plan.c = op.getDpsInitOperand(0)->get();
  plan.element = getElementTypeOrSelf(plan.c.getType());
  plan.m = ranges[m];
  plan.n = ranges[n];
  plan.k = ranges[k];
  plan.batch = plan.hasBatch ? ranges[dims.batch[0]] : 1;
  if (transC) {
    // C is stored as (n, m): compute C^T = op(B)^T * op(A)^T instead.
    std::swap(plan.a, plan.b);
    std::swap(plan.m, plan.n);
    bool transA = !plan.transB, transB = !plan.transA;
    plan.transA = transA;
    plan.transB = transB;
    std::swap(m, n);
  }
  // The terms at points where loop c exceeds loop r are not needed
  // (--zb-mark-triangular-products): which of the runtime's term sets that
  // is, by the roles the two loops play in the call; none for others.
  if (auto skip = op->getAttrOfType<DenseI64ArrayAttr>(
          zb::ZBDialect::kSkipTermsAttrName);
      skip && skip.size() == 2) {
    auto is = [&](int64_t dim, unsigned loop) { return dim == int64_t(loop); };
    int64_t r = skip[0], c = skip[1];
    if (is(r, m) && is(c, k))
      plan.terms = 1; // ZBRT_TERMS_K_UPTO_M
    else if (is(r, k) && is(c, m))
      plan.terms = 2; // ZBRT_TERMS_K_FROM_M
    else if (is(r, m) && is(c, n))
      plan.terms = 3; // ZBRT_TERMS_N_UPTO_M
    else if (is(r, n) && is(c, k))
      plan.terms = 4; // ZBRT_TERMS_K_UPTO_N
    else if (is(r, k) && is(c, n))
      plan.terms = 5; // ZBRT_TERMS_K_FROM_N
    else if (is(r, n) && is(c, m))
      plan.terms = 6; // ZBRT_TERMS_M_UPTO_N
  }
  return plan;
}

namespace {
/// A grouped product (zb/Analysis/GroupedProduct.h) on buffers as a call of
/// the runtime's zbrt_{s,d}gemm_grouped_rows or _reduce (zbrt.h).
struct GroupedPlan {
  /// _reduce: C[g] sums A^T B over the rows of group g; else _rows:
  /// C[r] = A[r] op(B[group[r]]).
  bool reduce = false;
  bool transB = false;
  Value a, b, c, group;
  Type element;
  /// _rows: rows, n, k; _reduce: rows, m, n.
  int64_t rows = 0, m = 0, n = 0, k = 0, groups = 0;
};
} // namespace

/// Recognises `op` as a grouped product on buffers the runtime computes
/// (zb::matchGroupedLayout with static f32 or f64 row-major operands and an
/// i64 group index).
static FailureOr<GroupedPlan> planGrouped(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics())
    return failure();
  std::optional<zb::GroupedLayout> layout = zb::matchGroupedLayout(op);
  if (!layout)
    return failure();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return failure();
  GroupedPlan plan;
  plan.reduce = layout->kind == zb::GroupedLayout::Reduce;
  plan.transB = layout->transB;
  plan.a = op.getDpsInputOperand(layout->a)->get();
  plan.b = op.getDpsInputOperand(layout->b)->get();
  plan.c = op.getDpsInitOperand(0)->get();
  plan.group = op.getDpsInputOperand(layout->product.group)->get();
  plan.element = getElementTypeOrSelf(plan.c.getType());
  plan.rows = ranges[layout->rowLoop];
  plan.groups = ranges[layout->product.groupLoop];
  if (plan.reduce) {
    plan.m = ranges[layout->loop0];
    plan.n = ranges[layout->loop1];
  } else {
    plan.n = ranges[layout->loop0];
    plan.k = ranges[layout->loop1];
  }
  auto groupType = dyn_cast<MemRefType>(plan.group.getType());
  if (!groupType || !groupType.getElementType().isInteger(64) ||
      !isGemmOperandType(plan.a.getType(), 2, plan.element) ||
      !isGemmOperandType(plan.b.getType(), plan.reduce ? 2 : 3, plan.element) ||
      !isGemmOperandType(plan.c.getType(), plan.reduce ? 3 : 2, plan.element))
    return failure();
  return plan;
}

/// Declares the batched gemm `name` on `element`s (its alpha and beta too)
/// in `module` if it is not there yet.
static func::FuncOp declareGemm(ModuleOp module, StringRef name, Type element,
                                bool withTerms = false) {
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> arguments = {i32,     i32,     i64, i64, i64, i64,
                                 element, ptr,     i64, i64, ptr, i64,
                                 i64,     element, ptr, i64, i64};
  if (withTerms)
    arguments.insert(arguments.begin(), i32);
  auto type = FunctionType::get(ctx, arguments, {});
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  zb::declareRuntimeFunction(b, module, name, type, /*cInterface=*/false);
  return module.lookupSymbol<func::FuncOp>(name);
}

std::pair<Value, SmallVector<Value>> zb::describeBuffer(OpBuilder &builder,
                                                        Location loc,
                                                        Value memref,
                                                        Type element) {
  Type i64 = builder.getI64Type();
  Type ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  auto toI64 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(builder, loc, i64, index);
  };
  auto meta = memref::ExtractStridedMetadataOp::create(builder, loc, memref);
  Value base =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
  Value ptr = LLVM::IntToPtrOp::create(builder, loc, ptrType, toI64(base));
  Value first = LLVM::GEPOp::create(builder, loc, ptrType, element, ptr,
                                    ValueRange{toI64(meta.getOffset())});
  SmallVector<Value> strides;
  for (Value stride : meta.getStrides())
    strides.push_back(toI64(stride));
  return {first, strides};
}

/// Emits the call that replaces `op`: C = op(A) op(B) + beta C; to the
/// terms callee (the term set first) `withTerms`.
static void emitGemmCall(RewriterBase &rewriter, linalg::LinalgOp op,
                         const GemmPlan &plan, func::FuncOp callee, double beta,
                         bool withTerms) {
  Location loc = op.getLoc();
  Type i64 = rewriter.getI64Type(), element = plan.element;
  auto i64Const = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(rewriter, loc, i64, v);
  };
  // Pointer to the first element, leading-dimension stride, batch stride.
  auto describe = [&](Value memref) -> std::array<Value, 3> {
    auto [first, strides] = zb::describeBuffer(rewriter, loc, memref, element);
    Value ld = strides[strides.size() - 2];
    Value batchStride = plan.hasBatch ? strides[0] : i64Const(0);
    return {first, ld, batchStride};
  };
  auto [pa, lda, sa] = describe(plan.a);
  auto [pb, ldb, sb] = describe(plan.b);
  auto [pc, ldc, sc] = describe(plan.c);
  Value one = arith::ConstantOp::create(rewriter, loc, element,
                                        rewriter.getFloatAttr(element, 1.0));
  Value betaValue = arith::ConstantOp::create(
      rewriter, loc, element, rewriter.getFloatAttr(element, beta));
  Value transA = arith::ConstantIntOp::create(rewriter, loc, plan.transA, 32);
  Value transB = arith::ConstantIntOp::create(rewriter, loc, plan.transB, 32);
  SmallVector<Value> arguments = {transA,
                                  transB,
                                  i64Const(plan.batch),
                                  i64Const(plan.m),
                                  i64Const(plan.n),
                                  i64Const(plan.k),
                                  one,
                                  pa,
                                  lda,
                                  sa,
                                  pb,
                                  ldb,
                                  sb,
                                  betaValue,
                                  pc,
                                  ldc,
                                  sc};
  // The terms callee takes the term set first.
  if (withTerms)
    arguments.insert(arguments.begin(), arith::ConstantIntOp::create(
                                            rewriter, loc, plan.terms, 32));
  func::CallOp::create(rewriter, loc, callee, arguments);
}

/// The beta of the call replacing `op`, whose init C covers every element
/// the call writes: linalg contractions accumulate into C (beta = 1), unless
/// C was zeroed just before: the call then overwrites it (beta = 0) and the
/// fill goes. (The fill must not zero an input `a` or `b` as well.)
static double takeZeroFill(RewriterBase &rewriter, linalg::LinalgOp op, Value a,
                           Value b) {
  Value c = op.getDpsInitOperand(0)->get();
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (!fill || !fill.hasPureBufferSemantics() ||
      fill.getDpsInitOperand(0)->get() != c || a == c || b == c ||
      !matchPattern(fill.value(), m_AnyZeroFloat()))
    return 1.0;
  rewriter.eraseOp(fill);
  return 0.0;
}

/// Emits the call of the runtime's grouped product that replaces `op`.
static void emitGroupedCall(RewriterBase &rewriter, linalg::LinalgOp op,
                            const GroupedPlan &plan, double beta) {
  ModuleOp module = op->getParentOfType<ModuleOp>();
  MLIRContext *ctx = module.getContext();
  Location loc = op.getLoc();
  Type element = plan.element, i64 = rewriter.getI64Type();
  auto i64Const = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(rewriter, loc, i64, v);
  };
  auto [pa, sa] = zb::describeBuffer(rewriter, loc, plan.a, element);
  auto [pb, sb] = zb::describeBuffer(rewriter, loc, plan.b, element);
  auto [pc, sc] = zb::describeBuffer(rewriter, loc, plan.c, element);
  auto [pg, sg] = zb::describeBuffer(rewriter, loc, plan.group, i64);
  Value betaValue = arith::ConstantOp::create(
      rewriter, loc, element, rewriter.getFloatAttr(element, beta));
  bool f64 = element.isF64();
  StringRef name;
  SmallVector<Value> arguments;
  if (plan.reduce) {
    name = f64 ? zb::kHostGroupedReduceF64Fn : zb::kHostGroupedReduceFn;
    arguments = {i64Const(plan.rows),
                 i64Const(plan.m),
                 i64Const(plan.n),
                 i64Const(plan.groups),
                 pa,
                 sa[0],
                 pb,
                 sb[0],
                 betaValue,
                 pc,
                 sc[1],
                 sc[0],
                 pg,
                 sg[0]};
  } else {
    name = f64 ? zb::kHostGroupedRowsF64Fn : zb::kHostGroupedRowsFn;
    arguments = {arith::ConstantIntOp::create(rewriter, loc, plan.transB, 32),
                 i64Const(plan.rows),
                 i64Const(plan.n),
                 i64Const(plan.k),
                 i64Const(plan.groups),
                 pa,
                 sa[0],
                 pb,
                 sb[1],
                 sb[0],
                 betaValue,
                 pc,
                 sc[0],
                 pg,
                 sg[0]};
  }
  SmallVector<Type> types;
  for (Value argument : arguments)
    types.push_back(argument.getType());
  OpBuilder declare = OpBuilder::atBlockBegin(module.getBody());
  zb::declareRuntimeFunction(declare, module, name,
                             FunctionType::get(ctx, types, {}),
                             /*cInterface=*/false);
  func::CallOp::create(rewriter, loc, module.lookupSymbol<func::FuncOp>(name),
                       arguments);
}

unsigned zb::lowerGroupedProductsToCalls(ModuleOp module) {
  SmallVector<std::pair<linalg::LinalgOp, GroupedPlan>> products;
  module.walk([&](linalg::LinalgOp op) {
    if (FailureOr<GroupedPlan> plan = planGrouped(op); succeeded(plan))
      products.emplace_back(op, *plan);
  });
  IRRewriter rewriter(module.getContext());
  for (auto &[op, plan] : products) {
    double beta = takeZeroFill(rewriter, op, plan.a, plan.b);
    rewriter.setInsertionPoint(op);
    emitGroupedCall(rewriter, op, plan, beta);
    rewriter.eraseOp(op);
  }
  return products.size();
}

unsigned zb::lowerGemmsToCalls(ModuleOp module, StringRef callee,
                               StringRef f64Callee, StringRef termsCallee) {
  SmallVector<std::pair<linalg::LinalgOp, GemmPlan>> gemms;
  module.walk([&](linalg::LinalgOp op) {
    FailureOr<GemmPlan> plan = planGemm(op);
    if (succeeded(plan) && (plan->element.isF32() || !f64Callee.empty()))
      gemms.emplace_back(op, *plan);
    else
      LLVM_DEBUG(if (linalg::isaContractionOpInterface(op)) llvm::dbgs()
                 << "not a runtime gemm: " << op << "\n");
  });
  IRRewriter rewriter(module.getContext());
  // The f32, the f64 and the f32 terms callee, declared on first use.
  func::FuncOp callees[3];
  for (auto &[op, plan] : gemms) {
    double beta = takeZeroFill(rewriter, op, plan.a, plan.b);
    bool f64 = plan.element.isF64();
    bool terms = !f64 && plan.terms != 0 && !termsCallee.empty();
    func::FuncOp &fn = callees[terms ? 2 : f64];
    if (!fn)
      fn = declareGemm(module,
                       terms ? termsCallee
                       : f64 ? f64Callee
                             : callee,
                       plan.element, terms);
    rewriter.setInsertionPoint(op);
    emitGemmCall(rewriter, op, plan, fn, beta, terms);
    rewriter.eraseOp(op);
  }
  return gemms.size();
}

namespace {
struct LowerGemmToRuntimePass
    : zb::impl::ZBLowerGemmToRuntimeBase<LowerGemmToRuntimePass> {
  void runOnOperation() override {
    zb::lowerGemmsToCalls(getOperation(), zb::kHostGemmFn, zb::kHostGemmF64Fn,
                          zb::kHostGemmTermsFn);
    zb::lowerGroupedProductsToCalls(getOperation());
  }
};

struct LowerGemmToCUBLASPass
    : zb::impl::ZBLowerGemmToCUBLASBase<LowerGemmToCUBLASPass> {
  using Base::Base;

  void runOnOperation() override {
    if (dtype != "f32" && dtype != "bf16") {
      getOperation().emitError("zb-lower-gemm-to-cublas: unknown dtype '")
          << dtype.getValue() << "'; known: f32, bf16";
      return signalPassFailure();
    }
    zb::lowerGemmsToCalls(getOperation(), dtype == "bf16" ? zb::kGPUGemmBF16Fn
                                                          : zb::kGPUGemmFn);
  }
};
} // namespace
