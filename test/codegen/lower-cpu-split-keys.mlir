// RUN: attnc-opt %s -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// Split-KV: one KV head over 5000 keys takes 4 key ranges (the plan's
// splits). The forward's tasks (4 per (batch, KV head), its 8 query heads
// the rows of one query tile: O and LSE seen as [1, 1, 8, ...]) write
// partial O and LSE; the merge, one task per (batch, KV head), combines
// them in split order into O and LSE.
// CHECK-LABEL: func.func private @__attnc_flash_forward(
// CHECK-SAME: memref<4x1x1x8x64xf32>, %{{.*}}: memref<4x1x1x8xf32>
// CHECK: memref.subview %{{.*}} [1, 1, 1, 8, 64]
// CHECK-LABEL: func.func private @__attnc_flash_merge_splits_4x1x1x8x64xf32(
// CHECK-COUNT-4: memref.load %{{.*}} : memref<4x1x1x8xf32>
// CHECK-COUNT-3: arith.maximumf
// CHECK: math.log
// CHECK-LABEL: func.func @step(
// CHECK: %[[PO:.*]] = memref.alloc() {{.*}} : memref<4x1x1x8x64xf32>
// CHECK: %[[PL:.*]] = memref.alloc() {{.*}} : memref<4x1x1x8xf32>
// CHECK: call @__attnc_flash_forward({{.*}}, %[[PO]], %[[PL]], %{{.*}}, %c4)
// CHECK: call @__attnc_flash_merge_splits_4x1x1x8x64xf32(%[[PO]], %[[PL]], %{{.*}}, %{{.*}}, %{{.*}}, %c1)
func.func @step(%q: tensor<1x8x1x64xf32>, %k: tensor<1x1x5000x64xf32>) -> (tensor<1x8x1x64xf32>, tensor<1x8x1xf32>) {
  %o, %l = attn.attention %q, %k, %k : tensor<1x8x1x64xf32>, tensor<1x1x5000x64xf32>, tensor<1x1x5000x64xf32> -> tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
  return %o, %l : tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
}
