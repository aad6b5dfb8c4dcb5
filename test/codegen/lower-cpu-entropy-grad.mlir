// RUN: attnc-opt %s -split-input-file -attn-derive-backward -attn-plan-tiles -attn-lower-cpu | FileCheck %s --check-prefixes=CHECK,AVX512
// RUN: attnc-opt %s -split-input-file -attn-derive-backward -attn-plan-tiles=vector-bits=128 -attn-lower-cpu=vector-bits=128 | FileCheck %s

// An entropy penalty's backward in one kernel: the derived
// attn.attention_stats_grad adds to attn.attention_grad's dQ and dK and
// gives its lse_grad; the CPU lowering folds it into the flash backward
// (dS' = P (dP - Delta - g S'), Delta less g mu), the rows' entropies from
// the statistics kernel first. No Sq x Skv buffer, no unfused op left.
// CHECK-LABEL: func.func @f_bwd(
// CHECK-NOT: attn.
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_stats
// CHECK: call @__attnc_flash_backward_kv
// CHECK: return
func.func @f(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
  %m = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> mean_entropy tensor<1x4xf32>
  return %o, %m : tensor<1x4x33x16xf32>, tensor<1x4xf32>
}

// -----

// What nothing uses is not computed: the similarity (requested, not
// returned) nowhere, the statistics op attn-derive-backward recomputes in
// @g_bwd not at all. On AVX-512 the pooled map (returned, row cells of 1
// row: finer than a query tile of several) takes a statistics kernel in
// the forward and the entropy's gradient another in the backward: two
// functions of one name outlined in either order get distinct names.
// AVX512-DAG: func.func private @__attnc_flash_stats(
// AVX512-DAG: func.func private @__attnc_flash_stats_0(
// CHECK-NOT: func.func private @__attnc_flash_stats_1(
// CHECK-LABEL: func.func @g_bwd(
// CHECK-NOT: attn.
// CHECK: return
func.func @g(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4xf32>, tensor<1x4x33x5xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
  %m, %p, %s = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> mean_entropy tensor<1x4xf32> pooled tensor<1x4x33x5xf32> similarity tensor<1x4x4xf32>
  return %o, %m, %p : tensor<1x4x33x16xf32>, tensor<1x4xf32>, tensor<1x4x33x5xf32>
}
