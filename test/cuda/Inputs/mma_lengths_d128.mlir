// The tensor-core kernels at D = 128 (the backward's half steps) in f16,
// with key lengths (a batch may have none: fully masked rows) and
// Sq != Skv.
func.func @mma_lengths_d128(%q: tensor<3x2x70x128xf16>, %k: tensor<3x2x200x128xf16>,
                            %v: tensor<3x2x200x128xf16>, %len: tensor<3xi32>)
    -> tensor<3x2x70x128xf16> {
  %o, %lse = attn.attention %q, %k, %v lengths(%len : tensor<3xi32>)
      : tensor<3x2x70x128xf16>, tensor<3x2x200x128xf16>, tensor<3x2x200x128xf16>
        -> tensor<3x2x70x128xf16>, tensor<3x2x70xf32>
  return %o : tensor<3x2x70x128xf16>
}
