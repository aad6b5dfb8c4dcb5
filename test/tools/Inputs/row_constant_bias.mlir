// A per-(b, h) bias added to every score of a row (run-edge-cases.mlir).
func.func @rowconst(%q: tensor<1x1x200x3xf32>, %k: tensor<1x1x200x3xf32>, %v: tensor<1x1x200x64xf32>, %bb: tensor<1x1xf32>) -> tensor<1x1x200x64xf32> {
  %o, %lse = attn.attention %q, %k, %v  score_captures(%bb : tensor<1x1xf32>) : tensor<1x1x200x3xf32>, tensor<1x1x200x3xf32>, tensor<1x1x200x64xf32> -> tensor<1x1x200x64xf32>, tensor<1x1x200xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<1x1xf32>):
    %x = tensor.extract %c[%b, %h] : tensor<1x1xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x200x64xf32>
}
