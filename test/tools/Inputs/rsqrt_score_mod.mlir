// run-edge-cases.mlir: math.rsqrt in a score_mod.
func.func @k(%q: tensor<1x1x16x16xf32>, %k: tensor<1x1x16x16xf32>, %v: tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32> -> tensor<1x1x16x16xf32>, tensor<1x1x16xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    %s2 = arith.mulf %s, %s : f32
    %t = arith.addf %s2, %one : f32
    %r = math.rsqrt %t : f32
    %m = arith.mulf %s, %r : f32
    attn.yield %m : f32
  }
  return %o : tensor<1x1x16x16xf32>
}
