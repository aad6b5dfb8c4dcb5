// RUN: attnc-opt %s -split-input-file -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// attn.attention_stats over the LSE of an attn.attention with the same Q,
// K and options: the forward kernel computes the entropies online (its
// sixth buffer) and the head similarity, each task covering every head of
// its query tiles (one group of tiles per batch here: 2 tasks, the
// similarity's partials [B, groups, H, H]); the mean is summed over the
// rows afterwards. The pooled map's row cells (5 rows) are finer than a
// query tile: it comes from the statistics kernel, which recomputes P a
// score tile at a time (one task per row cell: 8 cells x 2 batches).
// With the similarity, the forward's tasks read K^T and V from copies made
// once per call (K^T in padded 32-key tiles, V in f32 column chunks), which
// the products prefetch ahead, whatever their size (without the
// similarity, copies past 16 MiB are packed a block at a time per task
// instead: lower-cpu-packed.mlir).
// CHECK-LABEL: func.func private @__attnc_flash_transpose_2x2x48x16xf32_3
// CHECK-LABEL: func.func private @__attnc_flash_chunk_2x2x48x16xf32
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<2x4x40x16xf32>, %{{.*}}: memref<2x2x3x16x32xf32>, %{{.*}}: memref<2x2x1x64x32xf32>
// CHECK-SAME: memref<2x4x40x16xf32>, %{{.*}}: memref<2x4x40xf32>, %{{.*}}: memref<2x4x40xf32>, %{{.*}}: memref<2x1x4x4xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK: memref.prefetch %{{.*}}, read, locality<3>, data : memref<2x2x48x32xf32>
// CHECK: memref.prefetch %{{.*}}, read, locality<3>, data : memref<2x2x1x64x32xf32>
// CHECK-LABEL: func.func private @__attnc_flash_stats
// CHECK-SAME: memref<2x4x8x6xf32>, %{{.*}}: memref<2x8x4x1xf32>
// CHECK-LABEL: func.func @stats
// CHECK-NOT: attn.
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_forward({{.*}}, %c0{{.*}}, %c2)
// CHECK: call @__attnc_flash_stats({{.*}}, %{{.*}}, %c0{{.*}}, %c16)
// CHECK: return
func.func @stats(%q: tensor<2x4x40x16xf32>, %k: tensor<2x2x48x16xf32>, %v: tensor<2x2x48x16xf32>)
    -> (tensor<2x4x40x16xf32>, tensor<2x4x40xf32>, tensor<2x4xf32>, tensor<2x4x8x6xf32>, tensor<2x4x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<2x4x40x16xf32>, tensor<2x2x48x16xf32>, tensor<2x2x48x16xf32>
        -> tensor<2x4x40x16xf32>, tensor<2x4x40xf32>
  %h, %m, %map, %sim = attn.attention_stats %q, %k, %lse causal
      : tensor<2x4x40x16xf32>, tensor<2x2x48x16xf32>, tensor<2x4x40xf32>
        -> entropy tensor<2x4x40xf32> mean_entropy tensor<2x4xf32> pooled tensor<2x4x8x6xf32> similarity tensor<2x4x4xf32>
  return %o, %h, %m, %map, %sim : tensor<2x4x40x16xf32>, tensor<2x4x40xf32>, tensor<2x4xf32>, tensor<2x4x8x6xf32>, tensor<2x4x4xf32>
}

// -----

// A different mask than the attention's: no companion, the statistics
// kernel computes the entropies itself; without a pooled grid its row
// cells are chunks of 8 query tiles (1 here).
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: memref<1x2x40xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-LABEL: func.func private @__attnc_flash_stats
// CHECK: vector.reduction <add>
// CHECK-LABEL: func.func @other_mask
// CHECK: call @__attnc_flash_stats({{.*}}, %c0{{.*}}, %c1)
func.func @other_mask(%q: tensor<1x2x40x16xf32>, %k: tensor<1x2x48x16xf32>, %v: tensor<1x2x48x16xf32>)
    -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x2x40x16xf32>, tensor<1x2x48x16xf32>, tensor<1x2x48x16xf32>
        -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  %h = attn.attention_stats %q, %k, %lse window 8
      : tensor<1x2x40x16xf32>, tensor<1x2x48x16xf32>, tensor<1x2x40xf32> -> entropy tensor<1x2x40xf32>
  return %o, %h : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

// Row cells of 33 rows or more hold a query tile (12 rows): the forward
// pools P, into a partial per query tile and row cell [B, H, 9 tiles, 2,
// Gk] summed afterwards, and computes the similarity (9 groups of one
// tile: 18 tasks); no statistics kernel.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: memref<2x4x100xf32>, %{{.*}}: memref<2x4x9x2x7xf32>, %{{.*}}: memref<2x9x4x4xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-NOT: __attnc_flash_stats
// CHECK-LABEL: func.func @pool
// CHECK: call @__attnc_flash_forward({{.*}}, %c0{{.*}}, %c18)
// CHECK-NOT: __attnc_flash_stats
// CHECK: return
func.func @pool(%q: tensor<2x4x100x32xf32>, %k: tensor<2x2x130x32xf32>, %v: tensor<2x2x130x32xf32>)
    -> (tensor<2x4x100x32xf32>, tensor<2x4x3x7xf32>, tensor<2x4x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<2x4x100x32xf32>, tensor<2x2x130x32xf32>, tensor<2x2x130x32xf32>
        -> tensor<2x4x100x32xf32>, tensor<2x4x100xf32>
  %map, %sim = attn.attention_stats %q, %k, %lse causal
      : tensor<2x4x100x32xf32>, tensor<2x2x130x32xf32>, tensor<2x4x100xf32>
        -> pooled tensor<2x4x3x7xf32> similarity tensor<2x4x4xf32>
  return %o, %map, %sim : tensor<2x4x100x32xf32>, tensor<2x4x3x7xf32>, tensor<2x4x4xf32>
}
