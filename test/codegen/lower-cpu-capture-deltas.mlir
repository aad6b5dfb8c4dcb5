// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s

// With a bf16 output, Delta = rowsum(dO * O) reads O's rounding; a float
// capture whose gradient element sums terms of one row's keys (a table at
// j / 2, two keys per element) cancels (sum_j P (dP - Delta) = 0) and
// needs Delta from P and dP, the exact pass. A table each of a row's keys
// reads apart (a relative position's rel[h, j - i + 63]) takes Delta from
// O, as a spec without captures does. So does a capture read per head
// (ALiBi's slope[h], a temperature t[]): the backward sums each row's
// sum_j P dP and sum_j P dS'/dC per split ([splits, B, H, Sq, 1 + reads])
// and corrects the gradient by the rows' Delta errors afterwards.
// CHECK-LABEL: func.func @slopes
// CHECK-NOT: call @__attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_deltas
// CHECK: %[[SUMS:.*]] = memref.alloc() {{.*}} : memref<1x1x2x64x2xf32>
// CHECK: call @__attnc_flash_backward_kv({{.*}}%[[SUMS]]
// CHECK: memref.load %[[SUMS]]
// CHECK-NOT: call @__attnc_flash_exact_deltas
// CHECK-LABEL: func.func @temperature
// CHECK-NOT: call @__attnc_flash_exact_deltas
// CHECK: memref.alloc() {{.*}} : memref<1x1x2x64x2xf32>
// CHECK-LABEL: func.func @relative
// CHECK-NOT: call @__attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_deltas
// CHECK-NOT: call @__attnc_flash_exact_deltas
// CHECK-LABEL: func.func @pairs
// CHECK: call @__attnc_flash_exact_deltas

func.func @slopes(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %t: tensor<2xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32>) {
  %dq, %dk, %dv, %dt = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%t : tensor<2xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %slope = tensor.extract %c[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %x = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dt : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2xf32>
}

func.func @temperature(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %t: tensor<f32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<f32>) {
  %dq, %dk, %dv, %dt = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%t : tensor<f32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<f32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<f32>):
    %x = tensor.extract %c[] : tensor<f32>
    %r = arith.mulf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dt : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<f32>
}

func.func @relative(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %t: tensor<2x143xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x143xf32>) {
  %dq, %dk, %dv, %dt = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%t : tensor<2x143xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x143xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2x143xf32>):
    %c63 = arith.constant 63 : index
    %d = arith.subi %j, %i : index
    %at = arith.addi %d, %c63 : index
    %x = tensor.extract %c[%h, %at] : tensor<2x143xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dt : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x143xf32>
}

func.func @pairs(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>, %t: tensor<2x40xf32>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x40xf32>) {
  %dq, %dk, %dv, %dt = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%t : tensor<2x40xf32>) : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x40xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2x40xf32>):
    %c2 = arith.constant 2 : index
    %at = arith.divui %j, %c2 : index
    %x = tensor.extract %c[%h, %at] : tensor<2x40xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dt : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<2x40xf32>
}
