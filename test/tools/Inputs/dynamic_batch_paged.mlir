// A paged KV cache read with a dynamic batch: the pool has no batch, the
// lengths and block tables do.
func.func @step(%q: tensor<?x8x1x64xbf16>, %k: tensor<64x2x16x64xbf16>,
                %v: tensor<64x2x16x64xbf16>, %len: tensor<?xi32>,
                %table: tensor<?x8xi32>) -> tensor<?x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<?xi32>)
      pages(%table : tensor<?x8xi32>)
      : tensor<?x8x1x64xbf16>, tensor<64x2x16x64xbf16>, tensor<64x2x16x64xbf16>
        -> tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
  return %o : tensor<?x8x1x64xbf16>
}
