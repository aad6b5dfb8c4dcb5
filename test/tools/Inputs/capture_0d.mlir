// run-edge-cases.mlir: a 0-d score capture with its gradient in the flash backward.
func.func @capture_0d(%q: tensor<1x1x16x16xf32>, %k: tensor<1x1x16x16xf32>, %v: tensor<1x1x16x16xf32>, %c: tensor<f32>) -> tensor<1x1x16x16xf32> {
  %o, %l = attn.attention %q, %k, %v score_captures(%c : tensor<f32>) : tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32> -> tensor<1x1x16x16xf32>, tensor<1x1x16xf32>
    score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<f32>):
    %m = tensor.extract %x[] : tensor<f32>
    %r = arith.mulf %s, %m : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x16x16xf32>
}
