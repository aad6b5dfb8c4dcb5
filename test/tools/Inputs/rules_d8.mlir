// run-edge-cases.mlir: gradient rules of sin, cos, exp2, log2, rsqrt, powf, fpowi and erf (D = 8).
func.func @rules_d8(%q: tensor<1x2x24x8xf32>, %k: tensor<1x2x24x8xf32>, %v: tensor<1x2x24x8xf32>, %c: tensor<2xf32>) -> tensor<1x2x24x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%c : tensor<2xf32>) : tensor<1x2x24x8xf32>, tensor<1x2x24x8xf32>, tensor<1x2x24x8xf32> -> tensor<1x2x24x8xf32>, tensor<1x2x24xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %cap: tensor<2xf32>):
    %ch = tensor.extract %cap[%h] : tensor<2xf32>
    %x = arith.mulf %s, %ch : f32
    %one = arith.constant 1.0 : f32
    %x2 = arith.mulf %x, %x : f32
    %t = arith.addf %x2, %one : f32
    %a1 = math.sin %x : f32
    %a2 = math.cos %x : f32
    %a3 = math.exp2 %x : f32
    %a4 = math.log2 %t : f32
    %a5 = math.rsqrt %t : f32
    %p = arith.constant 1.5 : f32
    %a6 = math.powf %t, %p : f32
    %n = arith.constant 3 : i32
    %a7 = math.fpowi %x, %n : f32, i32
    %a8 = math.erf %x : f32
    %b1 = arith.addf %a1, %a2 : f32
    %b2 = arith.addf %a3, %a4 : f32
    %b3 = arith.addf %a5, %a6 : f32
    %b4 = arith.addf %a7, %a8 : f32
    %c1 = arith.addf %b1, %b2 : f32
    %c2 = arith.addf %b3, %b4 : f32
    %c3 = arith.addf %c1, %c2 : f32
    %w = arith.constant 0.1 : f32
    %c4 = arith.mulf %c3, %w : f32
    %r = arith.addf %s, %c4 : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x24x8xf32>
}
