// Math ops MLIR 22's convert-math-to-spirv has no pattern for (erf, erfc,
// cbrt, exp2, trunc), on scores of both signs (attn-spirv-math), and a
// negative index difference cast to i64 and compared (attn-spirv-sign-extend).
func.func @math_ops(%q: tensor<1x2x24x16xf32>, %k: tensor<1x2x24x16xf32>,
                    %v: tensor<1x2x24x16xf32>) -> tensor<1x2x24x16xf32> {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>
        -> tensor<1x2x24x16xf32>, tensor<1x2x24xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %half = arith.constant 0.5 : f32
    %three = arith.constant 3.0 : f32
    %tenth = arith.constant 0.1 : f32
    %x = arith.mulf %s, %half : f32
    %e1 = math.erf %x : f32
    %e2 = math.erfc %x : f32
    %e3 = math.cbrt %x : f32
    %e4 = math.exp2 %x : f32
    %x3 = arith.mulf %x, %three : f32
    %e5 = math.trunc %x3 : f32
    %a1 = arith.addf %e1, %e2 : f32
    %a2 = arith.addf %a1, %e3 : f32
    %a3 = arith.addf %a2, %e4 : f32
    %a4 = arith.addf %a3, %e5 : f32
    %d = arith.subi %i, %j : index
    %d64 = arith.index_cast %d : index to i64
    %zero = arith.constant 0 : i64
    %before = arith.cmpi slt, %d64, %zero : i64
    %one = arith.constant 1.0 : f32
    %fzero = arith.constant 0.0 : f32
    %bias = arith.select %before, %one, %fzero : f32
    %a5 = arith.addf %a4, %bias : f32
    %m = arith.mulf %a5, %tenth : f32
    %r = arith.addf %s, %m : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x24x16xf32>
}
