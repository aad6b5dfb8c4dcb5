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
