func.func @k_erf16(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x4x16xf32>, %v: tensor<1x1x4x16xf32>) -> tensor<1x1x4x16xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32> -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %t = arith.truncf %s : f32 to f16
    %u = math.erf %t : f16
    %r = arith.extf %u : f16 to f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x4x16xf32>
}
