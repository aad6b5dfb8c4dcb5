// RUN: attnc-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the gradient ops in dialect/AttnOps.cpp
// (and a few of the ODS-generated constraints they rely on).

//===----------------------------------------------------------------------===//
// attn.projection_grad
//===----------------------------------------------------------------------===//

func.func @projection_grad_input_rank(%x: tensor<16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op input must have rank 3, got 'tensor<16x32xf32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<16x32xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_weight_rank(%x: tensor<2x16x32xf32>, %w: tensor<32x4x8xf32>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op weight must have rank 2, got 'tensor<32x4x8xf32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x4x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x4x8xf32>
  return
}

// -----

func.func @projection_grad_grad_rank(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x16x32xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op grad must have rank 4, got 'tensor<2x16x32xf32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x16x32xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_grad_dynamic(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x?x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op grad must have a static shape, got 'tensor<2x4x?x8xf32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x?x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_weight_element_type(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf16>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op input and weight must have the same element type, got 'f32' and 'f16'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf16>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf16>
  return
}

// -----

func.func @projection_grad_grad_element_type(%x: tensor<2x16x32xbf16>, %w: tensor<32x32xbf16>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op input and grad must have the same element type, got 'bf16' and 'f32'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xbf16>, tensor<32x32xbf16>, tensor<2x4x16x8xf32> -> tensor<2x16x32xbf16>, tensor<32x32xbf16>
  return
}

// -----

func.func @projection_grad_result_types(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op gradients must have the types of input and weight}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x16xf32>
  return
}

// -----

func.func @projection_grad_features(%x: tensor<2x16x24xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op input, weight and grad shapes are inconsistent}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x24xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x24xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_heads(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x2x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op input, weight and grad shapes are inconsistent}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x2x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_grad_shape(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op grad must have shape 2x4x16x8, got 'tensor<2x4x8x8xf32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x8x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return
}

// -----

func.func @projection_grad_integer(%x: tensor<2x16x32xi32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'attn.projection_grad' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<2x16x32xi32>'}}
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xi32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.merge_grad
//===----------------------------------------------------------------------===//

// -----

func.func @merge_grad_input_rank(%o: tensor<2x16x32xf32>, %wo: tensor<32x24xf32>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op input must have rank 4, got 'tensor<2x16x32xf32>'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x16x32xf32>, tensor<32x24xf32>, tensor<2x16x24xf32> -> tensor<2x16x32xf32>, tensor<32x24xf32>
  return
}

// -----

func.func @merge_grad_weight_rank(%o: tensor<2x4x16x8xf32>, %wo: tensor<32xf32>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op weight must have rank 2, got 'tensor<32xf32>'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<32xf32>
  return
}

// -----

func.func @merge_grad_grad_rank(%o: tensor<2x4x16x8xf32>, %wo: tensor<32x24xf32>, %dy: tensor<2x4x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op grad must have rank 3, got 'tensor<2x4x16x24xf32>'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32x24xf32>, tensor<2x4x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<32x24xf32>
  return
}

// -----

func.func @merge_grad_weight_zero_dim(%o: tensor<2x4x16x8xf32>, %wo: tensor<32x0xf32>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op weight must have every dimension >= 1, got 'tensor<32x0xf32>'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32x0xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<32x0xf32>
  return
}

// -----

func.func @merge_grad_weight_element_type(%o: tensor<2x4x16x8xf16>, %wo: tensor<32x24xbf16>, %dy: tensor<2x16x24xf16>) {
  // expected-error @+1 {{'attn.merge_grad' op input and weight must have the same element type, got 'f16' and 'bf16'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf16>, tensor<32x24xbf16>, tensor<2x16x24xf16> -> tensor<2x4x16x8xf16>, tensor<32x24xbf16>
  return
}

// -----

func.func @merge_grad_grad_element_type(%o: tensor<2x4x16x8xf16>, %wo: tensor<32x24xf16>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op input and grad must have the same element type, got 'f16' and 'f32'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf16>, tensor<32x24xf16>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf16>, tensor<32x24xf16>
  return
}

// -----

func.func @merge_grad_result_types(%o: tensor<2x4x16x8xf32>, %wo: tensor<32x24xf32>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op gradients must have the types of input and weight}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32x24xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf16>, tensor<32x24xf32>
  return
}

// -----

func.func @merge_grad_weight_rows(%o: tensor<2x4x16x8xf32>, %wo: tensor<24x24xf32>, %dy: tensor<2x16x24xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op input, weight and grad shapes are inconsistent}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<24x24xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<24x24xf32>
  return
}

// -----

func.func @merge_grad_grad_shape(%o: tensor<2x4x16x8xf32>, %wo: tensor<32x24xf32>, %dy: tensor<2x16x32xf32>) {
  // expected-error @+1 {{'attn.merge_grad' op grad must have shape 2x16x24, got 'tensor<2x16x32xf32>'}}
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32x24xf32>, tensor<2x16x32xf32> -> tensor<2x4x16x8xf32>, tensor<32x24xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.transposed_apply
//===----------------------------------------------------------------------===//

// -----

func.func @transposed_apply_lhs_rank(%p: tensor<8x64x96xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op lhs must have rank 4, got 'tensor<8x64x96xf32>'}}
  %dv = attn.transposed_apply %p, %do : tensor<8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_rhs_rank(%p: tensor<1x8x64x96xf32>, %do: tensor<8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op rhs must have rank 4, got 'tensor<8x64x16xf32>'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<8x64x16xf32> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_result_rank(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op result must have rank 4, got 'tensor<2x96x16xf32>'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_lhs_dynamic(%p: tensor<1x8x64x?xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op lhs must have a static shape, got 'tensor<1x8x64x?xf32>'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x?xf32>, tensor<1x8x64x16xf32> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_element_type(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x64x16xbf16>) {
  // expected-error @+1 {{'attn.transposed_apply' op rhs and result must have the same element type, got 'bf16' and 'f32'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x64x16xbf16> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_batch(%p: tensor<2x8x64x96xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op lhs and rhs must agree on batch, heads and queries}}
  %dv = attn.transposed_apply %p, %do : tensor<2x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<2x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_heads(%p: tensor<1x8x64x96xf32>, %do: tensor<1x4x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op lhs and rhs must agree on batch, heads and queries}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x4x64x16xf32> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_queries(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x32x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op lhs and rhs must agree on batch, heads and queries}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x32x16xf32> -> tensor<1x2x96x16xf32>
  return
}

// -----

func.func @transposed_apply_group(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op query heads (8) must be a multiple of result heads (3)}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x3x96x16xf32>
  return
}

// -----

func.func @transposed_apply_more_result_heads(%p: tensor<1x2x64x96xf32>, %do: tensor<1x2x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op query heads (2) must be a multiple of result heads (4)}}
  %dv = attn.transposed_apply %p, %do : tensor<1x2x64x96xf32>, tensor<1x2x64x16xf32> -> tensor<1x4x96x16xf32>
  return
}

// -----

func.func @transposed_apply_result_shape(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x64x16xf32>) {
  // expected-error @+1 {{'attn.transposed_apply' op result must have shape 1x2x96x16, got 'tensor<1x2x64x16xf32>'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x2x64x16xf32>
  return
}

// -----

func.func @transposed_apply_lhs_f16(%p: tensor<1x8x64x96xf16>, %do: tensor<1x8x64x16xf16>) {
  // expected-error @+1 {{'attn.transposed_apply' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x8x64x96xf16>'}}
  %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf16>, tensor<1x8x64x16xf16> -> tensor<1x2x96x16xf16>
  return
}

//===----------------------------------------------------------------------===//
// attn.softmax_grad
//===----------------------------------------------------------------------===//

// -----

func.func @softmax_grad_rank(%p: tensor<8x4x4xf32>, %dp: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'attn.softmax_grad' op probs must have rank 4, got 'tensor<8x4x4xf32>'}}
  %ds = attn.softmax_grad %p, %dp : tensor<8x4x4xf32>
  return
}

// -----

func.func @softmax_grad_zero_dim(%p: tensor<1x2x0x4xf32>, %dp: tensor<1x2x0x4xf32>) {
  // expected-error @+1 {{'attn.softmax_grad' op probs must have every dimension >= 1, got 'tensor<1x2x0x4xf32>'}}
  %ds = attn.softmax_grad %p, %dp : tensor<1x2x0x4xf32>
  return
}

// -----

func.func @softmax_grad_types(%p: tensor<1x2x4x4xf32>, %dp: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.softmax_grad' op failed to verify that all of {probs, grad, result} have same type}}
  %ds = "attn.softmax_grad"(%p, %dp) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.score_mod_grad
//===----------------------------------------------------------------------===//

// -----

func.func @score_mod_grad_rank(%s: tensor<2x4x4xf32>, %g: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op scores must have rank 4, got 'tensor<2x4x4xf32>'}}
  %ds = attn.score_mod_grad %s, %g : tensor<2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_capture_count(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op must return one gradient per capture (1), got 0}}
  %ds = "attn.score_mod_grad"(%s, %g, %c) ({
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %cc: tensor<2xf32>):
    attn.yield %x : f32
  }) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

func.func @score_mod_grad_extra_gradient(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op must return one gradient per capture (0), got 1}}
  %ds, %dc = "attn.score_mod_grad"(%s, %g) ({
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %x : f32
  }) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<2xf32>)
  return
}

// -----

func.func @score_mod_grad_capture_type(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %c: tensor<2xf32>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op gradient 1 must have its capture's type 'tensor<4xi32>', got 'tensor<4xf32>'}}
  %ds, %dc:2 = attn.score_mod_grad %s, %g captures(%c, %ids : tensor<2xf32>, tensor<4xi32>) : tensor<1x2x4x4xf32> -> tensor<2xf32>, tensor<4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %cc: tensor<2xf32>, %id: tensor<4xi32>):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_types(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op failed to verify that all of {scores, grad, scores_grad} have same type}}
  %ds = "attn.score_mod_grad"(%s, %g) ({
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %x : f32
  }) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

// The region is checked as a score_mod region.
func.func @score_mod_grad_region_arguments(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op score_mod region must have 6 arguments (score: f32, b, h, i, j: index, then one per capture), got 5}}
  %ds, %dc = attn.score_mod_grad %s, %g captures(%c : tensor<2xf32>) : tensor<1x2x4x4xf32> -> tensor<2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_region_score_type(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op score_mod region argument 0 (the score) must be f32, got 'bf16'}}
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: bf16, %b: index, %h: index, %i: index, %j: index):
    %y = arith.extf %x : bf16 to f32
    attn.yield %y : f32
  }
  return
}

// -----

func.func @score_mod_grad_region_index(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op score_mod region argument 4 (j) must be index, got 'i32'}}
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: i32):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_region_capture(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op score_mod region argument 5 must match capture 0 of type 'tensor<2xf32>', got 'tensor<2xf16>'}}
  %ds, %dc = attn.score_mod_grad %s, %g captures(%c : tensor<2xf32>) : tensor<1x2x4x4xf32> -> tensor<2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %cc: tensor<2xf16>):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_region_yield_type(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    // expected-error @+1 {{'attn.yield' op in a score_mod region must yield 'f32', got 'i1'}}
    attn.yield %c : i1
  }
  return
}

// -----

func.func @score_mod_grad_region_no_yield(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod_grad' op score_mod region must end with attn.yield}}
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    func.return %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_region_op(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'tensor.empty' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %t = tensor.empty() : tensor<4xf32>
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_grad_nested_yield(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) {
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %y = scf.execute_region -> f32 {
      // expected-error @+1 {{'attn.yield' op must terminate the score_mod region itself, not a nested region}}
      attn.yield %x : f32
    }
    attn.yield %y : f32
  }
  return
}

//===----------------------------------------------------------------------===//
// attn.attention_grad
//===----------------------------------------------------------------------===//

// -----

func.func @attention_grad_output_grad_type(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %do: tensor<1x2x4x8xf16>) {
  // expected-error @+1 {{'attn.attention_grad' op output_grad must have the output's type 'tensor<1x2x4x8xf32>', got 'tensor<1x2x4x8xf16>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %o, %lse, %do : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf16> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_output_grad_shape(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %do: tensor<1x2x8x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op output_grad must have the output's type 'tensor<1x2x4x8xf32>', got 'tensor<1x2x8x4xf32>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %o, %lse, %do : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_lse_grad_type(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %dlse: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op lse_grad must have the lse's type 'tensor<1x2x4xf32>', got 'tensor<1x2x8xf32>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q lse_grad(%dlse : tensor<1x2x8xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_query_grad_type(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op query, key and value gradients must have the types of query, key and value}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf16>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_key_grad_type(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %o: tensor<1x4x4x8xf32>, %lse: tensor<1x4x4xf32>) {
  // GQA: dK has K's head count, not Q's.
  // expected-error @+1 {{'attn.attention_grad' op query, key and value gradients must have the types of query, key and value}}
  %dq, %dk, %dv = attn.attention_grad %q, %k, %k, %o, %lse, %o : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_value_grad_type(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op query, key and value gradients must have the types of query, key and value}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
  return
}

// -----

func.func @attention_grad_capture_count(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op must return one gradient per capture (1), got 0}}
  %dq, %dk, %dv = "attn.attention_grad"(%q, %q, %q, %q, %lse, %q, %c) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0>}> ({
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %cc: tensor<2xf32>):
    attn.yield %x : f32
  }, {
  }) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @attention_grad_capture_type(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op gradient 0 must have its capture's type 'tensor<2xf32>', got 'tensor<2xf16>'}}
  %dq, %dk, %dv, %dc = attn.attention_grad %q, %q, %q, %q, %lse, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf16> score_mod {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %cc: tensor<2xf32>):
    %m = tensor.extract %cc[%h] : tensor<2xf32>
    %r = arith.addf %x, %m : f32
    attn.yield %r : f32
  }
  return
}

// -----

// attn.attention_grad shares the checks of attn.attention.
func.func @attention_grad_lse_shape(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op lse must have shape 1x2x4, got 'tensor<1x2x8xf32>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_output_shape(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x4xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op output must have shape 1x2x4x8, got 'tensor<1x2x4x4xf32>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %o, %lse, %o : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_kv_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x1x4x8xf32>, %o: tensor<1x4x4x8xf32>, %lse: tensor<1x4x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op key and value head counts differ: 2 vs 1}}
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %o : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  return
}

// -----

func.func @attention_grad_scale(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op scale must be finite and non-zero in f32, got 0.000000e+00}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q scale 0.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_window(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op window must be >= 1, got 0}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q window 0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_lengths(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.attention_grad' op lengths must have one entry per batch (1), got 'tensor<2xi32>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q lengths(%len : tensor<2xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_score_captures_without_region(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op has score_captures but no score_mod region}}
  %dq, %dk, %dv, %dc = attn.attention_grad %q, %q, %q, %q, %lse, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>
  return
}

// -----

func.func @attention_grad_mask_captures_without_region(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %doc: tensor<4xi32>) {
  // expected-error @+1 {{'attn.attention_grad' op has mask_captures but no mask_mod region}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q mask_captures(%doc : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_score_mod_region(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'attn.attention_grad' op score_mod region must have 5 arguments (score: f32, b, h, i, j: index, then one per capture), got 4}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> score_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    attn.yield %z : f32
  }
  return
}

// -----

func.func @attention_grad_mask_mod_yield(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>) {
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    // expected-error @+1 {{'attn.yield' op in a mask_mod region must yield 'i1', got 'f32'}}
    attn.yield %z : f32
  }
  return
}

// -----

func.func @attention_grad_lse_grad_element_type(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %dlse: tensor<1x2x4xf16>) {
  // expected-error @+1 {{'attn.attention_grad' op operand #6 must be ranked tensor of 32-bit float values, but got 'tensor<1x2x4xf16>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q lse_grad(%dlse : tensor<1x2x4xf16>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.mask zero_fill
//===----------------------------------------------------------------------===//

// -----

func.func @mask_zero_fill_alone(%s: tensor<1x2x4x4xf32>) {
  // zero_fill is no condition: the mask must still mask something.
  // expected-error @+1 {{'attn.mask' op masks nothing: give causal, window, lengths, varlen or a mask_mod region}}
  %m = attn.mask %s zero_fill : tensor<1x2x4x4xf32>
  return
}
