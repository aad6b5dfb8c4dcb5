// A decoding step that appends its token's key and value to the KV cache
// (capacity 512) in place and attends to the cache: %len holds the tokens
// each sequence has, this one included. The kernel writes row len - 1 of
// %k and %v in the caller's memory and reads nothing else of the cache
// beyond the first len rows.
func.func @step(%q: tensor<4x8x1x64xbf16>, %knew: tensor<4x2x1x64xbf16>,
                %vnew: tensor<4x2x1x64xbf16>, %k: tensor<4x2x512x64xbf16>,
                %v: tensor<4x2x512x64xbf16>, %len: tensor<4xi32>)
    -> tensor<4x8x1x64xbf16> {
  %k1 = attn.append %knew, %k lengths(%len : tensor<4xi32>)
      : tensor<4x2x1x64xbf16> into tensor<4x2x512x64xbf16>
  %v1 = attn.append %vnew, %v lengths(%len : tensor<4xi32>)
      : tensor<4x2x1x64xbf16> into tensor<4x2x512x64xbf16>
  %o, %lse = attn.attention %q, %k1, %v1 causal cache lengths(%len : tensor<4xi32>)
      : tensor<4x8x1x64xbf16>, tensor<4x2x512x64xbf16>, tensor<4x2x512x64xbf16>
        -> tensor<4x8x1x64xbf16>, tensor<4x8x1xf32>
  return %o : tensor<4x8x1x64xbf16>
}
