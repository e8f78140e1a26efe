//===- ScalarTangent.cpp - Derivatives of scalar computations -------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "ScalarTangent.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace zb::autodiff;

Value ScalarTangent::constant(Type type, double value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

Value ScalarTangent::orZero(Value tangent, Type type) {
  return tangent ? tangent : constant(type, 0.0);
}

FailureOr<Value> ScalarTangent::get(Value v) {
  if (v == seed)
    return seedTangent ? seedTangent : constant(v.getType(), 1.0);
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  if (!def || def->getParentRegion() != region || !isa<FloatType>(v.getType()))
    return Value();

  // Tangents of the float operands, in order.
  SmallVector<Value> t;
  for (Value operand : def->getOperands()) {
    if (!isa<FloatType>(operand.getType())) {
      t.push_back(Value());
      continue;
    }
    FailureOr<Value> operandTangent = get(operand);
    if (failed(operandTangent))
      return failure();
    t.push_back(*operandTangent);
  }
  // Rounding is flat between its steps: a derivative of 0, as PyTorch's.
  if (llvm::all_of(t, [](Value x) { return !x; }) ||
      isa<math::FloorOp, math::CeilOp, math::TruncOp, math::RoundEvenOp,
          math::RoundOp>(def))
    return memo[v] = Value();

  Type type = v.getType();
  auto mul = [&](Value x, Value y) -> Value {
    return arith::MulFOp::create(b, loc, x, y);
  };
  auto add = [&](Value x, Value y) -> Value {
    if (!x)
      return y;
    if (!y)
      return x;
    return arith::AddFOp::create(b, loc, x, y);
  };
  auto neg = [&](Value x) -> Value { return arith::NegFOp::create(b, loc, x); };
  auto div = [&](Value x, Value y) -> Value {
    return arith::DivFOp::create(b, loc, x, y);
  };

  Value result;
  Value r = v;
  if (isa<arith::AddFOp>(def)) {
    result = add(t[0], t[1]);
  } else if (isa<arith::SubFOp>(def)) {
    result = t[1] ? add(t[0], neg(t[1])) : t[0];
  } else if (isa<arith::MulFOp>(def)) {
    Value x = def->getOperand(0), y = def->getOperand(1);
    result = add(t[0] ? mul(t[0], y) : Value(), t[1] ? mul(x, t[1]) : Value());
  } else if (isa<arith::DivFOp>(def)) {
    // d(x/y) = (dx - r*dy) / y
    Value y = def->getOperand(1);
    Value num = add(t[0], t[1] ? neg(mul(r, t[1])) : Value());
    result = div(num, y);
  } else if (isa<arith::NegFOp>(def)) {
    result = neg(t[0]);
  } else if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
                 arith::MinNumFOp>(def)) {
    bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(def);
    Value pickFirst = arith::CmpFOp::create(
        b, loc, isMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT,
        def->getOperand(0), def->getOperand(1));
    result = arith::SelectOp::create(b, loc, pickFirst, orZero(t[0], type),
                                     orZero(t[1], type));
  } else if (auto select = dyn_cast<arith::SelectOp>(def)) {
    result = arith::SelectOp::create(b, loc, select.getCondition(),
                                     orZero(t[1], type), orZero(t[2], type));
  } else if (isa<math::ExpOp>(def)) {
    result = mul(t[0], r);
  } else if (isa<math::LogOp>(def)) {
    result = div(t[0], def->getOperand(0));
  } else if (isa<math::TanhOp>(def)) {
    // d tanh(x) = (1 - r^2) dx
    result = mul(t[0], arith::SubFOp::create(b, loc, constant(type, 1.0),
                                             mul(r, r)));
  } else if (isa<math::SinOp>(def)) {
    result = mul(t[0], math::CosOp::create(b, loc, def->getOperand(0)));
  } else if (isa<math::CosOp>(def)) {
    result = neg(mul(t[0], math::SinOp::create(b, loc, def->getOperand(0))));
  } else if (isa<math::SqrtOp>(def)) {
    result = div(mul(t[0], constant(type, 0.5)), r);
  } else if (isa<math::RsqrtOp>(def)) {
    // d x^(-1/2) = -1/2 x^(-3/2) dx = -1/2 r / x dx
    result = mul(t[0], div(mul(constant(type, -0.5), r), def->getOperand(0)));
  } else if (isa<math::ErfOp>(def)) {
    // d erf(x) = 2/sqrt(pi) exp(-x^2) dx
    Value x = def->getOperand(0);
    Value e = math::ExpOp::create(b, loc, neg(mul(x, x)));
    result = mul(t[0], mul(constant(type, 2.0 / std::sqrt(M_PI)), e));
  } else if (isa<math::ErfcOp>(def)) {
    // d erfc(x) = -2/sqrt(pi) exp(-x^2) dx
    Value x = def->getOperand(0);
    Value e = math::ExpOp::create(b, loc, neg(mul(x, x)));
    result = mul(t[0], mul(constant(type, -2.0 / std::sqrt(M_PI)), e));
  } else if (isa<math::PowFOp>(def)) {
    // d x^y = y x^(y-1) dx + r log(x) dy, with PyTorch's zeros where the
    // formulas are NaN: no dx where y = 0 (0 * x^-1 at x = 0), no dy
    // where x = 0 and y >= 0 (0 * log 0).
    Value x = def->getOperand(0), y = def->getOperand(1);
    Value zero = constant(type, 0.0);
    Value dx, dy;
    if (t[0]) {
      Value ym1 = arith::SubFOp::create(b, loc, y, constant(type, 1.0));
      dx = mul(t[0], mul(y, math::PowFOp::create(b, loc, x, ym1)));
      Value noExponent =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, y, zero);
      dx = arith::SelectOp::create(b, loc, noExponent, zero, dx);
    }
    if (t[1]) {
      dy = mul(t[1], mul(r, math::LogOp::create(b, loc, x)));
      Value zeroBase =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, zero);
      Value nonNegative =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, y, zero);
      Value flat = arith::AndIOp::create(b, loc, zeroBase, nonNegative);
      dy = arith::SelectOp::create(b, loc, flat, zero, dy);
    }
    result = add(dx, dy);
  } else if (isa<math::AbsFOp>(def)) {
    // sign(x) * t, 0 at x = 0 (PyTorch's subgradient there).
    Value x = def->getOperand(0), zero = constant(type, 0.0);
    Value isNeg =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
    Value isPos =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero);
    result = arith::SelectOp::create(
        b, loc, isNeg, neg(t[0]),
        arith::SelectOp::create(b, loc, isPos, t[0], zero));
  } else if (isa<arith::ExtFOp>(def)) {
    result = arith::ExtFOp::create(b, loc, type, t[0]);
  } else if (isa<arith::TruncFOp>(def)) {
    result = arith::TruncFOp::create(b, loc, type, t[0]);
  } else {
    return def->emitError("cannot differentiate '")
           << def->getName() << "' in a linalg.generic body";
  }
  return memo[v] = result;
}
