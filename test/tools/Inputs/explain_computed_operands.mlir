// Key lengths and captured ALiBi slopes that the function computes (here
// constants): explain evaluates them with the spec interpreter and passes
// them to the statistics function as arguments.
func.func @computed_operands(%q: tensor<2x4x40x16xf32>, %k: tensor<2x4x40x16xf32>,
                             %v: tensor<2x4x40x16xf32>) -> tensor<2x4x40x16xf32> {
  %slopes = arith.constant dense<[-0.5, -0.25, 0.0, 0.25]> : tensor<4xf32>
  %len = arith.constant dense<[30, 40]> : tensor<2xi32>
  %o, %lse = attn.attention %q, %k, %v causal lengths(%len : tensor<2xi32>)
      score_captures(%slopes : tensor<4xf32>)
      : tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32>
        -> tensor<2x4x40x16xf32>, tensor<2x4x40xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %slope = tensor.extract %sl[%h] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %score, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<2x4x40x16xf32>
}
