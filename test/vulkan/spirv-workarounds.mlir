// The kernels' rewrites before convert-gpu-to-spirv: sign extensions as
// zero extensions and integer ops (lavapipe's OpSConvert), and the math ops
// convert-math-to-spirv has no pattern for.
// RUN: attnc-opt %s --pass-pipeline='builtin.module(gpu.module(attn-spirv-sign-extend,attn-spirv-math))' | FileCheck %s
gpu.module @kernels {
  // CHECK-LABEL: gpu.func @extend
  // CHECK: %[[SIGN:.*]] = arith.constant 2147483648 : i64
  // CHECK-NOT: arith.extsi
  // CHECK: %[[Z:.*]] = arith.extui %{{.*}} : i32 to i64
  // CHECK: %[[X:.*]] = arith.xori %[[Z]], %[[SIGN]] : i64
  // CHECK: arith.subi %[[X]], %[[SIGN]] : i64
  // CHECK: %[[I:.*]] = arith.index_cast %{{.*}} : index to i32
  // CHECK: arith.extui %[[I]] : i32 to i64
  // The i1 extension (0 or -1) and narrowing casts stay.
  // CHECK: arith.extsi %{{.*}} : i1 to i32
  // CHECK: arith.index_cast %{{.*}} : index to i16
  gpu.func @extend(%a: i32, %i: index, %p: i1, %out: memref<4xi64>, %o32: memref<1xi32>, %o16: memref<1xi16>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %e = arith.extsi %a : i32 to i64
    memref.store %e, %out[%c0] : memref<4xi64>
    %x = arith.index_cast %i : index to i64
    memref.store %x, %out[%c1] : memref<4xi64>
    %m = arith.extsi %p : i1 to i32
    memref.store %m, %o32[%c0] : memref<1xi32>
    %n = arith.index_cast %i : index to i16
    memref.store %n, %o16[%c0] : memref<1xi16>
    gpu.return
  }
  // CHECK-LABEL: gpu.func @math
  // CHECK-NOT: math.trunc
  // CHECK-NOT: math.exp2
  // CHECK-NOT: math.erf
  // CHECK-NOT: math.cbrt
  // CHECK: math.ceil
  // CHECK: math.floor
  // CHECK: arith.select
  // CHECK: math.exp
  // CHECK: gpu.return
  gpu.func @math(%x: f32, %out: memref<5xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %t = math.trunc %x : f32
    memref.store %t, %out[%c0] : memref<5xf32>
    %e = math.exp2 %x : f32
    memref.store %e, %out[%c1] : memref<5xf32>
    %f = math.erf %x : f32
    memref.store %f, %out[%c2] : memref<5xf32>
    %g = math.erfc %x : f32
    memref.store %g, %out[%c3] : memref<5xf32>
    %h = math.cbrt %x : f32
    memref.store %h, %out[%c4] : memref<5xf32>
    gpu.return
  }
}
