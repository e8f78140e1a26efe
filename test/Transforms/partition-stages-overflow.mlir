// RUN: zb-opt %s --zb-partition-stages=stages=3 -verify-diagnostics

// An op whose iteration space overflows a double (22 loops of 2^48 each,
// over tensors of 1 PiB): its cost and every split's are infinite, and the
// partition says so.
!v = tensor<281474976710656xf32>
// expected-error @below {{the ops' costs sum past a double's range; the partition cannot balance them}}
func.func @m(%x: !v, %w: !v {zb.param = "w"}) -> tensor<f32> {
  %a = linalg.add ins(%x, %w : !v, !v) outs(%x : !v) -> !v
  %b = linalg.add ins(%a, %w : !v, !v) outs(%x : !v) -> !v
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d0)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d1)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d2)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d3)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d4)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d5)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d6)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d7)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d8)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d9)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d10)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d11)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d12)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d13)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d14)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d15)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d16)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d17)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d18)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d19)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d20)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> (d21)>,
                      affine_map<(d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20,d21) -> ()>],
                       iterator_types = ["reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction", "reduction"]}
      ins(%b, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w, %w : !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v, !v) outs(%z : tensor<f32>) {
  ^bb0(%a0: f32, %a1: f32, %a2: f32, %a3: f32, %a4: f32, %a5: f32, %a6: f32, %a7: f32, %a8: f32, %a9: f32, %a10: f32, %a11: f32, %a12: f32, %a13: f32, %a14: f32, %a15: f32, %a16: f32, %a17: f32, %a18: f32, %a19: f32, %a20: f32, %a21: f32, %acc: f32):
    %s = arith.addf %a0, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
