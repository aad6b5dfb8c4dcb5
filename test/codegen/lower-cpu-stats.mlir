// RUN: attnc-opt %s -split-input-file -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// attn.attention_stats over the LSE of an attn.attention with the same Q,
// K and options: the forward kernel computes the entropies online (its
// sixth buffer), the mean is summed over the rows afterwards, and the
// pooled map and similarity come from the statistics kernel, which
// recomputes P a score tile at a time (one task per row cell: 8 cells x 2
// batches; the similarity's partials [B, cells, H, H]).
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: memref<2x4x40x16xf32>, %{{.*}}: memref<2x4x40xf32>, %{{.*}}: memref<2x4x40xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-LABEL: func.func private @__attnc_flash_stats
// CHECK-SAME: memref<2x4x8x6xf32>, %{{.*}}: memref<2x8x4x4xf32>
// CHECK-LABEL: func.func @stats
// CHECK-NOT: attn.
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_forward
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
// Gk] summed afterwards; the similarity alone is left to the statistics
// kernel.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: memref<2x4x100xf32>, %{{.*}}: memref<2x4x9x2x7xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-LABEL: func.func private @__attnc_flash_stats
// CHECK-SAME: memref<2x4x1x1xf32>, %{{.*}}: memref<2x2x4x4xf32>
// CHECK-LABEL: func.func @pool
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
