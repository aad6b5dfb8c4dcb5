// A spec with a private helper (used by private-helpers.test).
func.func private @helper(%s: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %p = attn.softmax %s : tensor<1x1x4x4xf32>
  return %p : tensor<1x1x4x4xf32>
}
func.func @kernel_a(%q: tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32> {
  %s = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %p = func.call @helper(%s) : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %p : tensor<1x1x4x4xf32>
}
