// A decoding step over a paged KV cache: 6 pages of 16 tokens, a block
// table of 4 pages per sequence (capacity 64), GQA.
func.func @decode(%q: tensor<2x4x1x32xf32>, %k: tensor<6x2x16x32xf32>, %v: tensor<6x2x16x32xf32>,
                  %len: tensor<2xi32>, %table: tensor<2x4xi32>) -> tensor<2x4x1x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<2xi32>) pages(%table : tensor<2x4xi32>)
      : tensor<2x4x1x32xf32>, tensor<6x2x16x32xf32>, tensor<6x2x16x32xf32> -> tensor<2x4x1x32xf32>, tensor<2x4x1xf32>
  return %o : tensor<2x4x1x32xf32>
}
