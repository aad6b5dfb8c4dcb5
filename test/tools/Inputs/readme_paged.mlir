// A decoding step over a paged KV cache: a pool of 64 pages of 16 tokens
// each (K and V: [pages, Hkv, 16, D]), and per sequence a block table of
// 8 pages (capacity 128): %table[b, m] holds tokens [16 m, 16 m + 16) of
// sequence b. Pages are read where they are, never gathered.
func.func @step(%q: tensor<2x8x1x64xbf16>, %k: tensor<64x2x16x64xbf16>,
                %v: tensor<64x2x16x64xbf16>, %len: tensor<2xi32>,
                %table: tensor<2x8xi32>) -> tensor<2x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<2xi32>)
      pages(%table : tensor<2x8xi32>)
      : tensor<2x8x1x64xbf16>, tensor<64x2x16x64xbf16>, tensor<64x2x16x64xbf16>
        -> tensor<2x8x1x64xbf16>, tensor<2x8x1xf32>
  return %o : tensor<2x8x1x64xbf16>
}
