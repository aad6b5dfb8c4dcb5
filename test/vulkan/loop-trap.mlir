// attn-vulkan-loop-trap: one trap buffer per host function, and at the end
// of every kernel a two-iteration probe loop whose bound comes from the
// grid (so the driver cannot unroll it), storing 1 when it ran short.
// RUN: attnc-opt %s --attn-vulkan-loop-trap | FileCheck %s
// CHECK-LABEL: func.func @two_kernels
// CHECK: %[[TRAP:.*]] = memref.alloc() {attnc.device_trap} : memref<1xi32>
// CHECK-NOT: memref.alloc() {attnc.device_trap}
// CHECK: gpu.launch blocks({{[^)]*}}) in (%[[GX:[a-z0-9_]+]] = 
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK: %[[MIN:.*]] = arith.minui %[[GX]], %[[ONE:[a-z0-9_]+]] : index
// CHECK: %[[BOUND:.*]] = arith.addi %[[MIN]], %[[ONE]] : index
// CHECK: %[[RAN:.*]] = scf.for {{.*}} to %[[BOUND]] {{.*}} iter_args
// CHECK: %[[CUT:.*]] = arith.cmpi ult, %[[RAN]], %[[BOUND]] : index
// CHECK: scf.if %[[CUT]] {
// CHECK: memref.store %{{.*}}, %[[TRAP]][%{{.*}}] : memref<1xi32>
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[TRAP]]
// CHECK-LABEL: func.func @no_kernel
// CHECK-NOT: attnc.device_trap
func.func @two_kernels(%buffer: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    memref.store %x, %buffer[%tx] : memref<8xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    memref.store %x, %buffer[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}
func.func @no_kernel() {
  return
}
