func.func @bf16_gqa(%q: tensor<1x4x33x64xbf16>, %k: tensor<1x1x33x64xbf16>, %v: tensor<1x1x33x64xbf16>)
    -> (tensor<1x4x33x64xbf16>, tensor<1x4x33xf32>) {
  %o, %lse = attn.attention %q, %k, %v 
      : tensor<1x4x33x64xbf16>, tensor<1x1x33x64xbf16>, tensor<1x1x33x64xbf16>
        -> tensor<1x4x33x64xbf16>, tensor<1x4x33xf32>
  return %o, %lse : tensor<1x4x33x64xbf16>, tensor<1x4x33xf32>
}
