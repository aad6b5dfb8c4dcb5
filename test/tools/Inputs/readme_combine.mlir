// Context-parallel attention: the keys in two shards, each attended to on
// its own, the two (O, LSE) merged exactly. @merge alone is what a host
// that computed the shards elsewhere calls.
func.func @merge(%o1: tensor<1x8x64x32xf32>, %o2: tensor<1x8x64x32xf32>,
                 %l1: tensor<1x8x64xf32>, %l2: tensor<1x8x64xf32>)
    -> (tensor<1x8x64x32xf32>, tensor<1x8x64xf32>) {
  %o, %l = attn.combine %o1, %o2 lse %l1, %l2
      : tensor<1x8x64x32xf32>, tensor<1x8x64x32xf32>
        lse tensor<1x8x64xf32>, tensor<1x8x64xf32>
        -> tensor<1x8x64x32xf32>, tensor<1x8x64xf32>
  return %o, %l : tensor<1x8x64x32xf32>, tensor<1x8x64xf32>
}
