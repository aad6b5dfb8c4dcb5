// ALiBi: score + slope[h] * (j - i), with the per-head slopes captured as a
// tensor (a differentiable input), and a causal mask.
func.func @alibi(%q: tensor<2x8x80x32xf32>, %k: tensor<2x8x80x32xf32>,
                 %v: tensor<2x8x80x32xf32>, %slopes: tensor<8xf32>)
    -> tensor<2x8x80x32xf32> {
  %s = attn.scores %q, %k : tensor<2x8x80x32xf32>, tensor<2x8x80x32xf32> -> tensor<2x8x80x80xf32>
  %t = attn.scale %s : tensor<2x8x80x80xf32>
  %b = attn.score_mod %t captures(%slopes : tensor<8xf32>) : tensor<2x8x80x80xf32> {
  ^bb0(%score: f32, %bi: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
    %slope = tensor.extract %sl[%h] : tensor<8xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %score, %bias : f32
    attn.yield %r : f32
  }
  %m = attn.mask %b causal : tensor<2x8x80x80xf32>
  %p = attn.softmax %m : tensor<2x8x80x80xf32>
  %o = attn.apply %p, %v : tensor<2x8x80x80xf32>, tensor<2x8x80x32xf32> -> tensor<2x8x80x32xf32>
  return %o : tensor<2x8x80x32xf32>
}
