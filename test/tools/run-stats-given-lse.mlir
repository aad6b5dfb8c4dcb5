// RUN: attnc run %s --check | FileCheck %s
// RUN: %if vulkan %{ attnc run %s --target=vulkan --check | FileCheck %s %}

// Statistics over an LSE the caller passes (here random, not the LSE of
// these scores): every target computes them for p = exp(S' - lse) as
// given, the float64 reference too, and the gradients are the partial
// derivatives of H = sum_j p (lse - S') for that lse. (The reference used
// to recompute the LSE, and the gradients assumed sum_j p = 1: the check
// FAILED on correct kernels.) Rows over several key blocks; GQA.
// CHECK: forward   h
// CHECK: forward   m
// CHECK: forward   p
// CHECK: forward   s
// CHECK: gradient  d_q
// CHECK: gradient  d_k
// CHECK: gradient  d_lse
// CHECK: check passed

func.func @stats(%q: tensor<1x4x100x32xf32>, %k: tensor<1x2x150x32xf32>, %lse: tensor<1x4x100xf32>)
    -> (tensor<1x4x100xf32>, tensor<1x4xf32>, tensor<1x4x8x8xf32>, tensor<1x4x4xf32>) {
  %h, %m, %p, %s = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x100x32xf32>, tensor<1x2x150x32xf32>, tensor<1x4x100xf32>
        -> entropy tensor<1x4x100xf32> mean_entropy tensor<1x4xf32> pooled tensor<1x4x8x8xf32> similarity tensor<1x4x4xf32>
  return %h, %m, %p, %s : tensor<1x4x100xf32>, tensor<1x4xf32>, tensor<1x4x8x8xf32>, tensor<1x4x4xf32>
}
