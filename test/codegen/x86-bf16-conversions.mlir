// RUN: attnc-opt %s -attn-x86-bf16-conversions | FileCheck %s

// 8 and 16 f32 lanes to bf16 become vcvtneps2bf16; other widths, scalars,
// other element types and other rounding modes stay arith.truncf (for
// arith-expand's integer rounding). The CPU pipeline runs the pass with
// dot-bf16 (lower-cpu-dot-bf16.mlir's LLVM prefix).

// CHECK-LABEL: func.func @lanes16
// CHECK: x86vector.avx512.cvt.packed.f32_to_bf16 %{{.*}} : vector<16xf32> -> vector<16xbf16>
// CHECK-NOT: arith.truncf
func.func @lanes16(%x: vector<16xf32>) -> vector<16xbf16> {
  %0 = arith.truncf %x : vector<16xf32> to vector<16xbf16>
  return %0 : vector<16xbf16>
}

// CHECK-LABEL: func.func @lanes8
// CHECK: x86vector.avx512.cvt.packed.f32_to_bf16 %{{.*}} : vector<8xf32> -> vector<8xbf16>
// CHECK-NOT: arith.truncf
func.func @lanes8(%x: vector<8xf32>) -> vector<8xbf16> {
  %0 = arith.truncf %x : vector<8xf32> to vector<8xbf16>
  return %0 : vector<8xbf16>
}

// CHECK-LABEL: func.func @nearest_even
// CHECK: x86vector.avx512.cvt.packed.f32_to_bf16
func.func @nearest_even(%x: vector<16xf32>) -> vector<16xbf16> {
  %0 = arith.truncf %x to_nearest_even : vector<16xf32> to vector<16xbf16>
  return %0 : vector<16xbf16>
}

// CHECK-LABEL: func.func @unchanged
// CHECK-NOT: x86vector
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xf16>
// CHECK: arith.truncf %{{.*}} toward_zero : vector<16xf32> to vector<16xbf16>
// CHECK: arith.truncf %{{.*}} : vector<2x8xf32> to vector<2x8xbf16>
func.func @unchanged(%a: vector<4xf32>, %s: f32, %x: vector<16xf32>,
                     %m: vector<2x8xf32>)
    -> (vector<4xbf16>, bf16, vector<16xf16>, vector<16xbf16>, vector<2x8xbf16>) {
  %0 = arith.truncf %a : vector<4xf32> to vector<4xbf16>
  %1 = arith.truncf %s : f32 to bf16
  %2 = arith.truncf %x : vector<16xf32> to vector<16xf16>
  %3 = arith.truncf %x toward_zero : vector<16xf32> to vector<16xbf16>
  %4 = arith.truncf %m : vector<2x8xf32> to vector<2x8xbf16>
  return %0, %1, %2, %3, %4 : vector<4xbf16>, bf16, vector<16xf16>, vector<16xbf16>, vector<2x8xbf16>
}
