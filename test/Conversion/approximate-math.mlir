// RUN: zb-opt %s --zb-approximate-math | FileCheck %s
// RUN: zb-opt %s --zb-approximate-math="ops=exp" | FileCheck %s --check-prefix=EXP

// f32 erf, exp, log and tanh become inline arithmetic; f64 stays for libm.
// CHECK-LABEL: func.func @f32(
// CHECK-NOT: math.erf
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK: return
// EXP-LABEL: func.func @f32(
// EXP: math.erf
// EXP-NOT: math.exp
// EXP: math.log
// EXP: math.tanh
func.func @f32(%x: f32) -> (f32, f32, f32, f32) {
  %e = math.erf %x : f32
  %x2 = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  return %e, %x2, %l, %t : f32, f32, f32, f32
}

// f32 erf: x clamped to [-3.8, 3.8] (NaN kept: ordered comparisons), then
// x P(x^2) / Q(x^2), P of degree 6 and Q of degree 4 by Horner's rule from
// the highest coefficient down to P(0) = 2/sqrt(pi) and Q(0) = 1; no other
// selects.
// CHECK-LABEL: func.func @erf(
// CHECK-SAME: %[[X:.*]]: f32
// CHECK: %[[HI:.*]] = arith.constant 3.800000e+00 : f32
// CHECK: %[[ABOVE:.*]] = arith.cmpf ogt, %[[X]], %[[HI]]
// CHECK: %[[X1:.*]] = arith.select %[[ABOVE]], %[[HI]], %[[X]]
// CHECK: %[[LO:.*]] = arith.constant -3.800000e+00 : f32
// CHECK: %[[BELOW:.*]] = arith.cmpf olt, %[[X1]], %[[LO]]
// CHECK: %[[XC:.*]] = arith.select %[[BELOW]], %[[LO]], %[[X1]]
// CHECK: %[[X2:.*]] = arith.mulf %[[XC]], %[[XC]]
// CHECK-NOT: arith.select
// CHECK: arith.constant 2.13654481E-8 : f32
// CHECK-COUNT-5: math.fma %{{.*}}, %[[X2]], %{{.*}}
// CHECK: %[[P0:.*]] = arith.constant 1.12837923 : f32
// CHECK: %[[P:.*]] = math.fma %{{.*}}, %[[X2]], %[[P0]]
// CHECK-NOT: math.fma
// CHECK: %[[NUM:.*]] = arith.mulf %[[XC]], %[[P]]
// CHECK: arith.constant 8.70202318E-4 : f32
// CHECK-COUNT-3: math.fma %{{.*}}, %[[X2]], %{{.*}}
// CHECK: %[[Q0:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[Q:.*]] = math.fma %{{.*}}, %[[X2]], %[[Q0]]
// CHECK-NOT: math.fma
// CHECK-NOT: arith.select
// CHECK: %[[R:.*]] = arith.divf %[[NUM]], %[[Q]] : f32
// CHECK: return %[[R]]
func.func @erf(%x: f32) -> f32 {
  %e = math.erf %x : f32
  return %e : f32
}

// The same on vectors, with splat constants.
// CHECK-LABEL: func.func @erf_vector(
// CHECK: arith.constant dense<3.800000e+00> : vector<8xf32>
// CHECK-COUNT-10: math.fma {{.*}} : vector<8xf32>
// CHECK-NOT: math.fma
// CHECK: arith.divf {{.*}} : vector<8xf32>
func.func @erf_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %e = math.erf %x : vector<8xf32>
  return %e : vector<8xf32>
}

// f16 erf keeps MLIR's approximation (coefficients picked per interval).
// CHECK-LABEL: func.func @erf_f16(
// CHECK-NOT: math.erf
// CHECK-NOT: 3.800000e+00
// CHECK: arith.select
// CHECK: arith.divf {{.*}} : f16
func.func @erf_f16(%x: f16) -> f16 {
  %e = math.erf %x : f16
  return %e : f16
}

// CHECK-LABEL: func.func @f64(
// CHECK: math.erf %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64(%x: f64) -> (f64, f64) {
  %e = math.erf %x : f64
  %x2 = math.exp %x : f64
  return %e, %x2 : f64, f64
}
