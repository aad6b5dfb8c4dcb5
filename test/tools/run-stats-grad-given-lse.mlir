// RUN: attnc run %s --check | FileCheck %s
// RUN: attnc compile %s --emit=mlir -o - | FileCheck %s --check-prefix=FUSED
// RUN: %if vulkan %{ attnc run %s --target=vulkan --check | FileCheck %s %}

// The entropy's gradients over an LSE the caller passes (random here, not
// the LSE of these scores), bf16, GQA, ALiBi slopes (a float capture), a
// window and rows over several key blocks: the CPU's own kernel for
// attn.attention_stats_grad recomputes P from that LSE (no Sq x Skv
// buffer, nothing unfused left); at S = 4096 (f32, H = 4, D = 64, causal)
// the unfused lowering it replaces took 33 s and 1 GB for forward and
// backward (`attnc bench`, 2 threads, Zen 5), the kernel 0.06 s.
// CHECK: forward   h
// CHECK: gradient  d_q
// CHECK: gradient  d_k
// CHECK: gradient  d_lse
// CHECK: gradient  d_slopes
// CHECK: check passed
// FUSED: call @__attnc_flash_stats_grad_dq
// FUSED: call @__attnc_flash_stats_grad_dk
// FUSED-NOT: linalg.generic
// FUSED-NOT: attn.attention_stats_grad

func.func @stats(%q: tensor<1x4x90x64xbf16>, %k: tensor<1x2x300x64xbf16>, %lse: tensor<1x4x90xf32>,
                 %slopes: tensor<4xf32>) -> (tensor<1x4x90xf32>, tensor<1x4xf32>) {
  %h, %m = attn.attention_stats %q, %k, %lse window 200 score_captures(%slopes : tensor<4xf32>)
      : tensor<1x4x90x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x4x90xf32>
        -> entropy tensor<1x4x90xf32> mean_entropy tensor<1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %hh: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %slope = tensor.extract %sl[%hh] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %h, %m : tensor<1x4x90xf32>, tensor<1x4xf32>
}
