// Causal attention with key padding, MQA, Sq = 4 != Skv = 6, and a
// mask_mod hiding key 1 from every query (used by compile-run-masked.test).
func.func @masked_rows(%q: tensor<2x2x4x8xf32>, %k: tensor<2x1x6x8xf32>, %v: tensor<2x1x6x8xf32>,
                       %len: tensor<2xi32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal lengths(%len : tensor<2xi32>)
      : tensor<2x2x4x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x6x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1 : index
    %visible = arith.cmpi ne, %j, %one : index
    attn.yield %visible : i1
  }
  return %o, %lse : tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
}
