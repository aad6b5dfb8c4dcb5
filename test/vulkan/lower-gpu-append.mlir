// attn.append on the GPU targets: a kernel of an invocation per element of
// the new rows writes each into the cache's own buffer (the function's
// argument, kept writable), the attention then reads that buffer: after
// bufferization no copy of the cache and no buffer of its size.
// RUN: attnc-opt %s --attn-plan-gpu-tiles --attn-lower-gpu | FileCheck %s
// RUN: attnc-opt %s --pass-pipeline="builtin.module(attnc-gpu-bufferize)" | FileCheck %s --check-prefix=BUFFERS

// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<2x2x40x32xf32> {bufferization.writable = true}
// CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[K]] :
// CHECK: gpu.launch
// CHECK: arith.cmpi ult, %{{.*}}, %c40
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK: %[[WRITTEN:.*]] = memref.assume_alignment %[[BUF]], 4
// CHECK: bufferization.to_tensor %[[WRITTEN]]
// CHECK-NOT: attn.append

// BUFFERS-LABEL: func.func @step
// BUFFERS-NOT: memref<2x2x40x32xf32> = memref.alloc
// BUFFERS-NOT: memref.alloc() {{.*}} : memref<2x2x40x32xf32>
// BUFFERS-NOT: memref.copy
// BUFFERS: return
func.func @step(%q: tensor<2x4x1x32xf32>, %knew: tensor<2x2x1x32xf32>,
                %k: tensor<2x2x40x32xf32>, %len: tensor<2xi32>) -> tensor<2x4x1x32xf32> {
  %k1 = attn.append %knew, %k lengths(%len : tensor<2xi32>) : tensor<2x2x1x32xf32> into tensor<2x2x40x32xf32>
  %o, %lse = attn.attention %q, %k1, %k1 causal cache lengths(%len : tensor<2xi32>)
      : tensor<2x4x1x32xf32>, tensor<2x2x40x32xf32>, tensor<2x2x40x32xf32> -> tensor<2x4x1x32xf32>, tensor<2x4x1xf32>
  return %o : tensor<2x4x1x32xf32>
}
