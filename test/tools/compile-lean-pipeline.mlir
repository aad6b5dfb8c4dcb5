// RUN: attnc compile %s --emit=asm --triple=x86_64-unknown-linux-gnu --cpu=sapphirerapids -O1 --no-backward | FileCheck %s
// RUN: attnc compile %s --emit=llvm --triple=x86_64-unknown-linux-gnu --cpu=sapphirerapids -O1 --no-backward | FileCheck %s --check-prefix=IR

// -O1 is attnc's lean LLVM pipeline (codegen/Target.cpp). Its inliner puts
// each outlined kernel into the task wrapper the thread pool calls, and its
// loop idiom pass turns the zero-fill and copy loops into memset/memcpy:
// without that, the AMX forward kernel (bf16 on a CPU with AMX) configured
// its tiles a second time after the per-row log call.

// IR: define internal void @__attnc_flash_forward_packed(
// IR-NOT: call void @__attnc_flash_forward(
// IR: define

// CHECK-LABEL: __attnc_flash_forward_packed:
// CHECK: ldtilecfg
// CHECK-NOT: ldtilecfg
// CHECK-LABEL: .Lfunc_end

func.func @flash(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x2x96x64xbf16>, %v: tensor<1x2x96x64xbf16>) -> tensor<1x2x64x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x64x64xbf16>, tensor<1x2x96x64xbf16>, tensor<1x2x96x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x64xbf16>
}
