// Gemma-style tanh soft-capping, cap * tanh(score / cap) with cap = 30, and
// key padding by per-batch lengths, in bf16 (f32 accumulation and softmax).
func.func @softcap_padding(%q: tensor<3x4x50x64xbf16>, %k: tensor<3x4x70x64xbf16>,
                           %v: tensor<3x4x70x48xbf16>, %lengths: tensor<3xi32>)
    -> tensor<3x4x50x48xbf16> {
  %o, %lse = attn.attention %q, %k, %v lengths(%lengths : tensor<3xi32>)
      : tensor<3x4x50x64xbf16>, tensor<3x4x70x64xbf16>, tensor<3x4x70x48xbf16>
        -> tensor<3x4x50x48xbf16>, tensor<3x4x50xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  }
  return %o : tensor<3x4x50x48xbf16>
}
