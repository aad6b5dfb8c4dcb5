// RUN: attnc compile %s --emit=mlir --cpu=sapphirerapids | FileCheck %s

// The task functions' scratch (O, P and the packed Q of a query block
// forward; P, dS, dK^T, dV^T and the key block's K^T, V^T and K chunks
// backward, up to about 1 MB) comes from the heap and is freed when the
// function returns: on the stack, it would overflow a caller's thread with
// a small stack.

// CHECK-LABEL: llvm.func internal @__attnc_flash_forward(
// CHECK-NOT: llvm.alloca
// CHECK-COUNT-6: llvm.call @_mlir_memref_to_llvm_alloc
// CHECK-NOT: llvm.alloca
// CHECK-COUNT-6: llvm.call @_mlir_memref_to_llvm_free
// CHECK-NEXT: llvm.return
// CHECK-LABEL: llvm.func internal @__attnc_flash_backward_kv(
// CHECK-NOT: llvm.alloca
// CHECK-COUNT-7: llvm.call @_mlir_memref_to_llvm_alloc
// CHECK-NOT: llvm.alloca
// CHECK-COUNT-7: llvm.call @_mlir_memref_to_llvm_free
// CHECK-NEXT: llvm.return

func.func @fwd(%q: tensor<1x4x256x64xf32>, %k: tensor<1x4x256x64xf32>, %v: tensor<1x4x256x64xf32>) -> tensor<1x4x256x64xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x256x64xf32>, tensor<1x4x256x64xf32>, tensor<1x4x256x64xf32> -> tensor<1x4x256x64xf32>, tensor<1x4x256xf32>
  return %o : tensor<1x4x256x64xf32>
}
