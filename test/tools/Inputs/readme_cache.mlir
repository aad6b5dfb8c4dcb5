// A chunk of 16 tokens (a prefill chunk; 1 for a decoding step) attending
// to a KV cache of capacity 256 with a sliding window of 128: %len holds
// the tokens each sequence has, this chunk's included (the caller wrote
// its keys and values at [len - 16, len)). One kernel for every length.
func.func @chunk(%q: tensor<2x8x16x64xbf16>, %k: tensor<2x2x256x64xbf16>,
                 %v: tensor<2x2x256x64xbf16>, %len: tensor<2xi32>)
    -> tensor<2x8x16x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal window 128 cache lengths(%len : tensor<2xi32>)
      : tensor<2x8x16x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>
        -> tensor<2x8x16x64xbf16>, tensor<2x8x16xf32>
  return %o : tensor<2x8x16x64xbf16>
}
