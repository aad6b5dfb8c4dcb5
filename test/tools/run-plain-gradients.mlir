// attnc run on specs that return the O of one attn.attention without
// regions: their gradients are also checked element by element, against
// the float64 backward of tools/reference (ref::attentionBackward), beside
// the directional finite-difference check every gradient gets. An argument
// that is both Q and K gets the sum of both gradients.
// RUN: attnc run %s --check | FileCheck %s

// CHECK: @window_lengths: compiled
// CHECK-NEXT: per-element  directional FD
// CHECK-NEXT: forward   o            {{[0-9.]+e-(0[6-9]|1[0-9])$}}
// CHECK-NEXT: gradient  d_q          {{[0-9.]+e-(0[6-9]|1[0-9])}}     {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: gradient  d_k          {{[0-9.]+e-(0[6-9]|1[0-9])}}     {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: gradient  d_v          {{[0-9.]+e-(0[6-9]|1[0-9])}}     {{[0-9.]+e-[0-9]+$}}
func.func @window_lengths(%q: tensor<1x4x40x16xf32>, %k: tensor<1x2x40x16xf32>,
                          %v: tensor<1x2x40x16xf32>, %len: tensor<1xi32>)
    -> tensor<1x4x40x16xf32> {
  %o, %lse = attn.attention %q, %k, %v window 9 lengths(%len : tensor<1xi32>)
      : tensor<1x4x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x40x16xf32>, tensor<1x4x40xf32>
  return %o : tensor<1x4x40x16xf32>
}

// CHECK: @q_is_k: compiled
// CHECK-NEXT: per-element  directional FD
// CHECK-NEXT: forward   o            {{[0-9.]+e[-+][0-9]+$}}
// CHECK-NEXT: gradient  d_q          {{[0-9.]+e-(0[3-9]|1[0-9])}}     {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: gradient  d_v          {{[0-9.]+e-(0[3-9]|1[0-9])}}     {{[0-9.]+e-[0-9]+$}}
func.func @q_is_k(%q: tensor<1x2x33x16xf16>, %v: tensor<1x2x33x16xf16>)
    -> tensor<1x2x33x16xf16> {
  %o, %lse = attn.attention %q, %q, %v causal
      : tensor<1x2x33x16xf16>, tensor<1x2x33x16xf16>, tensor<1x2x33x16xf16>
        -> tensor<1x2x33x16xf16>, tensor<1x2x33xf32>
  return %o : tensor<1x2x33x16xf16>
}

// A spec that also returns the LSE has no such reference: n/a.
// CHECK: @with_lse: compiled
// CHECK: gradient  d_q          n/a          {{[0-9.]+e-[0-9]+$}}
// CHECK: check passed
func.func @with_lse(%q: tensor<1x2x16x16xf32>)
    -> (tensor<1x2x16x16xf32>, tensor<1x2x16xf32>) {
  %o, %lse = attn.attention %q, %q, %q causal
      : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>
        -> tensor<1x2x16x16xf32>, tensor<1x2x16xf32>
  return %o, %lse : tensor<1x2x16x16xf32>, tensor<1x2x16xf32>
}
