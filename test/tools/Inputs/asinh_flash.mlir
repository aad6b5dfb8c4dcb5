func.func @k_asinh(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x4x16xf32>, %v: tensor<1x1x4x16xf32>) -> tensor<1x1x4x16xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32> -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c2 = arith.constant 2.0 : f32
    %x = arith.addf %s, %c2 : f32
    %r = math.asinh %x : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x4x16xf32>
}
