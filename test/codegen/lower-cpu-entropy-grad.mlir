// RUN: attnc-opt %s -split-input-file -attn-derive-backward -attn-plan-tiles -attn-lower-cpu | FileCheck %s --check-prefixes=CHECK,AVX512
// RUN: attnc-opt %s -split-input-file -attn-derive-backward -attn-plan-tiles=vector-bits=128 -attn-lower-cpu=vector-bits=128 | FileCheck %s

// An entropy penalty's backward in one kernel: the derived
// attn.attention_stats_grad adds to attn.attention_grad's dQ and dK and
// gives its lse_grad; the CPU lowering folds it into the flash backward
// (dS' = P (dP - Delta - g S'), Delta less g mu), the rows' entropies from
// the statistics kernel first. No Sq x Skv buffer, no unfused op left.
// CHECK-LABEL: func.func @f_bwd(
// CHECK-NOT: attn.
// CHECK-NOT: linalg.generic
// CHECK: call @__attnc_flash_stats
// CHECK: call @__attnc_flash_backward_kv
// CHECK: return
func.func @f(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
  %m = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> mean_entropy tensor<1x4xf32>
  return %o, %m : tensor<1x4x33x16xf32>, tensor<1x4xf32>
}

// -----

// What nothing uses is not computed: the similarity (requested, not
// returned) nowhere, the statistics op attn-derive-backward recomputes in
// @g_bwd not at all. On AVX-512 the pooled map (returned, row cells of 1
// row: finer than a query tile of several) takes a statistics kernel in
// the forward and the entropy's gradient another in the backward: two
// functions of one name outlined in either order get distinct names.
// AVX512-DAG: func.func private @__attnc_flash_stats(
// AVX512-DAG: func.func private @__attnc_flash_stats_0(
// CHECK-NOT: func.func private @__attnc_flash_stats_1(
// CHECK-LABEL: func.func @g_bwd(
// CHECK-NOT: attn.
// CHECK: return
func.func @g(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4xf32>, tensor<1x4x33x5xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
  %m, %p, %s = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> mean_entropy tensor<1x4xf32> pooled tensor<1x4x33x5xf32> similarity tensor<1x4x4xf32>
  return %o, %m, %p : tensor<1x4x33x16xf32>, tensor<1x4xf32>, tensor<1x4x33x5xf32>
}

// -----

// Over an LSE argument no attention backward takes the statistics'
// gradient in: its own kernel recomputes P from that LSE, one pass per
// (batch, head, query tile) for dQ, dLSE and the ALiBi slopes' partials
// (a row per task: 1 x 4 x 3 tasks on AVX-512, of whole vectors), one per (batch, KV head, key block)
// for dK. No Sq x Skv buffer, no unfused op left.
// CHECK-LABEL: func.func private @__attnc_flash_stats_grad_dq
// CHECK: vector.fma
// CHECK-LABEL: func.func private @__attnc_flash_stats_grad_dk
// CHECK-LABEL: func.func @given_bwd(
// CHECK-NOT: attn.
// CHECK-NOT: linalg.generic
// AVX512: memref.alloc() {{.*}} : memref<12x16xf32>
// CHECK: call @__attnc_flash_stats_grad_dq
// CHECK: call @__attnc_flash_stats_grad_dk
// CHECK: return
func.func @given(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %lse: tensor<1x4x33xf32>,
                 %slopes: tensor<4xf32>) -> tensor<1x4x33xf32> {
  %h = attn.attention_stats %q, %k, %lse causal score_captures(%slopes : tensor<4xf32>)
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32> -> entropy tensor<1x4x33xf32> score_mod {
  ^bb0(%s: f32, %b: index, %hh: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %slope = tensor.extract %sl[%hh] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %h : tensor<1x4x33xf32>
}

// -----

// A causal mask written as a mask_mod region: the planners make both ops'
// the named mask, and the backward still takes the entropy's gradient in.
// CHECK-LABEL: func.func @region_mask_bwd(
// CHECK-NOT: attn.
// CHECK-NOT: __attnc_flash_stats_grad
// CHECK: call @__attnc_flash_backward_kv
// CHECK: return
func.func @region_mask(%q: tensor<1x4x33x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x16xf32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  %m = attn.attention_stats %q, %k, %lse
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        -> mean_entropy tensor<1x4xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return %o, %m : tensor<1x4x33x16xf32>, tensor<1x4xf32>
}
