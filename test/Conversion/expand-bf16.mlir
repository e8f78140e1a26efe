// RUN: zb-opt %s --zb-expand-bf16 | FileCheck %s

// The conversions to and from bf16 become integer arithmetic on the bits
// (rounding to nearest even); an f32 -> f64 extension is left alone.
// CHECK-LABEL: func.func @round_trip
// CHECK-NOT: arith.truncf {{.*}} to bf16
// CHECK-NOT: arith.extf {{.*}} bf16 to
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.shrui
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// CHECK: arith.extf %{{.*}} : f32 to f64
func.func @round_trip(%x: f32) -> (bf16, f32, f64) {
  %n = arith.truncf %x : f32 to bf16
  %w = arith.extf %n : bf16 to f32
  %d = arith.extf %x : f32 to f64
  return %n, %w, %d : bf16, f32, f64
}
