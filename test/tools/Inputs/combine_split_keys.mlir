// Attention over keys split in two, merged by attn.combine: O and LSE
// returned, so both carry gradients back through both parts.
func.func @split(%q: tensor<1x4x33x16xf32>, %k1: tensor<1x2x20x16xf32>, %v1: tensor<1x2x20x8xf32>,
                 %k2: tensor<1x2x27x16xf32>, %v2: tensor<1x2x27x8xf32>) -> (tensor<1x4x33x8xf32>, tensor<1x4x33xf32>) {
  %o1, %l1 = attn.attention %q, %k1, %v1 scale 0.25 : tensor<1x4x33x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20x8xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  %o2, %l2 = attn.attention %q, %k2, %v2 scale 0.25 : tensor<1x4x33x16xf32>, tensor<1x2x27x16xf32>, tensor<1x2x27x8xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  %o, %l = attn.combine %o1, %o2 lse %l1, %l2 : tensor<1x4x33x8xf32>, tensor<1x4x33x8xf32> lse tensor<1x4x33xf32>, tensor<1x4x33xf32> -> tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
  return %o, %l : tensor<1x4x33x8xf32>, tensor<1x4x33xf32>
}
