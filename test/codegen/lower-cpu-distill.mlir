// RUN: attnc-opt %s -split-input-file -attn-plan-tiles -attn-lower-cpu | FileCheck %s

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

// -----

// attn.distill_grad: both sides' Q packed in query tiles once, then a pass
// per query tile (2 x 4 x 6 tasks: dQ and dLSE of both sides) and one per
// key block of each side (the student's 2 KV heads, the teacher's 4, 1
// block of 128 keys), never an Sq x Skv buffer.
// CHECK-LABEL: func.func @kd_grad
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_distill_pack
// CHECK: call @__attnc_flash_distill_dq({{.*}}, %c0{{.*}}, %c48)
// CHECK: call @__attnc_flash_distill_dk({{.*}}, %c0{{.*}}, %c4{{.*}})
// CHECK: call @__attnc_flash_distill_dk_teacher({{.*}}, %c0{{.*}}, %c8{{.*}})
func.func @kd_grad(%qs: tensor<2x4x70x16xf32>, %ks: tensor<2x2x90x16xf32>, %ls: tensor<2x4x70xf32>,
                   %qt: tensor<2x4x70x32xbf16>, %kt: tensor<2x4x90x32xbf16>, %lt: tensor<2x4x70xf32>,
                   %g: tensor<f32>)
    -> (tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>,
        tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32>) {
  %dqs, %dks, %dls, %dqt, %dkt, %dlt = attn.distill_grad %qs, %ks, %ls teacher %qt, %kt, %lt grad %g causal
      : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>
        teacher tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32> grad tensor<f32>
        -> tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>,
           tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32>
  return %dqs, %dks, %dls, %dqt, %dkt, %dlt : tensor<2x4x70x16xf32>, tensor<2x2x90x16xf32>, tensor<2x4x70xf32>,
      tensor<2x4x70x32xbf16>, tensor<2x4x90x32xbf16>, tensor<2x4x70xf32>
}
