// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles="dot-bf16=true amx=true" | FileCheck %s --check-prefix=AMX
// RUN: attnc-opt %s -attn-plan-tiles="dot-bf16=true vector-bits=256" | FileCheck %s --check-prefix=AVX2

// A bf16 backward on a target with AVX-512 BF16 and no AMX (AMX tiles
// where there are: lower-cpu-amx-backward.mlir), 64 query rows: an even number of rows (the
// transposed products take them in pairs: 11 would be the FMA plan's),
// marked dot_bf16. Q and dO packed transposed in bf16 (unscaled); per key
// block, K and V with pairs of columns side by side and K with pairs of
// keys; S and dP as vdpbf16ps over D / 2 and Dv / 2 pairs of Q's and dO's
// rows; P and dS rounded to bf16, dS also with pairs of rows side by side
// for dK^T and dV^T's products, which one outlined function of pairs of rows
// computes (D = Dv); dQ over pairs of keys; dK scaled when stored.
// (The outlined function follows the task function.)
// CHECK-LABEL: func.func private @__attnc_flash_pack_bf16
// CHECK: memref.store {{.*}} : memref<64x12xbf16
// CHECK-LABEL: func.func private @__attnc_flash_backward_kv
// CHECK: vector.interleave {{.*}} : vector<16xbf16> -> vector<32xbf16>
// CHECK: scf.for {{.*}} to %c32{{.*}} iter_args
// CHECK: x86vector.avx512.dot {{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: arith.truncf {{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.interleave
// CHECK: x86vector.avx512.dot
// CHECK: call @__attnc_flash_accumulate_pairs
// CHECK: call @__attnc_flash_accumulate_pairs
// CHECK: arith.constant 1.250000e-01 : f32
// CHECK: arith.mulf
// CHECK-LABEL: func.func private @__attnc_flash_accumulate_pairs
// CHECK: scf.for {{.*}} to %c6{{.*}} iter_args
// CHECK: x86vector.avx512.dot
// CHECK-LABEL: func.func @backward
// CHECK-NOT: attn.attention_grad
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = {{[0-9]+}}, dot_bf16 = true>
// AVX2-NOT: dot_bf16
// AMX: attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 32, key_block = {{[0-9]+}}, amx = true>
func.func @backward(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x64xbf16>, %o: tensor<1x2x64x64xbf16>, %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x64xbf16>) -> (tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do causal : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>, tensor<1x2x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>
  return %dq, %dk, %dv : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x64xbf16>
}

// Fewer than 64 query rows: the FMA path.
// PLAN-LABEL: func.func @short
// PLAN-NOT: dot_bf16
// PLAN: return
func.func @short(%q: tensor<1x2x16x64xbf16>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x64xbf16> {
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>, tensor<1x2x16xf32>, tensor<1x2x16x64xbf16> -> tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>
  return %dq : tensor<1x2x16x64xbf16>
}
// AMX-LABEL: func.func @short
// AMX-NOT: amx
// AMX: return
