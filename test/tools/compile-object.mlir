// RUN: rm -rf %t && mkdir -p %t
// RUN: attnc compile %s --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -o %t/kernel.o
// RUN: llvm-nm %t/kernel.o | FileCheck %s --check-prefix=O3
// RUN: attnc compile %s --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 -o %t/kernel-O0.o
// RUN: llvm-nm %t/kernel-O0.o | FileCheck %s --check-prefix=O0
// RUN: llvm-readobj --file-headers %t/kernel.o | FileCheck %s --check-prefix=ELF
// The llvm-nm lit finds is LLVM's (lit puts llvm_tools_dir on PATH).
// RUN: llvm-nm --version | FileCheck %s --check-prefix=VERSION

// The default output is an object: the entry points are the only defined
// global symbols; the implementations are inlined or local (-O3; f_fwd's
// is shared by f, which calls it) or local (-O0); the kernel needs libc,
// libm and the runtime's allocation functions (scratch memory that outlives
// a call, runtime/Workspace.c), not malloc.

// O3-NOT: T __attnc_impl
// O3-DAG: {{^[0-9a-f]+}} T causal_mqa
// O3-DAG: U expf
// O3-DAG: U _mlir_memref_to_llvm_alloc
// O3-DAG: U _mlir_memref_to_llvm_free
// O3-NOT: U malloc
// O3-NOT: T __attnc_impl

// O0-DAG: {{^[0-9a-f]+}} t __attnc_impl_causal_mqa
// O0-DAG: {{^[0-9a-f]+}} T causal_mqa
// O0-NOT: T __attnc_impl

// ELF: Format: elf64-x86-64
// ELF: Type: Relocatable

// VERSION: LLVM version 22.

func.func @causal_mqa(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}
