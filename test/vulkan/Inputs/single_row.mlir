func.func @single_row(%q: tensor<2x2x1x64xf32>, %k: tensor<2x1x1x64xf32>, %v: tensor<2x1x1x64xf32>)
    -> (tensor<2x2x1x64xf32>, tensor<2x2x1xf32>) {
  %o, %lse = attn.attention %q, %k, %v 
      : tensor<2x2x1x64xf32>, tensor<2x1x1x64xf32>, tensor<2x1x1x64xf32>
        -> tensor<2x2x1x64xf32>, tensor<2x2x1xf32>
  return %o, %lse : tensor<2x2x1x64xf32>, tensor<2x2x1xf32>
}
