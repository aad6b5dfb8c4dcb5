// ALiBi with learnable per-head slopes: a float capture whose gradient the
// GPU backward accumulates per key and sums in key order.
func.func @alibi_captures(%q: tensor<2x4x33x64xf32>, %k: tensor<2x2x33x64xf32>,
                          %v: tensor<2x2x33x64xf32>, %slopes: tensor<4xf32>)
    -> tensor<2x4x33x64xf32> {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%slopes : tensor<4xf32>)
      : tensor<2x4x33x64xf32>, tensor<2x2x33x64xf32>, tensor<2x2x33x64xf32>
        -> tensor<2x4x33x64xf32>, tensor<2x4x33xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%h] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<2x4x33x64xf32>
}
