// A paged cache whose V rows (8 wide) the flash kernel does not take: the
// unfused lowering gathers the pages; an i64 block table.
func.func @decode(%q: tensor<2x4x3x32xf32>, %k: tensor<6x2x16x32xf32>, %v: tensor<6x2x16x8xf32>,
                  %len: tensor<2xi32>, %table: tensor<2x4xi64>) -> tensor<2x4x3x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal window 9 cache lengths(%len : tensor<2xi32>) pages(%table : tensor<2x4xi64>)
      : tensor<2x4x3x32xf32>, tensor<6x2x16x32xf32>, tensor<6x2x16x8xf32> -> tensor<2x4x3x8xf32>, tensor<2x4x3xf32>
  return %o : tensor<2x4x3x8xf32>
}
