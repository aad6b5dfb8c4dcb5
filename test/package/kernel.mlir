// Kernels with answers known in closed form, for the package consumer test.

// One key: its softmax weight is exactly 1, so O = V (broadcast over the
// queries) and LSE = the one score = (q . k) * scale.
func.func @single_key(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x1x4xf32>,
                      %v: tensor<1x2x1x4xf32>)
    -> (tensor<1x2x3x4xf32>, tensor<1x2x3xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x2x3x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>
        -> tensor<1x2x3x4xf32>, tensor<1x2x3xf32>
  return %o, %lse : tensor<1x2x3x4xf32>, tensor<1x2x3xf32>
}

// Two identical keys shared by two query heads (GQA): equal weights, so O is
// the mean of the two V rows.
func.func @two_equal_keys(%q: tensor<1x2x2x4xf32>, %k: tensor<1x1x2x4xf32>,
                          %v: tensor<1x1x2x4xf32>) -> tensor<1x2x2x4xf32> {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x2x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
        -> tensor<1x2x2x4xf32>, tensor<1x2x2xf32>
  return %o : tensor<1x2x2x4xf32>
}
