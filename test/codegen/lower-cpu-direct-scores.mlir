// RUN: attnc-opt %s -attn-plan-tiles -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles=dot-bf16=true -attn-lower-cpu | FileCheck %s --check-prefix=DOT

// A decoding step (one query row per task, f32) takes its scores as dot
// products with K's rows where they lie, 16 keys at a time summed across
// lanes by halving shuffles (laneSums16), rather than K^T tiles gathered
// and transposed per key block; and its P V reads each of V's rows once
// per block, the whole 64-column row in one chunk. A prefill of 64 rows
// keeps the K^T tiles (transpose16's shuffles), which its rows share.
// CHECK-LABEL: func.func private @__attnc_flash_forward(
// CHECK: vector.from_elements
// CHECK: vector.fma
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// CHECK-NOT: [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27]
// CHECK-LABEL: func.func @decode
// CHECK-LABEL: func.func private @__attnc_flash_forward_0(
// CHECK-NOT: vector.from_elements
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27]
// CHECK-LABEL: func.func @prefill
// With bf16 dot products the same step takes vdpbf16ps of Q's bf16 row
// with K's rows where they lie (32 columns each), not K's column pairs.
// DOT-LABEL: func.func private @__attnc_flash_forward_1(
// DOT: vector.load %arg1[{{.*}}] : memref<1x4x300x64xbf16>, vector<32xbf16>
// DOT: x86vector.avx512.dot
// DOT: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// DOT-LABEL: func.func @decode16

func.func @decode(%q: tensor<1x4x1x64xf32>, %k: tensor<1x4x300x64xf32>, %v: tensor<1x4x300x64xf32>) -> tensor<1x4x1x64xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x1x64xf32>, tensor<1x4x300x64xf32>, tensor<1x4x300x64xf32> -> tensor<1x4x1x64xf32>, tensor<1x4x1xf32>
  return %o : tensor<1x4x1x64xf32>
}

func.func @prefill(%q: tensor<1x4x64x64xf32>, %k: tensor<1x4x300x64xf32>, %v: tensor<1x4x300x64xf32>) -> tensor<1x4x64x64xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x64x64xf32>, tensor<1x4x300x64xf32>, tensor<1x4x300x64xf32> -> tensor<1x4x64x64xf32>, tensor<1x4x64xf32>
  return %o : tensor<1x4x64x64xf32>
}

func.func @decode16(%q: tensor<1x4x1x64xbf16>, %k: tensor<1x4x300x64xbf16>, %v: tensor<1x4x300x64xbf16>) -> tensor<1x4x1x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x1x64xbf16>, tensor<1x4x300x64xbf16>, tensor<1x4x300x64xbf16> -> tensor<1x4x1x64xbf16>, tensor<1x4x1xf32>
  return %o : tensor<1x4x1x64xbf16>
}
