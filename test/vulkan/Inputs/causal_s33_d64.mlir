func.func @causal_s33_d64(%q: tensor<1x2x33x64xf32>, %k: tensor<1x2x33x64xf32>, %v: tensor<1x2x33x64xf32>)
    -> (tensor<1x2x33x64xf32>, tensor<1x2x33xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>
        -> tensor<1x2x33x64xf32>, tensor<1x2x33xf32>
  return %o, %lse : tensor<1x2x33x64xf32>, tensor<1x2x33xf32>
}
