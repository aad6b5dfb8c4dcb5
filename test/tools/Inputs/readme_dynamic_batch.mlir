// A decoding step for any number of sequences, each with its own length
// in a KV cache of capacity 512.
func.func @step(%q: tensor<?x8x1x64xbf16>, %k: tensor<?x2x512x64xbf16>,
                %v: tensor<?x2x512x64xbf16>, %len: tensor<?xi32>) -> tensor<?x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<?xi32>)
      : tensor<?x8x1x64xbf16>, tensor<?x2x512x64xbf16>, tensor<?x2x512x64xbf16>
        -> tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
  return %o : tensor<?x8x1x64xbf16>
}
