func.func @lengths_masked_row(%q: tensor<3x2x33x64xf32>, %k: tensor<3x2x33x64xf32>, %v: tensor<3x2x33x64xf32>, %len: tensor<3xi32>)
    -> (tensor<3x2x33x64xf32>, tensor<3x2x33xf32>) {
  %o, %lse = attn.attention %q, %k, %v lengths(%len : tensor<3xi32>)
      : tensor<3x2x33x64xf32>, tensor<3x2x33x64xf32>, tensor<3x2x33x64xf32>
        -> tensor<3x2x33x64xf32>, tensor<3x2x33xf32>
  return %o, %lse : tensor<3x2x33x64xf32>, tensor<3x2x33xf32>
}
