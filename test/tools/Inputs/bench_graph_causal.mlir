// bench.mlir's causal attention as a graph of attn ops.
func.func @graph(%q: tensor<1x2x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x2x64x32xf32> {
  %s = attn.scores %q, %k : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32> -> tensor<1x2x64x64xf32>
  %t = attn.scale %s : tensor<1x2x64x64xf32>
  %m = attn.mask %t causal : tensor<1x2x64x64xf32>
  %p = attn.softmax %m : tensor<1x2x64x64xf32>
  %o = attn.apply %p, %v : tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32> -> tensor<1x2x64x32xf32>
  return %o : tensor<1x2x64x32xf32>
}
