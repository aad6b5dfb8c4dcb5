// RUN: attnc-opt %s -split-input-file -attn-plan-tiles=amx=true -attn-lower-cpu | FileCheck %s

// A bf16 AMX forward with a score_mod takes its softmax in base 2 too: the
// region on the scaled scores (tanh's division a reciprocal estimate), then
// t = S' log2(e) - m log2(e) in one FMA (the scale is not folded in: the
// region saw the scaled score), 2^t from round(t) and a degree-4
// polynomial. tanh expands into a polynomial (hasExpandedMath), so the
// softmax rows are not interleaved with the next tile's Q K^T: one scores
// buffer, no choice between two.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-NOT: arith.select %{{.*}} : memref<32x32xf32>
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<ninf,arcp> : vector<16xf32>
// CHECK: %[[T:.*]] = vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[K:.*]] = math.roundeven %[[T]] : vector<16xf32>
// CHECK-NEXT: arith.subf %[[T]], %[[K]] : vector<16xf32>
// CHECK-NEXT: arith.constant dense<0.00966636836> : vector<16xf32>
// CHECK-LABEL: func.func @softcap
func.func @softcap(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x32xbf16>) -> (tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x64x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  }
  return %o, %lse : tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
}

// -----

// With a float capture (ALiBi's slopes) the softmax keeps the f32 exp
// (k = round(x log2 e), then Cody-Waite): the capture's gradient, a sum over
// j - i, amplifies the LSE's error, which 2^t's 4e-6 would dominate. Its
// arithmetic is cheap: the two tiles of query rows are pipelined (step n's
// scores in one of two buffers).
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : memref<32x32xf32>
// CHECK-NOT: dense<0.00966636836>
// CHECK: %[[K:.*]] = math.roundeven %{{.*}} : vector<16xf32>
// CHECK-NEXT: arith.constant dense<-0.693359375> : vector<16xf32>
// CHECK-NEXT: vector.fma %[[K]], %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NOT: dense<0.00966636836>
// CHECK-LABEL: func.func @alibi
func.func @alibi(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x32xbf16>, %slopes: tensor<2xf32>) -> (tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%slopes : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>):
    %m = tensor.extract %sl[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o, %lse : tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
}
