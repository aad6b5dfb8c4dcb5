// bench.mlir's causal attention with its mask as a mask_mod region.
func.func @region(%q: tensor<1x2x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x2x64x32xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32> -> tensor<1x2x64x32xf32>, tensor<1x2x64xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi ule, %j, %i : index
    attn.yield %keep : i1
  }
  return %o : tensor<1x2x64x32xf32>
}
