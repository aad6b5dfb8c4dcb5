// A distance bias of 2 per key over 4000 keys: scores up to 8000 (see
// run-edge-cases.mlir, LARGE).
func.func @big_bias(%q: tensor<1x2x16x32xf32>, %k: tensor<1x2x4000x32xf32>, %v: tensor<1x2x4000x32xf32>) -> tensor<1x2x16x32xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x16x32xf32>, tensor<1x2x4000x32xf32>, tensor<1x2x4000x32xf32> -> tensor<1x2x16x32xf32>, tensor<1x2x16xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %c = arith.constant 2.0 : f32
    %bias = arith.mulf %c, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x16x32xf32>
}
