// The graph form, one op per step: an explicit scale (`by`), then a causal
// mask. Without `by`, attn.scale multiplies by 1/sqrt(D) of its attn.scores.
func.func @scaled(%q: tensor<1x2x32x16xf32>, %k: tensor<1x2x32x16xf32>,
                  %v: tensor<1x2x32x16xf32>) -> tensor<1x2x32x16xf32> {
  %s = attn.scores %q, %k : tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32> -> tensor<1x2x32x32xf32>
  %t = attn.scale %s by 0.125 : tensor<1x2x32x32xf32>
  %m = attn.mask %t causal : tensor<1x2x32x32xf32>
  %p = attn.softmax %m : tensor<1x2x32x32xf32>
  %o = attn.apply %p, %v : tensor<1x2x32x32xf32>, tensor<1x2x32x16xf32> -> tensor<1x2x32x16xf32>
  return %o : tensor<1x2x32x16xf32>
}
