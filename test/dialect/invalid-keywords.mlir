// RUN: attnc-opt %s -split-input-file -verify-diagnostics

// A misspelt or misplaced keyword of attn.attention and attn.mask names the
// word and what was meant (dialect/AttnOps.cpp, parseKeywordCheck), rather
// than MLIR's "expected ':'".

func.func @attention_casual(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{custom op 'attn.attention' unknown keyword 'casual'; did you mean 'causal'?}}
  %o, %lse = attn.attention %q, %q, %q casual
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_widow(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{unknown keyword 'widow'; did you mean 'window'?}}
  %o, %lse = attn.attention %q, %q, %q causal widow 2
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_score_capture(%q: tensor<1x2x4x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{unknown keyword 'score_capture'; did you mean 'score_captures'?}}
  %o, %lse = attn.attention %q, %q, %q score_capture(%s : tensor<2xf32>)
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_no_close_match(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{unknown keyword 'dropout'; before the ':' come 'scale', 'causal', 'window', 'cache', 'lengths', 'varlen', 'pages', 'score_captures', 'mask_captures' (in this order), after the result types the regions 'score_mod', 'mask_mod'}}
  %o, %lse = attn.attention %q, %q, %q dropout 0.1
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_out_of_order(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{keyword 'scale' repeated or out of order; the keywords come in this order: 'scale', 'causal', 'window', 'cache', 'lengths', 'varlen', 'pages', 'score_captures', 'mask_captures'}}
  %o, %lse = attn.attention %q, %q, %q causal scale 0.5
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_repeated(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{keyword 'causal' repeated or out of order}}
  %o, %lse = attn.attention %q, %q, %q causal causal
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_region_before_types(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{the 'score_mod' region comes after the result types (`: ... -> ... score_mod { ... }`)}}
  %o, %lse = attn.attention %q, %q, %q score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  } : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mask_casual(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{custom op 'attn.mask' unknown keyword 'casual'; did you mean 'causal'?}}
  %m = attn.mask %s casual : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @mask_no_close_match(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{unknown keyword 'alibi'; before the ':' come 'causal', 'window', 'cache', 'lengths', 'varlen', 'captures', 'zero_fill' (in this order)}}
  %m = attn.mask %s alibi : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @grad_casual(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{custom op 'attn.attention_grad' unknown keyword 'casual'; did you mean 'causal'?}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q casual
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>,
        tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @grad_order(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{custom op 'attn.attention_grad' keyword 'lse_grad' repeated or out of order; the keywords come in this order: 'lse_grad', 'scale', 'causal', 'window', 'cache', 'lengths', 'varlen', 'score_captures', 'mask_captures'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q causal lse_grad(%lse : tensor<1x2x4xf32>)
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>,
        tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_cache_before_window(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{keyword 'window' repeated or out of order; the keywords come in this order: 'scale', 'causal', 'window', 'cache', 'lengths', 'varlen', 'pages', 'score_captures', 'mask_captures'}}
  %o, %lse = attn.attention %q, %q, %q causal cache window 2
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mask_cahce(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{unknown keyword 'cahce'; did you mean 'cache'?}}
  %m = attn.mask %s causal cahce : tensor<1x2x4x4xf32>
  return
}
