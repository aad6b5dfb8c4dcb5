func.func @window_s257_d80(%q: tensor<1x1x257x80xf32>, %k: tensor<1x1x257x80xf32>, %v: tensor<1x1x257x80xf32>)
    -> (tensor<1x1x257x80xf32>, tensor<1x1x257xf32>) {
  %o, %lse = attn.attention %q, %k, %v window 40
      : tensor<1x1x257x80xf32>, tensor<1x1x257x80xf32>, tensor<1x1x257x80xf32>
        -> tensor<1x1x257x80xf32>, tensor<1x1x257xf32>
  return %o, %lse : tensor<1x1x257x80xf32>, tensor<1x1x257xf32>
}
