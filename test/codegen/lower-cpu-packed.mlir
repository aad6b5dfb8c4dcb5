// RUN: attnc-opt %s -split-input-file -attn-plan-tiles -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attn-plan-tiles | FileCheck %s --check-prefix=PLAN

// A GQA decoding step (one query row a head): no per-call copy of K or V.
// One task per (batch, KV head), 8 of them, runs both query heads of its
// KV head as the two rows of one query tile (Q, O and LSE seen as
// [2, 4, 2, ...]); its two rows' scores are dot products with K's rows
// where they lie (lower-cpu-direct-scores.mlir: no K^T tiles, whose
// scratch is a one-element stand-in), and two f32 query rows a task read
// V where it lies.
// CHECK-NOT: __attnc_flash_transpose
// CHECK-NOT: __attnc_flash_chunk
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<2x4x2x32xf32>, %[[K:.*]]: memref<2x4x300x32xf32>, %[[V:.*]]: memref<2x4x300x32xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x1x1x1xf32>
// CHECK-NOT: memref.alloc
// CHECK: vector.load %[[K]]
// CHECK: vector.shuffle
// CHECK: vector.load %[[V]]
// CHECK-LABEL: func.func @decode
// CHECK: %[[Q:.*]] = memref.expand_shape {{.*}} output_shape [2, 4, 2, 32] : memref<2x8x32xf32> into memref<2x4x2x32xf32>
// CHECK: call @__attnc_flash_forward(%[[Q]], {{.*}}, %c0{{.*}}, %c8)
// CHECK: memref.expand_shape {{.*}} output_shape [2, 8, 1, 32] : memref<2x8x32xf32> into memref<2x8x1x32xf32>
func.func @decode(%q: tensor<2x8x1x32xf32>, %k: tensor<2x4x300x32xf32>, %v: tensor<2x4x300x32xf32>) -> tensor<2x8x1x32xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<2x8x1x32xf32>, tensor<2x4x300x32xf32>, tensor<2x4x300x32xf32> -> tensor<2x8x1x32xf32>, tensor<2x8x1xf32>
  return %o : tensor<2x8x1x32xf32>
}

// -----

// bf16 K and V (without bf16 dot products) are read where they lie too,
// each row converted to f32 as read: no column chunks of V.
// CHECK-NOT: __attnc_flash_chunk
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<2x4x2x32xbf16>, %[[K:.*]]: memref<2x4x300x32xbf16>, %[[V:.*]]: memref<2x4x300x32xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x1x1x1xf32>
// CHECK-NOT: memref.alloc
// CHECK: vector.load %[[K]]
// CHECK: vector.load %[[V]]{{.*}} : memref<2x4x300x32xbf16>, vector<16xbf16>
// CHECK-LABEL: func.func @decode_bf16
func.func @decode_bf16(%q: tensor<2x8x1x32xbf16>, %k: tensor<2x4x300x32xbf16>, %v: tensor<2x4x300x32xbf16>) -> tensor<2x8x1x32xbf16> {
  %o, %lse = attn.attention %q, %k, %v : tensor<2x8x1x32xbf16>, tensor<2x4x300x32xbf16>, tensor<2x4x300x32xbf16> -> tensor<2x8x1x32xbf16>, tensor<2x8x1xf32>
  return %o : tensor<2x8x1x32xbf16>
}

// -----

// A long prefill (many tasks per head) whose per-call copies of K^T and V
// would take 32 MiB, past FlashForward's 16 MiB: each task packs the key
// block it is at, as decoding steps do, so that the call's extra memory
// stays a block per thread. (A shorter one copies them once per call:
// lower-cpu.mlir.) Its tasks take 10 query tiles (of up to 16 without AMX),
// which share each packing.
// PLAN: #attn.cpu_plan<rows = 12, query_block = 120, key_block = 256>
// CHECK-NOT: __attnc_flash_transpose
// CHECK-NOT: __attnc_flash_chunk
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x2x4096x64xf32>, %{{.*}}: memref<1x1x65536x64xf32>, %{{.*}}: memref<1x1x65536x64xf32>
// CHECK-DAG: %[[KT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x8x64x32xf32>
// CHECK-DAG: %[[VC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x1x2x256x32xf32>
// CHECK: vector.store %{{.*}}, %[[KT]]
// CHECK: vector.store %{{.*}}, %[[VC]]
// CHECK-LABEL: func.func @long_prefill
func.func @long_prefill(%q: tensor<1x2x4096x64xf32>, %k: tensor<1x1x65536x64xf32>, %v: tensor<1x1x65536x64xf32>) -> tensor<1x2x4096x64xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x4096x64xf32>, tensor<1x1x65536x64xf32>, tensor<1x1x65536x64xf32> -> tensor<1x2x4096x64xf32>, tensor<1x2x4096xf32>
  return %o : tensor<1x2x4096x64xf32>
}
