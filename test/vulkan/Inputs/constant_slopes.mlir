// ALiBi-like slopes written into the spec as a non-splat constant: on a GPU
// target they must reach the kernels as a device buffer.
func.func @ns(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %slopes = arith.constant dense<[0.5, -0.25]> : tensor<2xf32>
  %o, %lse = attn.attention %q, %k, %v score_captures(%slopes : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2xf32>):
    %x = tensor.extract %t[%h] : tensor<2xf32>
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %d = arith.subi %jj, %ii : i32
    %df = arith.sitofp %d : i32 to f32
    %m = arith.mulf %x, %df : f32
    %r = arith.addf %s, %m : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x4x8xf32>
}
