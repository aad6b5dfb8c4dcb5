// Grouped-query attention (8 query heads, 2 KV heads) with a sliding window of
// 32 keys over given Q, K, V; Sq = Skv = 96, D = 64.
func.func @gqa_window(%q: tensor<1x8x96x64xf32>, %k: tensor<1x2x96x64xf32>,
                      %v: tensor<1x2x96x64xf32>)
    -> (tensor<1x8x96x64xf32>, tensor<1x8x96xf32>) {
  %o, %lse = attn.attention %q, %k, %v window 32
      : tensor<1x8x96x64xf32>, tensor<1x2x96x64xf32>, tensor<1x2x96x64xf32>
        -> tensor<1x8x96x64xf32>, tensor<1x8x96xf32>
  return %o, %lse : tensor<1x8x96x64xf32>, tensor<1x8x96xf32>
}
