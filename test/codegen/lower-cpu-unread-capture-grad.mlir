// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s

// A float capture's gradient that nothing reads (a constant table's: the
// derived @f_bwd returns gradients of its inputs only) is not computed: no
// partial rows, and with a bf16 output no row sums to correct Delta
// (taken from O, as without captures). The same backward returning the
// slopes' gradient has both.
// CHECK-LABEL: func.func @read
// CHECK: call @__attnc_zero_partials
// CHECK: memref.alloc() {{.*}} : memref<1x1x2x64x2xf32>
// CHECK: call @__attnc_flash_backward_kv
// CHECK-LABEL: func.func @unread
// CHECK-NOT: __attnc_zero_partials
// CHECK-NOT: memref<1x1x2x64x2xf32>
// CHECK-NOT: __attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_deltas
// CHECK-NOT: __attnc_zero_partials
// CHECK-NOT: __attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_backward_kv
// CHECK: return
func.func @read(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %sl: tensor<2xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32>) {
  %dq, %dk, %dv, %dsl = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%sl : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %slope = tensor.extract %c[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dsl : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32>
}

func.func @unread(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %sl: tensor<2xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>) {
  %dq, %dk, %dv, %dsl = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%sl : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %slope = tensor.extract %c[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>
}
