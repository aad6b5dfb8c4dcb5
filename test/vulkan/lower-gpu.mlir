// The GPU flash kernels before outlining: a plan, workgroup tiles in
// memory space 3, barriers, subgroup reductions for the row statistics.
// RUN: attnc-opt %s --attn-plan-gpu-tiles --attn-lower-gpu | FileCheck %s
// RUN: attnc-opt %s --attn-plan-gpu-tiles | FileCheck %s --check-prefix=PLAN

// PLAN: attn.tile_plan = #attn.gpu_plan<query_block = 16, key_block = 32, workgroup_size = 64, subgroups = 2>
// CHECK-LABEL: func.func @causal
// CHECK: gpu.launch blocks
// CHECK-DAG: memref.alloc() : memref<16x64xf32, 3>
// CHECK-DAG: memref.alloc() : memref<32x64xf32, 3>
// CHECK: gpu.barrier
// CHECK: gpu.subgroup_reduce maxnumf
// CHECK: gpu.subgroup_reduce add
// CHECK: math.exp
// CHECK: math.log
// CHECK-NOT: attn.attention
func.func @causal(%q: tensor<1x2x40x64xf32>, %k: tensor<1x2x40x64xf32>,
                  %v: tensor<1x2x40x64xf32>) -> tensor<1x2x40x64xf32> {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>
        -> tensor<1x2x40x64xf32>, tensor<1x2x40xf32>
  return %o : tensor<1x2x40x64xf32>
}

// A paged cache: the flash kernel stages each key block's rows through the
// block table (page = table[b, j / P], row j % P), no gather of the pages.
// CHECK-LABEL: func.func @paged
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch
// CHECK: memref.load %{{.*}} : memref<2x4xi32>
// CHECK: arith.divui %{{.*}}, %c16
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: memref.load %{{.*}} : memref<6x2x16x32xf32>
func.func @paged(%q: tensor<2x4x1x32xf32>, %k: tensor<6x2x16x32xf32>, %v: tensor<6x2x16x32xf32>,
                 %len: tensor<2xi32>, %table: tensor<2x4xi32>) -> tensor<2x4x1x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<2xi32>) pages(%table : tensor<2x4xi32>)
      : tensor<2x4x1x32xf32>, tensor<6x2x16x32xf32>, tensor<6x2x16x32xf32> -> tensor<2x4x1x32xf32>, tensor<2x4x1xf32>
  return %o : tensor<2x4x1x32xf32>
}

// The statistics: P recomputed from the LSE a key block at a time, never
// stored. A kernel for the entropies and the rows' sums over the pooled
// grid's key cells ([B, H, Sq, Gk]), one for the head similarity's
// partials per query block ([B, blocks, H, H]) with every head's P of a
// key block in workgroup memory, then the pooled means, the mean entropies
// and the similarity.
// PLAN-LABEL: func.func @stats
// PLAN: attn.attention_stats {{.*}}attn.tile_plan = #attn.gpu_plan<query_block = 16, key_block = 32
// CHECK-LABEL: func.func @stats
// CHECK-NOT: memref<1x4x300x500xf32>
// CHECK: memref.alloc() : memref<1x4x300xf32>
// CHECK: memref.alloc() : memref<1x4x300x8xf32>
// CHECK: gpu.launch
// CHECK: gpu.subgroup_reduce add
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: memref.alloc() : memref<1x19x4x4xf32>
// CHECK: gpu.launch
// CHECK: memref.alloc() : memref<64x32xf32, 3>
// CHECK: gpu.launch
// CHECK: math.sqrt
// CHECK-NOT: gpu.launch
// CHECK-NOT: attn.attention_stats
// CHECK-NOT: memref<1x4x300x500xf32>
// CHECK: return
func.func @stats(%q: tensor<1x4x300x32xf32>, %k: tensor<1x2x500x32xf32>, %lse: tensor<1x4x300xf32>)
    -> (tensor<1x4x300xf32>, tensor<1x4xf32>, tensor<1x4x8x8xf32>, tensor<1x4x4xf32>) {
  %h, %m, %p, %s = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x300x32xf32>, tensor<1x2x500x32xf32>, tensor<1x4x300xf32>
        -> entropy tensor<1x4x300xf32> mean_entropy tensor<1x4xf32> pooled tensor<1x4x8x8xf32> similarity tensor<1x4x4xf32>
  return %h, %m, %p, %s : tensor<1x4x300xf32>, tensor<1x4xf32>, tensor<1x4x8x8xf32>, tensor<1x4x4xf32>
}

// The entropy's gradients: g per row, then a dQ/dLSE kernel per query block
// and a dK kernel per key block, each recomputing P from the LSE (no Sq x
// Skv buffer); the mask_mod that is a window becomes the named mask.
// PLAN-LABEL: func.func @stats_grad
// PLAN: attn.attention_stats_grad {{.*}} causal window 16 {attn.tile_plan = #attn.gpu_plan
// PLAN-NOT: mask_mod
// CHECK-LABEL: func.func @stats_grad
// CHECK-NOT: memref<1x4x64x80xf32>
// CHECK: memref.alloc() : memref<1x4x64xf32>
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: gpu.subgroup_reduce add
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK-NOT: attn.attention_stats_grad
// CHECK-NOT: memref<1x4x64x80xf32>
// CHECK: return
func.func @stats_grad(%q: tensor<1x4x64x32xf32>, %k: tensor<1x2x80x32xf32>, %lse: tensor<1x4x64xf32>,
                      %dh: tensor<1x4x64xf32>, %dm: tensor<1x4xf32>)
    -> (tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>) {
  %dq, %dk, %dlse = attn.attention_stats_grad %q, %k, %lse
      entropy_grad(%dh : tensor<1x4x64xf32>) mean_entropy_grad(%dm : tensor<1x4xf32>)
      : tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>
        -> tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %d = arith.subi %i, %j : index
    %c16 = arith.constant 16 : index
    %lt = arith.cmpi ult, %d, %c16 : index
    attn.yield %lt : i1
  }
  return %dq, %dk, %dlse : tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>
}

// Distillation: the KL per query block from both sides' key blocks, then
// its mean per (batch, head) and in head order; no Sq x Skv scores.
// PLAN-LABEL: func.func @distill
// PLAN: attn.distill {{.*}}attn.tile_plan = #attn.gpu_plan
// CHECK-LABEL: func.func @distill
// CHECK-NOT: memref<1x4x64x80xf32>
// CHECK: gpu.launch
// CHECK-DAG: memref.alloc() : memref<16x32xf32, 3>
// CHECK-DAG: memref.alloc() : memref<16x64xf32, 3>
// CHECK: gpu.subgroup_reduce add
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK-NOT: attn.distill
// CHECK-NOT: memref<1x4x64x80xf32>
// CHECK: return
func.func @distill(%qs: tensor<1x4x64x32xf32>, %ks: tensor<1x2x80x32xf32>, %ls: tensor<1x4x64xf32>,
                   %qt: tensor<1x4x64x64xf32>, %kt: tensor<1x4x80x64xf32>, %lt: tensor<1x4x64xf32>)
    -> tensor<f32> {
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>
        teacher tensor<1x4x64x64xf32>, tensor<1x4x80x64xf32>, tensor<1x4x64xf32> -> tensor<f32>
  return %kl : tensor<f32>
}

// Its gradients: g per row (the mean's share), both sides' dQ and dLSE per
// query block, then each side's dK per key block of its KV heads.
// CHECK-LABEL: func.func @distill_grad
// CHECK-NOT: memref<1x4x64x80xf32>
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: gpu.subgroup_reduce add
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK-NOT: attn.distill_grad
// CHECK: return
func.func @distill_grad(%qs: tensor<1x4x64x32xf32>, %ks: tensor<1x2x80x32xf32>, %ls: tensor<1x4x64xf32>,
                        %qt: tensor<1x4x64x64xf32>, %kt: tensor<1x4x80x64xf32>, %lt: tensor<1x4x64xf32>,
                        %g: tensor<f32>)
    -> (tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>,
        tensor<1x4x64x64xf32>, tensor<1x4x80x64xf32>, tensor<1x4x64xf32>) {
  %dqs, %dks, %dls, %dqt, %dkt, %dlt = attn.distill_grad %qs, %ks, %ls teacher %qt, %kt, %lt grad %g causal
      : tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>
        teacher tensor<1x4x64x64xf32>, tensor<1x4x80x64xf32>, tensor<1x4x64xf32> grad tensor<f32>
        -> tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>,
           tensor<1x4x64x64xf32>, tensor<1x4x80x64xf32>, tensor<1x4x64xf32>
  return %dqs, %dks, %dls, %dqt, %dkt, %dlt : tensor<1x4x64x32xf32>, tensor<1x2x80x32xf32>, tensor<1x4x64xf32>,
         tensor<1x4x64x64xf32>, tensor<1x4x80x64xf32>, tensor<1x4x64xf32>
}
