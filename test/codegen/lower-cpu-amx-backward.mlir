// RUN: attnc-opt %s -attn-plan-tiles=amx=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles="amx=true dot-bf16=true" | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles=amx=true -attnc-cpu-pipeline | FileCheck %s --check-prefix=LLVM

// A bf16 backward on a target with AMX (100 query rows, D = Dv = 64, GQA):
// query tiles of 32 rows, marked amx. Q and dO packed transposed in bf16
// (dK's and dV's A operands) and copied as rows in whole tiles (128 rows:
// the rows past Sq repeat its last) for S's and dP's tile loads; S and dP
// per 32-key tile as 2 x 2 tiles of D / 32 = 2 unrolled steps; dQ over the
// key tiles a row sees (a loop carrying its 4 C tiles, loaded from and
// stored to dQ's copy); dV^T and dK^T in one outlined function per 32 d's
// over the query tiles (a loop carrying 4 tiles too). The module asks for
// AMX, and the whole CPU pipeline lowers tiles carried through branches.
// CHECK: module attributes {attn.uses_amx}
// CHECK-LABEL: func.func private @__attnc_flash_pack_amx
// CHECK-SAME: memref<1x2x100x64xbf16>, %{{.*}}: memref<1x2x4x64x32xbf16>, %{{.*}}: memref<1x2x100x64xbf16>, %{{.*}}: memref<1x2x4x64x32xbf16>, %{{.*}}: memref<1x2x128x64xbf16>, %{{.*}}: memref<1x2x128x64xbf16>
// CHECK-LABEL: func.func private @__attnc_flash_backward_kv
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: amx.tile_load {{.*}} : memref<1x2x128x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store {{.*}} : memref<32x32xf32, strided<[32, 1], offset: ?>>, !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: amx.tile_store {{.*}} : memref<32x32xf32, strided<[32, 1], offset: ?>>, !amx.tile<16x16xf32>
// CHECK: amx.tile_load {{.*}} : memref<32x64xf32, strided<[64, 1], offset: ?>> into !amx.tile<16x16xf32>
// CHECK: scf.for {{.*}} -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>)
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store {{.*}} : memref<32x64xf32, strided<[64, 1], offset: ?>>, !amx.tile<16x16xf32>
// CHECK: call @[[ACC:__attnc_flash_accumulate_amx[_0-9x]*]](
// CHECK: call @[[ACC]](
// CHECK: func.func private @[[ACC]](
// CHECK: scf.for {{.*}} step %c32
// CHECK: scf.for {{.*}} -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>)
// CHECK-LABEL: func.func @backward
// CHECK-NOT: attn.attention_grad
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 32, key_block = {{[0-9]+}}, amx = true>
// LLVM: llvm.call_intrinsic "llvm.x86.tdpbf16ps.internal"
// LLVM-NOT: cf.br
func.func @backward(%q: tensor<1x2x100x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x100x64xbf16>, %lse: tensor<1x2x100xf32>, %do: tensor<1x2x100x64xbf16>) -> (tensor<1x2x100x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do causal : tensor<1x2x100x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100xf32>, tensor<1x2x100x64xbf16> -> tensor<1x2x100x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>
  return %dq, %dk, %dv : tensor<1x2x100x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>
}

// Dv = 48 (dP = dO V^T reduces over Dv in steps of 32): the dot products.
// PLAN-LABEL: func.func @narrow_values
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = {{[0-9]+}}, query_block = {{[0-9]+}}, key_block = {{[0-9]+}}, dot_bf16 = true>
func.func @narrow_values(%q: tensor<1x2x100x64xbf16>, %v: tensor<1x2x100x48xbf16>, %lse: tensor<1x2x100xf32>) -> tensor<1x2x100x64xbf16> {
  %dq, %dk, %dv = attn.attention_grad %q, %q, %v, %v, %lse, %v : tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x48xbf16>, tensor<1x2x100x48xbf16>, tensor<1x2x100xf32>, tensor<1x2x100x48xbf16> -> tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x48xbf16>
  return %dq : tensor<1x2x100x64xbf16>
}
