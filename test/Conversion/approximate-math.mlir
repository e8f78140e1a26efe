// RUN: zb-opt %s --zb-approximate-math | FileCheck %s
// RUN: zb-opt %s --zb-approximate-math="ops=exp" | FileCheck %s --check-prefix=EXP

// f32 erf, exp and log become inline arithmetic; f64 stays for libm.
// CHECK-LABEL: func.func @f32(
// CHECK-NOT: math.erf
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK: return
// EXP-LABEL: func.func @f32(
// EXP: math.erf
// EXP-NOT: math.exp
// EXP: math.log
func.func @f32(%x: f32) -> (f32, f32, f32) {
  %e = math.erf %x : f32
  %x2 = math.exp %x : f32
  %l = math.log %x : f32
  return %e, %x2, %l : f32, f32, f32
}

// CHECK-LABEL: func.func @f64(
// CHECK: math.erf %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64(%x: f64) -> (f64, f64) {
  %e = math.erf %x : f64
  %x2 = math.exp %x : f64
  return %e, %x2 : f64, f64
}
