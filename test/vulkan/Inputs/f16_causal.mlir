func.func @f16_causal(%q: tensor<1x2x33x64xf16>, %k: tensor<1x2x33x64xf16>, %v: tensor<1x2x33x64xf16>)
    -> (tensor<1x2x33x64xf16>, tensor<1x2x33xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x2x33x64xf16>, tensor<1x2x33x64xf16>, tensor<1x2x33x64xf16>
        -> tensor<1x2x33x64xf16>, tensor<1x2x33xf32>
  return %o, %lse : tensor<1x2x33x64xf16>, tensor<1x2x33xf32>
}
