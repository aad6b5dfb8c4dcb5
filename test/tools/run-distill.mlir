// RUN: attnc run %s --check | FileCheck %s
// RUN: %if vulkan %{ attnc run %s --target=vulkan --check | FileCheck %s %}

// attn.distill's KL (per row and mean) against the float64 interpreter, and
// the gradients of both sides (through attn.distill_grad and each
// attention's LSE gradient) by central differences; a bf16 teacher with
// other head dims and KV heads than the student's.
// CHECK: forward   kl
// CHECK: forward   m
// CHECK: gradient  d_qs
// CHECK: gradient  d_kt
// CHECK: check passed
func.func @kd(%qs: tensor<2x4x70x16xf32>, %ks: tensor<2x2x90x16xf32>, %vs: tensor<2x2x90x16xf32>,
              %qt: tensor<2x4x70x32xbf16>, %kt: tensor<2x4x90x32xbf16>, %vt: tensor<2x4x90x32xbf16>)
    -> (tensor<2x4x70x16xf32>, tensor<2x4x70xf32>, tensor<f32>) {
  %os, %ls = attn.attention %qs, %ks, %vs causal
      : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x2x90x16xf32> -> tensor<2x4x70x16xf32>, tensor<2x4x70xf32>
  %ot, %lt = attn.attention %qt, %kt, %vt causal
      : tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x90x32xbf16> -> tensor<2x4x70x32xbf16>, tensor<2x4x70xf32>
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>
        teacher tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32> -> tensor<2x4x70xf32>
  %m = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>
        teacher tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32> -> tensor<f32>
  return %os, %kl, %m : tensor<2x4x70x16xf32>, tensor<2x4x70xf32>, tensor<f32>
}
