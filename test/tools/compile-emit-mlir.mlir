// RUN: attnc compile %s --no-backward --emit=mlir | FileCheck %s
// RUN: attnc compile %s --no-backward --emit=mlir -o - | attnc-opt | FileCheck %s
// RUN: attnc compile %s --no-backward --emit=mlir -o %t.mlir
// RUN: FileCheck %s < %t.mlir

// --emit=mlir writes the LLVM-dialect module after the whole CPU pipeline
// (to stdout by default, or to -o), and it parses again. (--no-backward:
// with the backward, @causal_mqa is a call of @causal_mqa_fwd, which saves
// the LSE.)

// CHECK-NOT: func.func
// CHECK: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-LABEL: llvm.func internal @__attnc_impl_causal_mqa
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-NOT: -> i32
// CHECK-SAME: {
// CHECK: llvm.intr.exp
// CHECK-LABEL: llvm.func @causal_mqa
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}) -> i32
// CHECK: llvm.call @__attnc_impl_causal_mqa(
// CHECK: llvm.return %{{.*}} : i32
// CHECK-NOT: func.func
// CHECK-NOT: attn.

func.func @causal_mqa(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}
