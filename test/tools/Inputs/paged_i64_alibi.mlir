// A paged cache with i64 lengths and block table, bf16, and a score_mod
// (ALiBi) over the cache's key positions.
func.func @decode(%q: tensor<3x8x1x64xbf16>, %k: tensor<12x2x32x64xbf16>, %v: tensor<12x2x32x64xbf16>,
                  %len: tensor<3xi64>, %table: tensor<3x4xi64>, %slopes: tensor<8xf32>) -> tensor<3x8x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<3xi64>) pages(%table : tensor<3x4xi64>)
      score_captures(%slopes : tensor<8xf32>)
      : tensor<3x8x1x64xbf16>, tensor<12x2x32x64xbf16>, tensor<12x2x32x64xbf16> -> tensor<3x8x1x64xbf16>, tensor<3x8x1xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<8xf32>):
    %sl = tensor.extract %m[%h] : tensor<8xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %sl, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<3x8x1x64xbf16>
}
