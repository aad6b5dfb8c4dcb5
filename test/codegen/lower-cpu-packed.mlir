// RUN: attnc-opt %s -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// A GQA decoding step (one query row a head): no per-call copy of K or V.
// One task per (batch, KV head), 8 of them, runs both query heads of its
// KV head; it packs each key block it is at, K^T's 16 x 16 blocks
// transposed by shuffles and V's column chunks, into its own scratch.
// CHECK-NOT: __attnc_flash_transpose
// CHECK-NOT: __attnc_flash_chunk
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<2x8x1x32xf32>, %[[K:.*]]: memref<2x4x300x32xf32>, %[[V:.*]]: memref<2x4x300x32xf32>
// CHECK-DAG: %[[KT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x{{[0-9]+}}x32x32xf32>
// CHECK-DAG: %[[VC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x1x{{[0-9]+}}x32xf32>
// CHECK: vector.shuffle
// CHECK: vector.store %{{.*}}, %[[KT]]
// CHECK: vector.store %{{.*}}, %[[VC]]
// CHECK-LABEL: func.func @decode
// CHECK: call @__attnc_flash_forward({{.*}}, %c0{{.*}}, %c8)
func.func @decode(%q: tensor<2x8x1x32xf32>, %k: tensor<2x4x300x32xf32>, %v: tensor<2x4x300x32xf32>) -> tensor<2x8x1x32xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<2x8x1x32xf32>, tensor<2x4x300x32xf32>, tensor<2x4x300x32xf32> -> tensor<2x8x1x32xf32>, tensor<2x8x1xf32>
  return %o : tensor<2x8x1x32xf32>
}
