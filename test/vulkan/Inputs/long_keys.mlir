// One query row over 40000 keys: more loop iterations per invocation than
// lavapipe runs (65535), so there the kernel must report its cut loops.
func.func @f(%q: tensor<1x1x1x64xf32>, %k: tensor<1x1x40000x64xf32>, %v: tensor<1x1x40000x64xf32>) -> tensor<1x1x1x64xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x1x64xf32>, tensor<1x1x40000x64xf32>, tensor<1x1x40000x64xf32> -> tensor<1x1x1x64xf32>, tensor<1x1x1xf32>
  return %o : tensor<1x1x1x64xf32>
}
