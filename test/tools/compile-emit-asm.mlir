// RUN: attnc compile %s --emit=asm --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -o %t-generic.s
// RUN: FileCheck %s < %t-generic.s
// RUN: FileCheck %s --check-prefix=GENERIC --implicit-check-not=ymm < %t-generic.s
// RUN: attnc compile %s --emit=asm --triple=x86_64-unknown-linux-gnu --cpu=x86-64-v3 -o %t.s
// RUN: FileCheck %s < %t.s
// RUN: FileCheck %s --check-prefix=AVX2 < %t.s

// --emit=asm writes target assembly; --cpu picks the instruction set: the
// generic x86-64 (SSE2 only) never touches ymm registers, x86-64-v3 (AVX2)
// does. Only the entry point is global.

// CHECK-NOT: .globl{{.*}}__attnc_impl
// CHECK: .globl causal_mqa
// CHECK-NEXT: .p2align
// CHECK-NEXT: .type causal_mqa,@function
// CHECK-NEXT: causal_mqa:
// GENERIC: causal_mqa:
// AVX2: {{%ymm[0-9]+}}
// CHECK: .size causal_mqa,
// CHECK-NOT: .globl{{.*}}__attnc_impl

func.func @causal_mqa(%q: tensor<1x8x32x16xf32>, %k: tensor<1x1x32x16xf32>, %v: tensor<1x1x32x16xf32>) -> tensor<1x8x32x16xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x8x32x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x16xf32> -> tensor<1x8x32x16xf32>, tensor<1x8x32xf32>
  return %o : tensor<1x8x32x16xf32>
}
