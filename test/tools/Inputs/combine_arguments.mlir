// The exported merge of context-parallel attention: partial (O, LSE) pairs
// from separate calls in, their union out, and its gradients.
func.func @merge(%o1: tensor<1x3x10x8xf32>, %o2: tensor<1x3x10x8xf32>,
                 %l1: tensor<1x3x10xf32>, %l2: tensor<1x3x10xf32>)
    -> (tensor<1x3x10x8xf32>, tensor<1x3x10xf32>) {
  %o, %l = attn.combine %o1, %o2 lse %l1, %l2
      : tensor<1x3x10x8xf32>, tensor<1x3x10x8xf32>
        lse tensor<1x3x10xf32>, tensor<1x3x10xf32>
        -> tensor<1x3x10x8xf32>, tensor<1x3x10xf32>
  return %o, %l : tensor<1x3x10x8xf32>, tensor<1x3x10xf32>
}
