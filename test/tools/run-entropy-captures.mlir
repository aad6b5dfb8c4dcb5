// RUN: attnc run %s --check | FileCheck %s
// RUN: attnc compile %s --emit=mlir -o - | FileCheck %s --check-prefix=FUSED
// RUN: %if vulkan %{ attnc run %s --target=vulkan --check | FileCheck %s %}
// RUN: attnc compile %s --target=vulkan --emit=mlir -o - | FileCheck %s --check-prefix=GPU

// An entropy over ALiBi attention (a float score capture) and rows over
// several key blocks: the CPU backward folds the entropy's gradient in,
// the slopes' gradient included (nothing unfused is left).
// CHECK: forward   h
// CHECK: gradient  d_slopes
// CHECK: check passed
// FUSED-NOT: linalg.generic
// FUSED-NOT: attn.attention_stats_grad
// On GPU targets the entropy's gradient has kernels of its own, the slopes'
// per-key partials summed in key order by one more (no linalg left).
// GPU-NOT: linalg.generic
// GPU-NOT: attn.attention_stats_grad

func.func @f(%q: tensor<1x4x70x32xf32>, %k: tensor<1x2x300x32xf32>, %v: tensor<1x2x300x32xf32>, %slopes: tensor<4xf32>)
    -> (tensor<1x4x70x32xf32>, tensor<1x4x70xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%slopes : tensor<4xf32>)
      : tensor<1x4x70x32xf32>, tensor<1x2x300x32xf32>, tensor<1x2x300x32xf32> -> tensor<1x4x70x32xf32>, tensor<1x4x70xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%h] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  %h = attn.attention_stats %q, %k, %lse causal score_captures(%slopes : tensor<4xf32>)
      : tensor<1x4x70x32xf32>, tensor<1x2x300x32xf32>, tensor<1x4x70xf32> -> entropy tensor<1x4x70xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %hh: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%hh] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o, %h : tensor<1x4x70x32xf32>, tensor<1x4x70xf32>
}
