// Regression: attn-export-abi loads the LLVM dialect it creates attributes of.
// RUN: attnc-opt %s -attn-export-abi | FileCheck %s
// RUN: attnc-opt %s -attnc-cpu-bufferize | FileCheck %s


// CHECK: func.func private @__attnc_impl_kernel(%{{.*}}: memref<4xf32> {llvm.noalias}) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK: func.func @kernel(%{{.*}}: memref<4xf32> {llvm.noalias}) -> i32
func.func @kernel(%a: memref<4xf32>) {
  return
}
