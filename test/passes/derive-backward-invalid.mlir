// RUN: attnc-opt %s -split-input-file -attn-derive-backward -verify-diagnostics

// attn-derive-backward rejects, with a located error, what it cannot
// differentiate, and never overwrites an existing symbol.

// A score_mod op without a gradient rule.
func.func @atan(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %t = attn.score_mod %s : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'math.atan' op has no gradient rule; attn-derive-backward supports addf, subf, mulf, divf, negf, exp, exp2, log, log2, tanh, sqrt, rsqrt, sin, cos, erf, powf, fpowi, absf, maximumf, minimumf, maxnumf, minnumf, select, extf/truncf, constants and casts; or compile with --no-backward (jit::Options::backward = false) for the forward only}}
    %r = math.atan %x : f32
    attn.yield %r : f32
  }
  return %t : tensor<1x1x2x2xf32>
}

// -----

// The same check applies to the score_mod region of fused attention, after
// ops that do have rules.
func.func @cos_in_attention(%q: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>, tensor<1x1x2xf32> score_mod {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %t = math.tanh %x : f32
    // expected-error @+1 {{'math.atan' op has no gradient rule}}
    %r = math.atan %t : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x2x4xf32>
}

// -----

// Control flow producing a float is not straight-line code.
func.func @scf_if(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %t = attn.score_mod %s : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %p = arith.cmpi ule, %j, %i : index
    // expected-error @+1 {{'scf.if' op has no gradient rule: attn-derive-backward differentiates straight-line arith/math code in score_mod regions; or compile with --no-backward (jit::Options::backward = false) for the forward only}}
    %r = scf.if %p -> f32 {
      scf.yield %x : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    attn.yield %r : f32
  }
  return %t : tensor<1x1x2x2xf32>
}

// -----

// attnc-opt does not inline: a call in the body has no rule (attnc compile
// inlines first).
func.func private @helper(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %p = attn.softmax %s : tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}
func.func @call(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{'func.call' op has no gradient rule; attn-derive-backward differentiates attn ops and constants; or compile with --no-backward (jit::Options::backward = false) for the forward only}}
  %p = func.call @helper(%s) : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}

// -----

// A gradient op in the body is not differentiated either.
func.func @grad_op(%p: tensor<1x1x2x2xf32>, %dp: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{'attn.softmax_grad' op has no gradient rule}}
  %ds = attn.softmax_grad %p, %dp : tensor<1x1x2x2xf32>
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// An existing @f_fwd is never overwritten.
// expected-error @+1 {{cannot derive @f_fwd: a symbol of that name exists}}
func.func @f(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %p = attn.softmax %s : tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}
func.func @f_fwd(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  return %s : tensor<1x1x2x2xf32>
}

// -----

// Nor an existing @g_bwd, private or not.
// expected-error @+1 {{cannot derive @g_bwd: a symbol of that name exists}}
func.func @g(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %p = attn.softmax %s : tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}
func.func private @g_bwd(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  return %s : tensor<1x1x2x2xf32>
}

// -----

// A paged KV cache has no gradient: inference only.
func.func @paged(%q: tensor<1x2x1x8xf32>, %k: tensor<4x1x16x8xf32>, %len: tensor<1xi32>, %t: tensor<1x2xi32>) -> tensor<1x2x1x8xf32> {
  // expected-error @+1 {{'attn.attention' op reads a paged KV cache, which has no gradient (paged caches are for inference); or compile with --no-backward (jit::Options::backward = false) for the forward only}}
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<1xi32>) pages(%t : tensor<1x2xi32>)
      : tensor<1x2x1x8xf32>, tensor<4x1x16x8xf32>, tensor<4x1x16x8xf32> -> tensor<1x2x1x8xf32>, tensor<1x2x1xf32>
  return %o : tensor<1x2x1x8xf32>
}
