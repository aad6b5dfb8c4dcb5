// A decoding step that appends its key and value to the KV cache in place
// and attends to the cache (capacity 40), GQA, f32.
func.func @step(%q: tensor<2x4x1x32xf32>, %knew: tensor<2x2x1x32xf32>, %vnew: tensor<2x2x1x32xf32>,
                %k: tensor<2x2x40x32xf32>, %v: tensor<2x2x40x32xf32>,
                %len: tensor<2xi32>) -> tensor<2x4x1x32xf32> {
  %k1 = attn.append %knew, %k lengths(%len : tensor<2xi32>) : tensor<2x2x1x32xf32> into tensor<2x2x40x32xf32>
  %v1 = attn.append %vnew, %v lengths(%len : tensor<2xi32>) : tensor<2x2x1x32xf32> into tensor<2x2x40x32xf32>
  %o, %lse = attn.attention %q, %k1, %v1 causal cache lengths(%len : tensor<2xi32>)
      : tensor<2x4x1x32xf32>, tensor<2x2x40x32xf32>, tensor<2x2x40x32xf32> -> tensor<2x4x1x32xf32>, tensor<2x4x1xf32>
  return %o : tensor<2x4x1x32xf32>
}
