// RUN: attnc-opt %s --attn-distinct-returned-buffers | FileCheck %s
// RUN: attnc compile --target=vulkan %S/../tools/Inputs/similarity_only.mlir -o %t.o
// RUN: %if cuda-toolkit %{ attnc compile --target=cuda --gpu-binary=ptx %S/../tools/Inputs/similarity_only.mlir -o %t.cuda.o %}
// RUN: %if vulkan %{ attnc run --target=vulkan --check %S/../tools/Inputs/similarity_only.mlir | FileCheck %s --check-prefix=KERNEL %}

// A buffer returned twice gets a copy for its second result (a derived
// backward's two zero gradients of one type, one constant after CSE: on
// the GPU targets upstream's buffer-results-to-out-params crashed on it).
// CHECK-LABEL: func.func @twice
// CHECK: %[[Z:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK: %[[C:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK: memref.copy %[[Z]], %[[C]]
// CHECK: return %[[Z]], %[[C]], %[[Z2:.*]] :
// KERNEL-LABEL: @one:
// KERNEL: check passed
func.func @twice() -> (memref<2x4xf32>, memref<2x4xf32>, memref<3xf32>) {
  %z = memref.alloc() : memref<2x4xf32>
  %y = memref.alloc() : memref<3xf32>
  return %z, %z, %y : memref<2x4xf32>, memref<2x4xf32>, memref<3xf32>
}
