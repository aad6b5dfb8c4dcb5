// RUN: attnc-opt %s -attn-derive-backward | FileCheck %s

// attn.combine's rule: one attn.combine_grad over the saved parts, whose
// dO_k and dLSE_k flow into each part's attention_grad (as its lse_grad).
// CHECK-LABEL: func.func @split_bwd(
// CHECK: %[[G:.*]]:4 = attn.combine_grad %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}} grad %{{.*}} :
// CHECK-DAG: attn.attention_grad {{.*}}, %[[G]]#1 lse_grad(%[[G]]#3 : tensor<1x4x33xf32>)
// CHECK-DAG: attn.attention_grad {{.*}}, %[[G]]#0 lse_grad(%[[G]]#2 : tensor<1x4x33xf32>)
func.func @split(%q: tensor<1x4x33x16xf32>, %k1: tensor<1x2x20x16xf32>, %v1: tensor<1x2x20x8xf32>,
                 %k2: tensor<1x2x27x16xf32>, %v2: tensor<1x2x27x8xf32>) -> tensor<1x4x33x8xf32> {
  %o1, %l1 = attn.attention %q, %k1, %v1 : tensor<1x4x33x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x8xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  %o2, %l2 = attn.attention %q, %k2, %v2 : tensor<1x4x33x16xf32>, tensor<1x2x27x16xf32>, tensor<1x2x27x8xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  %o, %l = attn.combine %o1, %o2 lse %l1, %l2 : tensor<1x4x33x8xf32>, tensor<1x4x33x8xf32> lse tensor<1x4x33xf32>, tensor<1x4x33xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  return %o : tensor<1x4x33x8xf32>
}
