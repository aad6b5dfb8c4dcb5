// A similarity alone: its derived backward returns zero gradients for Q and
// K, one constant of their type (test/codegen/distinct-returned-buffers.mlir).
func.func @one(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x2xf32> {
  %s = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> similarity tensor<1x2x2xf32>
  return %s : tensor<1x2x2xf32>
}
