// One spec, two kernels: @decode takes a dynamic batch, @decode_one is the
// same attention at a batch of 1 (what @decode runs for each entry).
func.func @decode(%q: tensor<?x8x1x64xbf16>, %k: tensor<?x2x300x64xbf16>,
                  %v: tensor<?x2x300x64xbf16>, %len: tensor<?xi32>)
    -> tensor<?x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<?xi32>)
      : tensor<?x8x1x64xbf16>, tensor<?x2x300x64xbf16>, tensor<?x2x300x64xbf16>
        -> tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
  return %o : tensor<?x8x1x64xbf16>
}
func.func @decode_one(%q: tensor<1x8x1x64xbf16>, %k: tensor<1x2x300x64xbf16>,
                      %v: tensor<1x2x300x64xbf16>, %len: tensor<1xi32>)
    -> tensor<1x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<1xi32>)
      : tensor<1x8x1x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>
        -> tensor<1x8x1x64xbf16>, tensor<1x8x1xf32>
  return %o : tensor<1x8x1x64xbf16>
}
