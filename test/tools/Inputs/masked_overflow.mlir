// run-edge-cases.mlir: the score_mod's derivative overflows on masked keys.
func.func @masked_overflow(%q: tensor<1x1x300x8xf32>, %k: tensor<1x1x300x8xf32>, %v: tensor<1x1x300x8xf32>) -> tensor<1x1x300x8xf32> {
  %o, %lse = attn.attention %q, %k, %v window 2 : tensor<1x1x300x8xf32>, tensor<1x1x300x8xf32>, tensor<1x1x300x8xf32> -> tensor<1x1x300x8xf32>, tensor<1x1x300xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %i, %j : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %half = arith.constant 5.000000e-01 : f32
    %x = arith.mulf %df, %half : f32
    %e = math.exp %x : f32
    %r = arith.mulf %s, %e : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x300x8xf32>
}
