// ALiBi over causal attention; %slopes is captured by the score_mod region.
func.func @alibi(%q: tensor<2x8x80x32xf32>, %k: tensor<2x8x80x32xf32>,
                 %v: tensor<2x8x80x32xf32>, %slopes: tensor<8xf32>) -> tensor<2x8x80x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%slopes : tensor<8xf32>)
      : tensor<2x8x80x32xf32>, tensor<2x8x80x32xf32>, tensor<2x8x80x32xf32>
        -> tensor<2x8x80x32xf32>, tensor<2x8x80xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
    %m = tensor.extract %sl[%h] : tensor<8xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<2x8x80x32xf32>
}
