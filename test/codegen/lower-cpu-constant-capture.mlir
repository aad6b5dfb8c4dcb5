// RUN: attnc-opt %s -split-input-file -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s

// A bf16 forward on dot products takes its softmax in base 2 (an FMA and
// 2^t) unless a float score capture may get a gradient, which would
// amplify 2^t's error in the LSE: a capture that is a constant of the spec
// gets none (attn-derive-backward differentiates into inputs only), so
// constant ALiBi slopes keep base 2; slopes given as an input take f32 exp
// (its polynomial's splat of log2 e).
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: arith.constant -1.44269502 : f32
// CHECK-NOT: dense<1.44269502> : vector<16xf32>
// CHECK-LABEL: func.func @constant
func.func @constant(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>) -> tensor<1x2x64x64xbf16> {
  %sl = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%sl : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %slope = tensor.extract %c[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x64x64xbf16>
}

// -----

// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: dense<1.44269502> : vector<16xf32>
// CHECK-LABEL: func.func @input
func.func @input(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %sl: tensor<2xf32>) -> tensor<1x2x64x64xbf16> {

  %o, %lse = attn.attention %q, %k, %v causal score_captures(%sl : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %slope = tensor.extract %c[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x64x64xbf16>
}
