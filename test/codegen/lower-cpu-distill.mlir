// RUN: attnc-opt %s -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// attn.distill on CPU: one task per (batch, head, query tile), 2 x 4 x 6,
// over both sides' K^T copies (the teacher's 4 KV heads, 32 wide; the
// student's 2, 16 wide); the mean form sums the rows afterwards. No Sq x Skv
// buffer, nothing unfused.
// CHECK-LABEL: func.func private @__attnc_flash_distill
// CHECK-SAME: memref<2x2x3x16x32xf32>, %{{.*}}: memref<2x4x70xf32>, %{{.*}}: memref<2x4x70x32xbf16>, %{{.*}}: memref<2x4x3x32x32xf32>
// CHECK-LABEL: func.func @kd
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_distill({{.*}}, %c0{{.*}}, %c48)
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
func.func @kd(%qs: tensor<2x4x70x16xf32>, %ks: tensor<2x2x90x16xf32>, %ls: tensor<2x4x70xf32>,
              %qt: tensor<2x4x70x32xbf16>, %kt: tensor<2x4x90x32xbf16>, %lt: tensor<2x4x70xf32>)
    -> tensor<f32> {
  %m = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>
        teacher tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32> -> tensor<f32>
  return %m : tensor<f32>
}
