// RUN: attnc-opt %s -attn-derive-backward -attn-plan-tiles -attn-lower-cpu | FileCheck %s

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
