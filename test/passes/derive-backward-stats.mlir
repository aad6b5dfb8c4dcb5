// RUN: attnc-opt %s -attn-derive-backward | FileCheck %s

// attn.attention_stats's rule: the entropies' cotangents give one
// attn.attention_stats_grad (with the op's options and regions), whose
// dLSE reaches the attention's attn.attention_grad as its lse_grad and
// whose dQ and dK add to the attention's; the pooled map's cotangent is
// ignored (forward only).
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: %[[DO:[^:]*]]: tensor<1x4x33x16xf32>, %[[DH:[^:]*]]: tensor<1x4x33xf32>, %[[DM:[^:]*]]: tensor<1x4xf32>, %{{[^:]*}}: tensor<1x4x2x3xf32>)
// CHECK: %[[SQ:[^,]*]], %[[SK:[^,]*]], %[[SL:[^ ]*]] = attn.attention_stats_grad %{{.*}}, %{{.*}}, %{{.*}} entropy_grad(%[[DH]] : tensor<1x4x33xf32>) mean_entropy_grad(%[[DM]] : tensor<1x4xf32>) causal
// CHECK: math.tanh
// CHECK: %[[AQ:[^,]*]], %[[AK:[^,]*]], %[[AV:[^ ]*]] = attn.attention_grad %{{.*}}, %[[DO]] lse_grad(%[[SL]] : tensor<1x4x33xf32>) causal
// CHECK-DAG: %[[Q:.*]] = arith.addf %[[SQ]], %[[AQ]]
// CHECK-DAG: %[[K:.*]] = arith.addf %[[SK]], %[[AK]]
// CHECK: return %[[Q]], %[[K]], %[[AV]]
func.func @f(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4x33xf32>, tensor<1x4xf32>, tensor<1x4x2x3xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = math.tanh %s : f32
    attn.yield %t : f32
  }
  %h, %m, %p = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> entropy tensor<1x4x33xf32> mean_entropy tensor<1x4xf32> pooled tensor<1x4x2x3xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %hh: index, %i: index, %j: index):
    %t = math.tanh %s : f32
    attn.yield %t : f32
  }
  return %o, %h, %m, %p : tensor<1x4x33x16xf32>, tensor<1x4x33xf32>, tensor<1x4xf32>, tensor<1x4x2x3xf32>
}
