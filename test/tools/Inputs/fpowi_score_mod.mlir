// run-edge-cases.mlir: math.fpowi in a score_mod (s^3).
func.func @fpowi(%q: tensor<1x1x16x16xf32>, %k: tensor<1x1x16x16xf32>, %v: tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32> -> tensor<1x1x16x16xf32>, tensor<1x1x16xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %n = arith.constant 3 : i32
    %r = math.fpowi %s, %n : f32, i32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x16x16xf32>
}
