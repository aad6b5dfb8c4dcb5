// run-edge-cases.mlir: math.ipowi in a score_mod ((i - j)^2 as a bias).
func.func @ipowi(%q: tensor<1x1x16x16xf32>, %k: tensor<1x1x16x16xf32>, %v: tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32> -> tensor<1x1x16x16xf32>, tensor<1x1x16xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %i, %j : index
    %di = arith.index_cast %d : index to i32
    %two = arith.constant 2 : i32
    %p = math.ipowi %di, %two : i32
    %pf = arith.sitofp %p : i32 to f32
    %c = arith.constant -1.000000e-02 : f32
    %bias = arith.mulf %pf, %c : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x16x16xf32>
}
