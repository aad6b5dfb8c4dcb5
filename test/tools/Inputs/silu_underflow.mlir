// run-edge-cases.mlir: SiLU t / (1 + exp(-t)) of t = s - (i - j): for far
// keys t < -88, exp(-t) = inf and the output -0; the reverse sweep's
// adjoint of 1 + exp(-t) underflows to 0, and 0 times exp's derivative
// (inf) was NaN. Flash kernels (D = 16) and the unfused lowering (D = 8).
func.func @silu_flash(%q: tensor<1x2x200x16xf32>, %k: tensor<1x2x200x16xf32>, %v: tensor<1x2x200x16xf32>) -> tensor<1x2x200x16xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %i, %j : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %t = arith.subf %s, %df : f32
    %n = arith.negf %t : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.000000e+00 : f32
    %den = arith.addf %one, %e : f32
    %r = arith.divf %t, %den : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x200x16xf32>
}

func.func @silu_unfused(%q: tensor<1x2x200x8xf32>, %k: tensor<1x2x200x8xf32>, %v: tensor<1x2x200x8xf32>) -> tensor<1x2x200x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x200x8xf32>, tensor<1x2x200x8xf32>, tensor<1x2x200x8xf32> -> tensor<1x2x200x8xf32>, tensor<1x2x200xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %i, %j : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %t = arith.subf %s, %df : f32
    %n = arith.negf %t : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.000000e+00 : f32
    %den = arith.addf %one, %e : f32
    %r = arith.divf %t, %den : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x200x8xf32>
}
