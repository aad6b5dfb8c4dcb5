// 1024 query rows for one key at D = 128: the dK/dV kernel must not run
// more loop iterations per invocation than lavapipe allows (65535).
func.func @f(%q: tensor<1x1x1024x128xf32>, %k: tensor<1x1x1x128xf32>, %v: tensor<1x1x1x128xf32>) -> tensor<1x1x1024x128xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x1024x128xf32>, tensor<1x1x1x128xf32>, tensor<1x1x1x128xf32> -> tensor<1x1x1024x128xf32>, tensor<1x1x1024xf32>
  return %o : tensor<1x1x1024x128xf32>
}
