// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s

// A [Sq, Skv] bias read at each score's key (bias[i, j]): the backward's
// tasks are its key splits over every (batch, KV head) (key_tasks), so
// that the bias's gradient is one buffer, each element added to by the
// one task that owns its key: one zeroed row and no sum of partials
// afterwards, where one row per task is summed for a bias read elsewhere
// (bias[j, i]). Read at its key, the bias's gradient sums no row's keys,
// so a bf16 output's Delta comes from O; read elsewhere it takes the
// exact pass.
// PLAN-LABEL: func.func @at_key
// PLAN: #attn.cpu_plan<rows = {{[0-9]+}}, query_block = {{[0-9]+}}, key_block = 128, splits = 4, dot_bf16 = true, key_tasks = true>
// PLAN-LABEL: func.func @transposed
// PLAN-NOT: key_tasks
// PLAN: return
// CHECK-LABEL: func.func @at_key
// CHECK: memref.alloc() {{.*}} : memref<1x262144xf32>
// CHECK: call @__attnc_zero_partials
// CHECK-NOT: __attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_deltas
// CHECK: call @__attnc_flash_backward_kv({{.*}}%c0{{.*}}, %c4{{.*}}) : ({{.*}}memref<4x1x4x516x64xf32>, memref<512x512xf32>, memref<1x262144xf32>
// CHECK-NOT: __attnc_sum_partials
// CHECK: memref.expand_shape
// CHECK-LABEL: func.func @transposed
// CHECK: memref.alloc() {{.*}} : memref<4x262144xf32>
// CHECK: call @__attnc_flash_exact_deltas
// CHECK: call @__attnc_flash_backward_kv{{.*}} : ({{.*}}memref<1x1x4x516x64xf32>, memref<512x512xf32>, memref<4x262144xf32>
// CHECK: call @__attnc_sum_partials
func.func @at_key(%q: tensor<1x4x512x64xbf16>, %k: tensor<1x4x512x64xbf16>, %v: tensor<1x4x512x64xbf16>, %o: tensor<1x4x512x64xbf16>, %lse: tensor<1x4x512xf32>, %do: tensor<1x4x512x64xbf16>, %bias: tensor<512x512xf32>) -> (tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32>) {
  %dq, %dk, %dv, %db = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%bias : tensor<512x512xf32>) : tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512xf32>, tensor<1x4x512x64xbf16> -> tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<512x512xf32>):
    %x = tensor.extract %c[%i, %j] : tensor<512x512xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %db : tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32>
}
func.func @transposed(%q: tensor<1x4x512x64xbf16>, %k: tensor<1x4x512x64xbf16>, %v: tensor<1x4x512x64xbf16>, %o: tensor<1x4x512x64xbf16>, %lse: tensor<1x4x512xf32>, %do: tensor<1x4x512x64xbf16>, %bias: tensor<512x512xf32>) -> (tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32>) {
  %dq, %dk, %dv, %db = attn.attention_grad %q, %k, %v, %o, %lse, %do causal score_captures(%bias : tensor<512x512xf32>) : tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512xf32>, tensor<1x4x512x64xbf16> -> tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<512x512xf32>):
    %x = tensor.extract %c[%j, %i] : tensor<512x512xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %db : tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<1x4x512x64xbf16>, tensor<512x512xf32>
}
