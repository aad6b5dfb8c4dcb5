// A layer whose GEMM copies reach 65536 elements (S = E = 256): the operand
// copies, B panels and C write-outs of its projections, merge and their
// gradients run as parallel tasks; forward and every gradient against the
// float64 reference, for 1 and 2 threads.
// RUN: env ATTNC_NUM_THREADS=2 attnc run %s --check | FileCheck %s
// RUN: env ATTNC_NUM_THREADS=1 attnc run %s --check | FileCheck %s
// RUN: attnc compile %s --emit=mlir | FileCheck %s --check-prefix=OUTLINED

// CHECK: @layer: compiled
// CHECK: gradient  d_x
// CHECK: gradient  d_wq
// CHECK: gradient  d_wo
// CHECK-NOT: FAILED
// CHECK: check passed
// OUTLINED-DAG: llvm.func internal @__attnc_gemm_copy_a_packed
// OUTLINED-DAG: llvm.func internal @__attnc_gemm_pack_b_packed
// OUTLINED-DAG: llvm.func internal @__attnc_gemm_store_c_packed

func.func @layer(%x: tensor<1x256x256xf32>, %wq: tensor<256x256xf32>, %wk: tensor<256x256xf32>, %wv: tensor<256x256xf32>, %wo: tensor<256x256xf32>) -> tensor<1x256x256xf32> {
  %q = attn.projection %x, %wq : tensor<1x256x256xf32>, tensor<256x256xf32> -> tensor<1x4x256x64xf32>
  %k = attn.projection %x, %wk : tensor<1x256x256xf32>, tensor<256x256xf32> -> tensor<1x4x256x64xf32>
  %v = attn.projection %x, %wv : tensor<1x256x256xf32>, tensor<256x256xf32> -> tensor<1x4x256x64xf32>
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x4x256x64xf32>, tensor<1x4x256x64xf32>, tensor<1x4x256x64xf32> -> tensor<1x4x256x64xf32>, tensor<1x4x256xf32>
  %y = attn.merge %o, %wo : tensor<1x4x256x64xf32>, tensor<256x256xf32> -> tensor<1x256x256xf32>
  return %y : tensor<1x256x256xf32>
}
