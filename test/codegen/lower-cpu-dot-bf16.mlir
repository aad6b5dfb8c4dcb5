// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles="dot-bf16=true amx=true" | FileCheck %s --check-prefix=AMX
// RUN: attnc-opt %s -attn-plan-tiles="dot-bf16=true vector-bits=256" | FileCheck %s --check-prefix=AVX2
// RUN: attnc-opt %s -attnc-cpu-pipeline=dot-bf16=true | FileCheck %s --check-prefix=LLVM

// With AVX-512 BF16, P and the packed operands round to bf16 with
// vcvtneps2bf16 (attn-x86-bf16-conversions).
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.cvtneps2bf16.512"

// A bf16 forward on a target with AVX-512 BF16 and no AMX (256 query rows,
// several tasks per head): the AVX-512 plan's rows, marked dot_bf16; K and
// V copied into the AMX path's bf16 pairs per (batch, KV head); Q K^T as
// vdpbf16ps over D / 2 pairs (two 16-key halves per 32-key tile), P V over
// the keys' pairs, 32 columns at a time (Dv = 48: 32, then 16). No AMX, no
// request for it.
// CHECK-NOT: attn.uses_amx
// CHECK-LABEL: func.func private @__attnc_flash_pairs
// CHECK: vector.interleave
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: scf.for {{.*}} to %c32{{.*}} iter_args
// CHECK: x86vector.avx512.dot {{.*}} : vector<32xbf16> -> vector<16xf32>
// CHECK: scf.for {{.*}} iter_args
// CHECK: scf.for {{.*}} to %c16{{.*}} iter_args
// CHECK: x86vector.avx512.dot
// CHECK-NOT: amx.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: attn.attention
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 32, dot_bf16 = true>
// AMX: attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 32, amx = true>
// AVX2-NOT: dot_bf16
func.func @forward(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x48xbf16>) -> (tensor<1x2x256x48xbf16>, tensor<1x2x256xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x256x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x48xbf16> -> tensor<1x2x256x48xbf16>, tensor<1x2x256xf32>
  return %o, %lse : tensor<1x2x256x48xbf16>, tensor<1x2x256xf32>
}

// A decoding step (16 query rows, one task per KV head with both of its
// query heads): no copy of K and V; the task pairs each key block, K's
// columns and V's keys, into its scratch, prefetching the rows 16 keys
// ahead of those it reads, a cache line (32 columns) at a time.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x2x32x32xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x1x16x96xbf16>
// CHECK: memref.prefetch %{{.*}}[{{.*}}, %c0{{.*}}], read, locality<3>, data : memref<1x1x20x64xbf16>
// CHECK: memref.prefetch %{{.*}}[{{.*}}, %c32{{.*}}], read, locality<3>, data : memref<1x1x20x64xbf16>
// CHECK: memref.prefetch {{.*}} : memref<1x1x20x48xbf16>
// CHECK: vector.interleave
// CHECK: x86vector.avx512.dot
// CHECK-LABEL: func.func @decode
// CHECK-NOT: @__attnc_flash_pairs
// CHECK: return
// PLAN-LABEL: func.func @decode
// PLAN: dot_bf16 = true
func.func @decode(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x48xbf16>) -> tensor<1x2x16x48xbf16> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x16x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x48xbf16> -> tensor<1x2x16x48xbf16>, tensor<1x2x16xf32>
  return %o : tensor<1x2x16x48xbf16>
}

// f32: the FMA path.
// PLAN-LABEL: func.func @f32
// PLAN-NOT: dot_bf16
// PLAN: return
func.func @f32(%q: tensor<1x2x64x64xf32>, %k: tensor<1x1x20x64xf32>, %v: tensor<1x1x20x48xf32>) -> tensor<1x2x64x48xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x64x64xf32>, tensor<1x1x20x64xf32>, tensor<1x1x20x48xf32> -> tensor<1x2x64x48xf32>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x48xf32>
}

// A step of one query tile per task (the 4 query heads of the KV head as
// its rows): while each 32-key tile of a block is multiplied, the task
// prefetches K's and V's rows of the next block's tile.
// Key blocks of 64 keys: the tile loop's kt-th tile of the next block is
// keys j0 + 64 + 32 kt on.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: scf.for %[[KT:.*]] = %c0{{.*}} to %c2 step %c1
// CHECK-NEXT: %[[W:.*]] = arith.constant 64 : index
// CHECK-NEXT: arith.constant 32 : index
// CHECK-NEXT: %[[COL:.*]] = arith.muli %[[KT]], %c32
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[W]], %[[COL]]
// CHECK-NEXT: arith.addi %{{.*}}, %[[NEXT]]
// CHECK: memref.prefetch {{.*}} : memref<1x1x40x64xbf16>
// CHECK: memref.prefetch {{.*}} : memref<1x1x40x48xbf16>
// CHECK: x86vector.avx512.dot
// CHECK-LABEL: func.func @step
func.func @step(%q: tensor<1x4x1x64xbf16>, %k: tensor<1x1x40x64xbf16>, %v: tensor<1x1x40x48xbf16>) -> tensor<1x4x1x48xbf16> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x1x64xbf16>, tensor<1x1x40x64xbf16>, tensor<1x1x40x48xbf16> -> tensor<1x4x1x48xbf16>, tensor<1x4x1xf32>
  return %o : tensor<1x4x1x48xbf16>
}
