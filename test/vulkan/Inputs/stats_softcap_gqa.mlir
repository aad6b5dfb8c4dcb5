// Attention with every statistic over its LSE (GQA, causal, a softcap
// score_mod, bf16 inputs): the GPU statistics kernels, and in the
// backward the entropy's gradient kernels (no Sq x Skv buffer).
func.func @stats(%q: tensor<1x4x70x32xbf16>, %k: tensor<1x2x90x32xbf16>, %v: tensor<1x2x90x32xbf16>)
    -> (tensor<1x4x70x32xbf16>, tensor<1x4x70xf32>, tensor<1x4xf32>, tensor<1x4x5x7xf32>, tensor<1x4x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x70x32xbf16>, tensor<1x2x90x32xbf16>, tensor<1x2x90x32xbf16> -> tensor<1x4x70x32xbf16>, tensor<1x4x70xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 5.0 : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %c : f32
    attn.yield %r : f32
  }
  %h, %m, %p, %s = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x70x32xbf16>, tensor<1x2x90x32xbf16>, tensor<1x4x70xf32>
        -> entropy tensor<1x4x70xf32> mean_entropy tensor<1x4xf32> pooled tensor<1x4x5x7xf32> similarity tensor<1x4x4xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 5.0 : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %c : f32
    attn.yield %r : f32
  }
  return %o, %h, %m, %p, %s : tensor<1x4x70x32xbf16>, tensor<1x4x70xf32>, tensor<1x4xf32>, tensor<1x4x5x7xf32>, tensor<1x4x4xf32>
}
