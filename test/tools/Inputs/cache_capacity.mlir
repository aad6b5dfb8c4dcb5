// A cache of capacity 40 with head dimension 64: the tools draw random
// lengths within the capacity (past it the kernels return
// ATTNC_STATUS_BAD_SIZE), not up to the largest dimension.
func.func @step(%q: tensor<2x4x3x64xf32>, %k: tensor<2x2x40x64xf32>, %len: tensor<2xi32>) -> tensor<2x4x3x64xf32> {
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>)
      : tensor<2x4x3x64xf32>, tensor<2x2x40x64xf32>, tensor<2x2x40x64xf32> -> tensor<2x4x3x64xf32>, tensor<2x4x3xf32>
  return %o : tensor<2x4x3x64xf32>
}
