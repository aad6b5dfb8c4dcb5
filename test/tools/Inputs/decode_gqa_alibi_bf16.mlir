// A bf16 GQA decode step (Sq = 1; 8 batch x KV-head tasks, so each task
// runs both query heads of its KV head over one packed K/V block at a
// time) with per-head ALiBi slopes and per-batch lengths.
func.func @dec(%q: tensor<2x8x1x64xbf16>, %k: tensor<2x4x300x64xbf16>, %v: tensor<2x4x300x32xbf16>, %slopes: tensor<8xf32>, %len: tensor<2xi32>) -> tensor<2x8x1x32xbf16> {
  %o, %lse = attn.attention %q, %k, %v lengths(%len : tensor<2xi32>) score_captures(%slopes : tensor<8xf32>) : tensor<2x8x1x64xbf16>, tensor<2x4x300x64xbf16>, tensor<2x4x300x32xbf16> -> tensor<2x8x1x32xbf16>, tensor<2x8x1xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
    %m = tensor.extract %sl[%h] : tensor<8xf32>
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %d = arith.subi %jj, %ii : i32
    %df = arith.sitofp %d : i32 to f32
    %x = arith.mulf %m, %df : f32
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %o : tensor<2x8x1x32xbf16>
}
