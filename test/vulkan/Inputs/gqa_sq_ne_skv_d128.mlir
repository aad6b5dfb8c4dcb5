func.func @gqa_sq_ne_skv_d128(%q: tensor<1x4x17x128xf32>, %k: tensor<1x2x40x128xf32>, %v: tensor<1x2x40x128xf32>)
    -> (tensor<1x4x17x128xf32>, tensor<1x4x17xf32>) {
  %o, %lse = attn.attention %q, %k, %v 
      : tensor<1x4x17x128xf32>, tensor<1x2x40x128xf32>, tensor<1x2x40x128xf32>
        -> tensor<1x4x17x128xf32>, tensor<1x4x17xf32>
  return %o, %lse : tensor<1x4x17x128xf32>, tensor<1x4x17xf32>
}
