// RUN: attnc compile %s --emit=llvm --triple=x86_64-unknown-linux-gnu --cpu=x86-64 | FileCheck %s --check-prefix=O3
// RUN: attnc compile %s --emit=llvm --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 -o %t.ll
// RUN: FileCheck %s --check-prefix=O0 < %t.ll

// --emit=llvm writes LLVM IR for the target: the exported entry point
// returns i32 and takes noalias pointers; the implementation is internal
// and not inlined into it (the entry point's setjmp, its out-of-memory
// target, would restrict how the kernel is optimized), so it is never an
// exported symbol.

// O3: target triple = "x86_64-unknown-linux-gnu"
// O3: declare i32 @_setjmp(ptr) {{.*}}#[[TWICE:[0-9]+]]
// O3: define internal {{.*}}void @__attnc_impl_causal_mqa(
// O3: define {{.*}}i32 @causal_mqa(ptr noalias {{[^,]*}}%0, ptr noalias {{[^,]*}}%1, ptr noalias {{[^,]*}}%2, ptr noalias {{[^,]*}}%3)
// O3: call i32 @_setjmp(
// O3: call {{.*}}void @__attnc_impl_causal_mqa(
// O3: ret i32
// O3: call {{.*}}@llvm.exp.f32
// O3: attributes #[[TWICE]] = { returns_twice }

// O0: target triple = "x86_64-unknown-linux-gnu"
// O0: define internal void @__attnc_impl_causal_mqa(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3)
// O0: define i32 @causal_mqa(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3)
// O0: call i32 @_setjmp(
// O0: icmp eq i64
// O0: call void @__attnc_impl_causal_mqa(ptr %0, ptr %1, ptr %2, ptr %3)
// O0: ret i32

func.func @causal_mqa(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}
