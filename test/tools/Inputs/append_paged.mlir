// A prefill chunk of 3 tokens appended to a paged KV cache (6 pages of 8
// tokens, 4 per sequence: capacity 32) in place, then attended with a
// sliding window, bf16.
func.func @chunk(%q: tensor<2x4x3x32xbf16>, %knew: tensor<2x2x3x32xbf16>, %vnew: tensor<2x2x3x32xbf16>,
                 %k: tensor<6x2x8x32xbf16>, %v: tensor<6x2x8x32xbf16>,
                 %len: tensor<2xi64>, %table: tensor<2x4xi32>) -> tensor<2x4x3x32xbf16> {
  %k1 = attn.append %knew, %k lengths(%len : tensor<2xi64>) pages(%table : tensor<2x4xi32>)
      : tensor<2x2x3x32xbf16> into tensor<6x2x8x32xbf16>
  %v1 = attn.append %vnew, %v lengths(%len : tensor<2xi64>) pages(%table : tensor<2x4xi32>)
      : tensor<2x2x3x32xbf16> into tensor<6x2x8x32xbf16>
  %o, %lse = attn.attention %q, %k1, %v1 causal window 5 cache lengths(%len : tensor<2xi64>) pages(%table : tensor<2x4xi32>)
      : tensor<2x4x3x32xbf16>, tensor<6x2x8x32xbf16>, tensor<6x2x8x32xbf16> -> tensor<2x4x3x32xbf16>, tensor<2x4x3xf32>
  return %o : tensor<2x4x3x32xbf16>
}
