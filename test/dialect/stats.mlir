// RUN: attnc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// attn.attention_stats and attn.attention_stats_grad: round trip, then one
// case per verifier error.

// CHECK-LABEL: func.func @all
// CHECK: attn.attention_stats %{{.*}}, %{{.*}}, %{{.*}} causal lengths(%{{.*}} : tensor<2xi32>) : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32> -> entropy tensor<2x4x40xf32> mean_entropy tensor<2x4xf32> pooled tensor<2x4x8x6xf32> similarity tensor<2x4x4xf32> score_mod
// CHECK: attn.attention_stats_grad %{{.*}}, %{{.*}}, %{{.*}} entropy_grad(%{{.*}} : tensor<2x4x40xf32>) mean_entropy_grad(%{{.*}} : tensor<2x4xf32>) causal lengths(%{{.*}} : tensor<2xi32>) : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32> -> tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32> score_mod
func.func @all(%q: tensor<2x4x40x16xbf16>, %k: tensor<2x2x48x16xbf16>, %l: tensor<2x4x40xf32>,
               %len: tensor<2xi32>, %dh: tensor<2x4x40xf32>, %dm: tensor<2x4xf32>)
    -> (tensor<2x4x40xf32>, tensor<2x4xf32>, tensor<2x4x8x6xf32>, tensor<2x4x4xf32>,
        tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>) {
  %h, %m, %p, %s = attn.attention_stats %q, %k, %l causal lengths(%len : tensor<2xi32>)
      : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
        -> entropy tensor<2x4x40xf32> mean_entropy tensor<2x4xf32> pooled tensor<2x4x8x6xf32> similarity tensor<2x4x4xf32>
      score_mod {
  ^bb0(%x: f32, %b: index, %hh: index, %i: index, %j: index):
    %t = math.tanh %x : f32
    attn.yield %t : f32
  }
  %dq, %dk, %dl = attn.attention_stats_grad %q, %k, %l entropy_grad(%dh : tensor<2x4x40xf32>)
      mean_entropy_grad(%dm : tensor<2x4xf32>) causal lengths(%len : tensor<2xi32>)
      : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
        -> tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
      score_mod {
  ^bb0(%x: f32, %b: index, %hh: index, %i: index, %j: index):
    %t = math.tanh %x : f32
    attn.yield %t : f32
  }
  return %h, %m, %p, %s, %dq, %dk, %dl : tensor<2x4x40xf32>, tensor<2x4xf32>, tensor<2x4x8x6xf32>, tensor<2x4x4xf32>,
      tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
}

// -----

// CHECK-LABEL: func.func @one
// CHECK: -> similarity tensor<1x2x2xf32>
func.func @one(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x2xf32> {
  %s = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> similarity tensor<1x2x2xf32>
  return %s : tensor<1x2x2xf32>
}

// -----

func.func @none(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{must return at least one of entropy, mean_entropy, pooled and similarity}}
  attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> ->
  return
}

// -----

func.func @grid(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x4x9xf32> {
  // expected-error @+1 {{pooled's grid 4 x 9 must be between 1 x 1 and Sq x Skv = 8 x 8}}
  %p = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> pooled tensor<1x2x4x9xf32>
  return %p : tensor<1x2x4x9xf32>
}

// -----

func.func @pooled_heads(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{pooled must be [B, H, Gq, Gk] = [1, 2, Gq, Gk], got 'tensor<1x3x4x4xf32>'}}
  %p = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> pooled tensor<1x3x4x4xf32>
  return %p : tensor<1x3x4x4xf32>
}

// -----

func.func @lse_shape(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x9xf32>) -> tensor<1x2x8xf32> {
  // expected-error @+1 {{lse must have shape 1x2x8, got 'tensor<1x2x9xf32>'}}
  %h = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x9xf32> -> entropy tensor<1x2x8xf32>
  return %h : tensor<1x2x8xf32>
}

// -----

func.func @similarity_shape(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x3xf32> {
  // expected-error @+1 {{similarity must have shape 1x2x2, got 'tensor<1x2x3xf32>'}}
  %s = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> similarity tensor<1x2x3xf32>
  return %s : tensor<1x2x3xf32>
}

// -----

func.func @typo(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x8xf32> {
  // expected-error @+1 {{unknown keyword 'casual'; did you mean 'causal'?}}
  %h = attn.attention_stats %q, %k, %l casual : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> entropy tensor<1x2x8xf32>
  return %h : tensor<1x2x8xf32>
}

// -----

func.func @no_cotangent(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>)
    -> (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) {
  // expected-error @+1 {{needs entropy_grad, mean_entropy_grad or both}}
  %dq, %dk, %dl = attn.attention_stats_grad %q, %k, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %dq, %dk, %dl : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
}
