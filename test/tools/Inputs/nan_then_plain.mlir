// @a has a +inf score on row 0 (its forward is NaN there, legitimately);
// @b is plain attention with no NaN anywhere.
func.func @a(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %z = arith.cmpi eq, %i, %c0 : index
    %inf = arith.constant 0x7F800000 : f32
    %r = arith.select %z, %inf, %s : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x4x8xf32>
}

func.func @b(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32>
  return %o : tensor<1x1x4x8xf32>
}
