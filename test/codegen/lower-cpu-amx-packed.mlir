// RUN: attnc-opt %s -split-input-file -attn-plan-tiles=amx=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attn-plan-tiles=amx=true | FileCheck %s --check-prefix=PLAN

// A bf16 prefill on AMX whose per-call K and V pairs would take 16.5 MiB
// (16 heads of 4224 keys, 64 + 64 columns), past FlashForward's 16 MiB, with
// two tasks a head (9 query tiles of 32 rows, 5 a task): each task pairs the
// key block it is at into its scratch (K's 16 column pairs tiles, V's 8 key
// pairs tiles), reading K and V where they lie, and its 5 tiles stay
// pipelined (step n's scores in one of two buffers).
// PLAN: #attn.cpu_plan<rows = 32, query_block = 160, key_block = 256, amx = true>
// CHECK-NOT: __attnc_flash_pairs
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x16x260x64xbf16>, %{{.*}}: memref<1x16x4200x64xbf16>, %{{.*}}: memref<1x16x4200x64xbf16>,
// CHECK-DAG: %[[KP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x16x32x32xbf16>
// CHECK-DAG: %[[VP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x8x16x128xbf16>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : memref<32x256xf32>
// CHECK-LABEL: func.func @long_prefill
func.func @long_prefill(%q: tensor<1x16x260x64xbf16>, %k: tensor<1x16x4200x64xbf16>, %v: tensor<1x16x4200x64xbf16>) -> tensor<1x16x260x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x16x260x64xbf16>, tensor<1x16x4200x64xbf16>, tensor<1x16x4200x64xbf16> -> tensor<1x16x260x64xbf16>, tensor<1x16x260xf32>
  return %o : tensor<1x16x260x64xbf16>
}

// -----

// The same with 4000 keys (15.6 MiB of pairs, within 16 MiB): K and V are
// paired once per call (padded to whole key blocks), and the tasks read
// the copies.
// PLAN: #attn.cpu_plan<rows = 32, query_block = 160, key_block = 256, amx = true>
// CHECK-LABEL: func.func private @__attnc_flash_pairs
// CHECK-SAME: (%{{.*}}: memref<1x16x4000x64xbf16>, %{{.*}}: memref<1x16x4000x64xbf16>, %{{.*}}: memref<1x16x256x32x32xbf16>, %{{.*}}: memref<1x16x128x16x128xbf16>
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x16x260x64xbf16>, %{{.*}}: memref<1x16x256x32x32xbf16>, %{{.*}}: memref<1x16x128x16x128xbf16>,
// CHECK-LABEL: func.func @shorter_prefill
func.func @shorter_prefill(%q: tensor<1x16x260x64xbf16>, %k: tensor<1x16x4000x64xbf16>, %v: tensor<1x16x4000x64xbf16>) -> tensor<1x16x260x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x16x260x64xbf16>, tensor<1x16x4000x64xbf16>, tensor<1x16x4000x64xbf16> -> tensor<1x16x260x64xbf16>, tensor<1x16x260xf32>
  return %o : tensor<1x16x260x64xbf16>
}
