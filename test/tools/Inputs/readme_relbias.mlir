// A learned relative-position bias: score + table[h, j - i + 63], the table
// [H, 2S - 1] captured by the score_mod region (a float input of the kernel:
// @rel_bias_bwd writes its gradient d_table).
func.func @rel_bias(%q: tensor<1x4x64x32xf32>, %k: tensor<1x4x64x32xf32>,
                    %v: tensor<1x4x64x32xf32>, %table: tensor<4x127xf32>)
    -> tensor<1x4x64x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%table : tensor<4x127xf32>)
      : tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>
        -> tensor<1x4x64x32xf32>, tensor<1x4x64xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<4x127xf32>):
    %c63 = arith.constant 63 : index
    %ji = arith.subi %j, %i : index
    %col = arith.addi %ji, %c63 : index
    %bias = tensor.extract %t[%h, %col] : tensor<4x127xf32>
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x4x64x32xf32>
}
