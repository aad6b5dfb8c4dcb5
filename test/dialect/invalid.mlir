// RUN: attnc-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of dialect/AttnOps.cpp, then a few errors of
// the ODS-generated type constraints.

//===----------------------------------------------------------------------===//
// attn.projection
//===----------------------------------------------------------------------===//

func.func @projection_input_rank(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'attn.projection' op input must have rank 3, got 'tensor<16x64xf32>'}}
  %q = attn.projection %x, %w : tensor<16x64xf32>, tensor<64x64xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_input_dynamic(%x: tensor<?x16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{input must have a static shape, got 'tensor<?x16x64xf32>'}}
  %q = attn.projection %x, %w : tensor<?x16x64xf32>, tensor<64x64xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_input_zero_dim(%x: tensor<1x0x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{input must have every dimension >= 1, got 'tensor<1x0x64xf32>'}}
  %q = attn.projection %x, %w : tensor<1x0x64xf32>, tensor<64x64xf32> -> tensor<1x4x1x16xf32>
  return
}

// -----

func.func @projection_weight_rank(%x: tensor<1x16x64xf32>, %w: tensor<64x4x16xf32>) {
  // expected-error @+1 {{weight must have rank 2, got 'tensor<64x4x16xf32>'}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<64x4x16xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_weight_dynamic(%x: tensor<1x16x64xf32>, %w: tensor<64x?xf32>) {
  // expected-error @+1 {{weight must have a static shape, got 'tensor<64x?xf32>'}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<64x?xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_result_rank(%x: tensor<1x16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{result must have rank 4, got 'tensor<1x16x64xf32>'}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<64x64xf32> -> tensor<1x16x64xf32>
  return
}

// -----

func.func @projection_weight_element_type(%x: tensor<1x16x64xf32>, %w: tensor<64x64xf16>) {
  // expected-error @+1 {{input and weight must have the same element type, got 'f32' and 'f16'}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<64x64xf16> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_result_element_type(%x: tensor<1x16x64xbf16>, %w: tensor<64x64xbf16>) {
  // expected-error @+1 {{input and result must have the same element type, got 'bf16' and 'f32'}}
  %q = attn.projection %x, %w : tensor<1x16x64xbf16>, tensor<64x64xbf16> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_features(%x: tensor<1x16x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{input features (64) must equal weight rows (32)}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<32x64xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @projection_heads(%x: tensor<1x16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{weight columns (64) must equal heads * head dim (4 * 8)}}
  %q = attn.projection %x, %w : tensor<1x16x64xf32>, tensor<64x64xf32> -> tensor<1x4x16x8xf32>
  return
}

// -----

func.func @projection_result_shape(%x: tensor<2x16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{result must have shape 2x4x16x16, got 'tensor<2x4x8x16xf32>'}}
  %q = attn.projection %x, %w : tensor<2x16x64xf32>, tensor<64x64xf32> -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @projection_integer(%x: tensor<1x16x64xi32>, %w: tensor<64x64xi32>) {
  // expected-error @+1 {{'attn.projection' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<1x16x64xi32>'}}
  %q = attn.projection %x, %w : tensor<1x16x64xi32>, tensor<64x64xi32> -> tensor<1x4x16x16xi32>
  return
}

//===----------------------------------------------------------------------===//
// attn.merge
//===----------------------------------------------------------------------===//

// -----

func.func @merge_input_rank(%o: tensor<1x16x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'attn.merge' op input must have rank 4, got 'tensor<1x16x64xf32>'}}
  %y = attn.merge %o, %w : tensor<1x16x64xf32>, tensor<64x64xf32> -> tensor<1x16x64xf32>
  return
}

// -----

func.func @merge_weight_rank(%o: tensor<1x4x16x16xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'attn.merge' op weight must have rank 2, got 'tensor<64xf32>'}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf32>, tensor<64xf32> -> tensor<1x16x64xf32>
  return
}

// -----

func.func @merge_result_rank(%o: tensor<1x4x16x16xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'attn.merge' op result must have rank 3, got 'tensor<1x4x16x16xf32>'}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf32>, tensor<64x64xf32> -> tensor<1x4x16x16xf32>
  return
}

// -----

func.func @merge_weight_element_type(%o: tensor<1x4x16x16xf16>, %w: tensor<64x64xbf16>) {
  // expected-error @+1 {{'attn.merge' op input and weight must have the same element type, got 'f16' and 'bf16'}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf16>, tensor<64x64xbf16> -> tensor<1x16x64xf16>
  return
}

// -----

func.func @merge_result_element_type(%o: tensor<1x4x16x16xf16>, %w: tensor<64x64xf16>) {
  // expected-error @+1 {{'attn.merge' op input and result must have the same element type, got 'f16' and 'f32'}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf16>, tensor<64x64xf16> -> tensor<1x16x64xf32>
  return
}

// -----

func.func @merge_weight_rows(%o: tensor<1x4x16x16xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'attn.merge' op weight rows (32) must equal heads * head dim (4 * 16)}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf32>, tensor<32x64xf32> -> tensor<1x16x64xf32>
  return
}

// -----

func.func @merge_result_shape(%o: tensor<1x4x16x16xf32>, %w: tensor<64x48xf32>) {
  // expected-error @+1 {{'attn.merge' op result must have shape 1x16x48, got 'tensor<1x16x64xf32>'}}
  %y = attn.merge %o, %w : tensor<1x4x16x16xf32>, tensor<64x48xf32> -> tensor<1x16x64xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.scores
//===----------------------------------------------------------------------===//

// -----

func.func @scores_query_rank(%q: tensor<8x16x32xf32>, %k: tensor<1x8x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op query must have rank 4, got 'tensor<8x16x32xf32>'}}
  %s = attn.scores %q, %k : tensor<8x16x32xf32>, tensor<1x8x16x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_key_rank(%q: tensor<1x8x16x32xf32>, %k: tensor<1x1x8x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op key must have rank 4, got 'tensor<1x1x8x16x32xf32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x1x8x16x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_key_dynamic(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x?x32xf32>) {
  // expected-error @+1 {{'attn.scores' op key must have a static shape, got 'tensor<1x8x?x32xf32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x8x?x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_key_zero_dim(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x0x32xf32>) {
  // expected-error @+1 {{'attn.scores' op key must have every dimension >= 1, got 'tensor<1x8x0x32xf32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x8x0x32xf32> -> tensor<1x8x16x0xf32>
  return
}

// -----

func.func @scores_element_types(%q: tensor<1x8x16x32xf16>, %k: tensor<1x8x16x32xbf16>) {
  // expected-error @+1 {{'attn.scores' op query and key must have the same element type, got 'f16' and 'bf16'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf16>, tensor<1x8x16x32xbf16> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_batch(%q: tensor<2x8x16x32xf32>, %k: tensor<1x8x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op query and key batch sizes differ: 2 vs 1}}
  %s = attn.scores %q, %k : tensor<2x8x16x32xf32>, tensor<1x8x16x32xf32> -> tensor<2x8x16x16xf32>
  return
}

// -----

func.func @scores_head_dim(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x16x64xf32>) {
  // expected-error @+1 {{'attn.scores' op query and key head dimensions differ: 32 vs 64}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x8x16x64xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_gqa_ratio(%q: tensor<1x8x16x32xf32>, %k: tensor<1x3x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op query heads (8) must be a multiple of key heads (3) for GQA/MQA}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x3x16x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scores_more_key_heads(%q: tensor<1x2x16x32xf32>, %k: tensor<1x4x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op query heads (2) must be a multiple of key heads (4) for GQA/MQA}}
  %s = attn.scores %q, %k : tensor<1x2x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x2x16x16xf32>
  return
}

// -----

func.func @scores_result_shape(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x24x32xf32>) {
  // expected-error @+1 {{'attn.scores' op result must have shape 1x8x16x24, got 'tensor<1x8x24x16xf32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x24x16xf32>
  return
}

// -----

func.func @scores_result_rank(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x24x32xf32>) {
  // expected-error @+1 {{'attn.scores' op result must have shape 1x8x16x24, got 'tensor<8x16x24xf32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<8x16x24xf32>
  return
}

// -----

func.func @scores_i32_result(%q: tensor<1x8x16x32xf32>, %k: tensor<1x8x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op result #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x8x16x16xi32>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32> -> tensor<1x8x16x16xi32>
  return
}

// -----

func.func @scores_f16_result(%q: tensor<1x8x16x32xf16>, %k: tensor<1x8x16x32xf16>) {
  // expected-error @+1 {{'attn.scores' op result #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x8x16x16xf16>'}}
  %s = attn.scores %q, %k : tensor<1x8x16x32xf16>, tensor<1x8x16x32xf16> -> tensor<1x8x16x16xf16>
  return
}

// -----

func.func @scores_unranked(%q: tensor<*xf32>, %k: tensor<1x8x16x32xf32>) {
  // expected-error @+1 {{'attn.scores' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %s = "attn.scores"(%q, %k) : (tensor<*xf32>, tensor<1x8x16x32xf32>) -> tensor<1x8x16x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// attn.scale
//===----------------------------------------------------------------------===//

// -----

func.func @scale_rank(%s: tensor<8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op scores must have rank 4, got 'tensor<8x16x16xf32>'}}
  %t = attn.scale %s by 0.5 : tensor<8x16x16xf32>
  return
}

// -----

func.func @scale_zero(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op factor must be finite and non-zero in f32, got 0.000000e+00}}
  %t = attn.scale %s by 0.0 : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_negative_zero(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op factor must be finite and non-zero in f32, got -0.000000e+00}}
  %t = attn.scale %s by -0.0 : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_inf(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op factor must be finite and non-zero in f32, got INF}}
  %t = attn.scale %s by 0x7FF0000000000000 : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_nan(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op factor must be finite and non-zero in f32, got nan}}
  %t = attn.scale %s by 0x7FF8000000000000 : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_default_without_scores(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op without 'by' needs its operand produced by attn.scores, to take the default 1/sqrt(D)}}
  %t = attn.scale %s : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_default_after_scale(%q: tensor<1x8x16x32xf32>) {
  %s = attn.scores %q, %q : tensor<1x8x16x32xf32>, tensor<1x8x16x32xf32> -> tensor<1x8x16x16xf32>
  %t = attn.scale %s by 2.0 : tensor<1x8x16x16xf32>
  // expected-error @+1 {{'attn.scale' op without 'by' needs its operand produced by attn.scores}}
  %u = attn.scale %t : tensor<1x8x16x16xf32>
  return
}

// -----

func.func @scale_types_differ(%s: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'attn.scale' op failed to verify that all of {scores, result} have same type}}
  %t = "attn.scale"(%s) {factor = 2.0 : f64} : (tensor<1x8x16x16xf32>) -> tensor<1x8x16x8xf32>
  return
}

// -----

func.func @scale_f16(%s: tensor<1x8x16x16xf16>) {
  // expected-error @+1 {{'attn.scale' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x8x16x16xf16>'}}
  %t = attn.scale %s by 2.0 : tensor<1x8x16x16xf16>
  return
}

//===----------------------------------------------------------------------===//
// attn.score_mod
//===----------------------------------------------------------------------===//

// -----

func.func @score_mod_rank(%s: tensor<8x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op scores must have rank 4, got 'tensor<8x4x4xf32>'}}
  %r = attn.score_mod %s : tensor<8x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_arg_count(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region must have 5 arguments (score: f32, b, h, i, j: index, then one per capture), got 4}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %h: index, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_arg_count_captures(%s: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region must have 6 arguments (score: f32, b, h, i, j: index, then one per capture), got 5}}
  %r = attn.score_mod %s captures(%c : tensor<2xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_score_type(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region argument 0 (the score) must be f32, got 'f16'}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f16, %b: index, %h: index, %i: index, %j: index):
    %x = arith.extf %score : f16 to f32
    attn.yield %x : f32
  }
  return
}

// -----

func.func @score_mod_index_type(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region argument 3 (i) must be index, got 'i64'}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: i64, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_capture_type(%s: tensor<1x2x4x4xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region argument 5 must match capture 0 of type 'tensor<2xf32>', got 'tensor<4xf32>'}}
  %r = attn.score_mod %s captures(%c : tensor<2xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<4xf32>):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_yield_type(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi eq, %i, %j : index
    // expected-error @+1 {{'attn.yield' op in a score_mod region must yield 'f32', got 'i1'}}
    attn.yield %c : i1
  }
  return
}

// -----

func.func @score_mod_other_terminator(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op score_mod region must end with attn.yield}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    func.return %score : f32
  }
  return
}

// -----

func.func @score_mod_side_effect(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'memref.alloc' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %m = memref.alloc() : memref<4xf32>
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_float_class(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'math.isinf' op is not supported in a score_mod region: use arith.cmpf (isinf: oeq |x|, inf; isnan: uno x, x; isfinite: olt |x|, inf)}}
    %c = math.isinf %score : f32
    %z = arith.constant 0.0 : f32
    %m = arith.select %c, %z, %score : f32
    attn.yield %m : f32
  }
  return
}

// -----

func.func @score_mod_nested_side_effect(%s: tensor<1x2x4x4xf32>, %c: i1) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    %v = scf.if %c -> f32 {
      // expected-error @+1 {{'memref.alloca' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
      %m = memref.alloca() : memref<1xf32>
      scf.yield %score : f32
    } else {
      scf.yield %z : f32
    }
    attn.yield %v : f32
  }
  return
}

// -----

// Only arith, math, scf, tensor.extract and tensor.dim: a pure tensor op
// from elsewhere is rejected too.
func.func @score_mod_other_tensor_op(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'tensor.empty' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %e = tensor.empty() : tensor<4xf32>
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_constant_index_out_of_bounds(%s: tensor<1x2x4x4xf32>, %t: tensor<3xf32>) {
  %r = attn.score_mod %s captures(%t : tensor<3xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<3xf32>):
    %k = arith.constant 3 : index
    // expected-error @+1 {{'tensor.extract' op index 3 is out of bounds for dimension 0 of size 3}}
    %x = tensor.extract %c[%k] : tensor<3xf32>
    attn.yield %x : f32
  }
  return
}

// -----

// Nested in an scf.if, a constant index is still checked.
func.func @score_mod_nested_negative_index(%s: tensor<1x2x4x4xf32>, %t: tensor<2x3xf32>) {
  %r = attn.score_mod %s captures(%t : tensor<2x3xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2x3xf32>):
    %k = arith.constant -1 : index
    %z = arith.constant 0 : index
    %p = arith.cmpi eq, %i, %j : index
    %v = scf.if %p -> f32 {
      // expected-error @+1 {{'tensor.extract' op index -1 is out of bounds for dimension 1 of size 3}}
      %x = tensor.extract %c[%z, %k] : tensor<2x3xf32>
      scf.yield %x : f32
    } else {
      scf.yield %score : f32
    }
    attn.yield %v : f32
  }
  return
}

// -----

// h takes every value below H = 2: a table of one entry per head is short.
func.func @score_mod_head_index_out_of_bounds(%s: tensor<1x2x4x4xf32>, %t: tensor<1xf32>) {
  %r = attn.score_mod %s captures(%t : tensor<1xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<1xf32>):
    // expected-error @+1 {{'tensor.extract' op index h takes values up to 1, out of bounds for dimension 0 of size 1}}
    %x = tensor.extract %c[%h] : tensor<1xf32>
    attn.yield %x : f32
  }
  return
}

// -----

func.func @attention_batch_index_out_of_bounds(%q: tensor<3x2x4x8xf32>, %t: tensor<2xi32>) {
  %o, %l = attn.attention %q, %q, %q mask_captures(%t : tensor<2xi32>)
      : tensor<3x2x4x8xf32>, tensor<3x2x4x8xf32>, tensor<3x2x4x8xf32> -> tensor<3x2x4x8xf32>, tensor<3x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %c: tensor<2xi32>):
    // expected-error @+1 {{'tensor.extract' op index b takes values up to 2, out of bounds for dimension 0 of size 2}}
    %n = tensor.extract %c[%b] : tensor<2xi32>
    %ni = arith.index_cast %n : i32 to index
    %keep = arith.cmpi slt, %j, %ni : index
    attn.yield %keep : i1
  }
  return
}

// -----

func.func @mask_mod_remainder_by_zero(%s: tensor<1x2x4x4xf32>) {
  %r = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0 : index
    // expected-error @+1 {{'arith.remsi' op divides by a constant 0 in a mask_mod region (undefined behaviour: no value to compute)}}
    %m = arith.remsi %i, %z : index
    %keep = arith.cmpi eq, %m, %j : index
    attn.yield %keep : i1
  }
  return
}

// -----

func.func @score_mod_division_by_zero(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0 : i64
    %ii = arith.index_cast %i : index to i64
    // expected-error @+1 {{'arith.divui' op divides by a constant 0 in a score_mod region}}
    %d = arith.divui %ii, %z : i64
    %f = arith.uitofp %d : i64 to f32
    %r2 = arith.addf %score, %f : f32
    attn.yield %r2 : f32
  }
  return
}

// -----

func.func @score_mod_clampf(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %lo = arith.constant -1.0 : f32
    %hi = arith.constant 1.0 : f32
    // expected-error @+1 {{'math.clampf' op is not supported in a score_mod region: use arith.maximumf and arith.minimumf}}
    %c = math.clampf %score to [%lo, %hi] : f32
    attn.yield %c : f32
  }
  return
}

// -----

func.func @score_mod_index_dialect(%s: tensor<1x2x4x4xf32>) {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'index.sub' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %d = index.sub %i, %j
    attn.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_isolated(%s: tensor<1x2x4x4xf32>, %x: f32) {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{using value defined outside the region}}
    %y = arith.addf %score, %x : f32
    attn.yield %y : f32
  }
  return
}

// -----

func.func @score_mod_two_blocks(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.score_mod' op region #0 ('body') failed to verify constraint: region with 1 blocks}}
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    cf.br ^bb1
  ^bb1:
    %z = arith.constant 0.0 : f32
    attn.yield %z : f32
  }
  return
}

// -----

func.func @score_mod_unranked_capture(%s: tensor<1x2x4x4xf32>, %c: tensor<*xf32>) {
  // expected-error @+1 {{'attn.score_mod' op operand #1 must be variadic of ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %r = attn.score_mod %s captures(%c : tensor<*xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<*xf32>):
    attn.yield %score : f32
  }
  return
}

//===----------------------------------------------------------------------===//
// attn.mask
//===----------------------------------------------------------------------===//

// -----

func.func @mask_rank(%s: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op scores must have rank 4, got 'tensor<2x4x4xf32>'}}
  %m = attn.mask %s causal : tensor<2x4x4xf32>
  return
}

// -----

func.func @mask_window_zero(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op window must be >= 1, got 0}}
  %m = attn.mask %s window 0 : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @mask_window_negative(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op window must be >= 1, got -5}}
  %m = attn.mask %s causal window -5 : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @mask_lengths_rank(%s: tensor<2x2x4x4xf32>, %len: tensor<2x1xi32>) {
  // expected-error @+1 {{'attn.mask' op lengths must have rank 1, got 'tensor<2x1xi32>'}}
  %m = attn.mask %s lengths(%len : tensor<2x1xi32>) : tensor<2x2x4x4xf32>
  return
}

// -----

func.func @mask_lengths_dynamic(%s: tensor<2x2x4x4xf32>, %len: tensor<?xi64>) {
  // expected-error @+1 {{'attn.mask' op lengths must have a static shape, got 'tensor<?xi64>'}}
  %m = attn.mask %s lengths(%len : tensor<?xi64>) : tensor<2x2x4x4xf32>
  return
}

// -----

func.func @mask_lengths_size(%s: tensor<2x2x4x4xf32>, %len: tensor<3xi32>) {
  // expected-error @+1 {{'attn.mask' op lengths must have one entry per batch (2), got 'tensor<3xi32>'}}
  %m = attn.mask %s lengths(%len : tensor<3xi32>) : tensor<2x2x4x4xf32>
  return
}

// -----

func.func @mask_lengths_i16(%s: tensor<2x2x4x4xf32>, %len: tensor<2xi16>) {
  // expected-error @+1 {{'attn.mask' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi16>'}}
  %m = attn.mask %s lengths(%len : tensor<2xi16>) : tensor<2x2x4x4xf32>
  return
}

// -----

func.func @mask_nothing(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op masks nothing: give causal, window, lengths, varlen or a mask_mod region}}
  %m = attn.mask %s : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @mask_captures_without_region(%s: tensor<1x2x4x4xf32>, %doc: tensor<4xi32>) {
  // expected-error @+1 {{'attn.mask' op has captures but no mask_mod region to use them}}
  %m = attn.mask %s causal captures(%doc : tensor<4xi32>) : tensor<1x2x4x4xf32>
  return
}

// -----

func.func @mask_mod_arg_count(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op mask_mod region must have 4 arguments (b, h, i, j: index, then one per capture), got 5}}
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_mod_index_type(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op mask_mod region argument 0 (b) must be index, got 'i32'}}
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: i32, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_mod_last_index_type(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op mask_mod region argument 3 (j) must be index, got 'f32'}}
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: f32):
    %c = arith.cmpi ule, %b, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_mod_capture_type(%s: tensor<1x2x4x4xf32>, %doc: tensor<4xi32>) {
  // expected-error @+1 {{'attn.mask' op mask_mod region argument 4 must match capture 0 of type 'tensor<4xi32>', got 'tensor<4xi64>'}}
  %m = attn.mask %s captures(%doc : tensor<4xi32>) : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<4xi64>):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_mod_yield_type(%s: tensor<1x2x4x4xf32>) {
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    // expected-error @+1 {{'attn.yield' op in a mask_mod region must yield 'i1', got 'f32'}}
    attn.yield %z : f32
  }
  return
}

// -----

func.func @mask_mod_other_terminator(%s: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'attn.mask' op mask_mod region must end with attn.yield}}
  %m = attn.mask %s causal : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    func.return %c : i1
  }
  return
}

// -----

func.func @mask_mod_side_effect(%s: tensor<1x2x4x4xf32>) {
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'memref.alloc' op is not allowed in a mask_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %buf = memref.alloc() : memref<4xindex>
    %x = memref.load %buf[%i] : memref<4xindex>
    %c = arith.cmpi ule, %j, %x : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_memref_capture(%s: tensor<1x2x4x4xf32>, %buf: memref<4xi32>) {
  // expected-error @+1 {{'attn.mask' op operand #1 must be variadic of ranked tensor of any type values, but got 'memref<4xi32>'}}
  %m = attn.mask %s captures(%buf : memref<4xi32>) : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: memref<4xi32>):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @mask_mod_nested_yield(%s: tensor<1x2x4x4xf32>) {
  // A nested attn.yield does not terminate the mask_mod region.
  %m = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    %d = scf.execute_region -> i1 {
      // expected-error @+1 {{'attn.yield' op must terminate the mask_mod region itself, not a nested region}}
      attn.yield %c : i1
    }
    attn.yield %d : i1
  }
  return
}

//===----------------------------------------------------------------------===//
// attn.softmax
//===----------------------------------------------------------------------===//

// -----

func.func @softmax_rank(%s: tensor<4x4xf32>) {
  // expected-error @+1 {{'attn.softmax' op scores must have rank 4, got 'tensor<4x4xf32>'}}
  %p = attn.softmax %s : tensor<4x4xf32>
  return
}

// -----

func.func @softmax_dynamic(%s: tensor<1x2x4x?xf32>) {
  // expected-error @+1 {{'attn.softmax' op scores must have a static shape, got 'tensor<1x2x4x?xf32>'}}
  %p = attn.softmax %s : tensor<1x2x4x?xf32>
  return
}

// -----

func.func @softmax_zero_dim(%s: tensor<1x2x4x0xf32>) {
  // expected-error @+1 {{'attn.softmax' op scores must have every dimension >= 1, got 'tensor<1x2x4x0xf32>'}}
  %p = attn.softmax %s : tensor<1x2x4x0xf32>
  return
}

// -----

func.func @softmax_bf16(%s: tensor<1x2x4x4xbf16>) {
  // expected-error @+1 {{'attn.softmax' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x2x4x4xbf16>'}}
  %p = attn.softmax %s : tensor<1x2x4x4xbf16>
  return
}

//===----------------------------------------------------------------------===//
// attn.apply
//===----------------------------------------------------------------------===//

// -----

func.func @apply_probs_rank(%p: tensor<2x4x6xf32>, %v: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op probs must have rank 4, got 'tensor<2x4x6xf32>'}}
  %o = attn.apply %p, %v : tensor<2x4x6xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_result_rank(%p: tensor<1x2x4x6xf32>, %v: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op result must have rank 4, got 'tensor<2x4x8xf32>'}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @apply_result_element_type(%p: tensor<1x2x4x6xf32>, %v: tensor<1x2x6x8xbf16>) {
  // expected-error @+1 {{'attn.apply' op value and result must have the same element type, got 'bf16' and 'f32'}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x8xbf16> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_value_rank(%p: tensor<1x2x4x6xf32>, %v: tensor<2x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op value must have rank 4, got 'tensor<2x6x8xf32>'}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<2x6x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_batch(%p: tensor<1x2x4x6xf32>, %v: tensor<3x2x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op batch sizes differ: 1 vs 3 (value)}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<3x2x6x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_key_length(%p: tensor<1x2x4x6xf32>, %v: tensor<1x2x7x8xf32>) {
  // expected-error @+1 {{'attn.apply' op key length 6 differs from value length 7}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x7x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_gqa_ratio(%p: tensor<1x6x4x6xf32>, %v: tensor<1x4x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op query heads (6) must be a multiple of value heads (4)}}
  %o = attn.apply %p, %v : tensor<1x6x4x6xf32>, tensor<1x4x6x8xf32> -> tensor<1x6x4x8xf32>
  return
}

// -----

func.func @apply_result_shape(%p: tensor<1x4x4x6xf32>, %v: tensor<1x2x6x8xf32>) {
  // expected-error @+1 {{'attn.apply' op result must have shape 1x4x4x8, got 'tensor<1x2x4x8xf32>'}}
  %o = attn.apply %p, %v : tensor<1x4x4x6xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @apply_f16_probs(%p: tensor<1x2x4x6xf16>, %v: tensor<1x2x6x8xf16>) {
  // expected-error @+1 {{'attn.apply' op operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x2x4x6xf16>'}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf16>, tensor<1x2x6x8xf16> -> tensor<1x2x4x8xf16>
  return
}

// -----

func.func @apply_i64_value(%p: tensor<1x2x4x6xf32>, %v: tensor<1x2x6x8xi64>) {
  // expected-error @+1 {{'attn.apply' op operand #1 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<1x2x6x8xi64>'}}
  %o = attn.apply %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x8xi64> -> tensor<1x2x4x8xi64>
  return
}

//===----------------------------------------------------------------------===//
// attn.attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_query_rank(%q: tensor<2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query must have rank 4, got 'tensor<2x4x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_key_dynamic(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x?x8xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op key must have a static shape, got 'tensor<1x2x?x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_key_element_type(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf16>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query and key must have the same element type, got 'f32' and 'f16'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_value_element_type(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x4x8xbf16>, %v: tensor<1x2x4x8xf16>) {
  // expected-error @+1 {{'attn.attention' op query and value must have the same element type, got 'bf16' and 'f16'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf16> -> tensor<1x2x4x8xf16>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_output_element_type(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x4x8xbf16>, %v: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{'attn.attention' op output must have the element type of value, 'bf16', got 'tensor<1x2x4x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query and key batch sizes differ: 2 vs 1}}
  %o, %lse = attn.attention %q, %k, %v : tensor<2x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query and key head dimensions differ: 8 vs 16}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_gqa_ratio(%q: tensor<1x4x4x8xf32>, %k: tensor<1x3x4x8xf32>, %v: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query heads (4) must be a multiple of key heads (3) for GQA/MQA}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<1x4x4x8xf32>, tensor<1x4x4xf32>
  return
}

// -----

func.func @attention_value_rank(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op value must have rank 4, got 'tensor<2x4x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_value_batch(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op batch sizes differ: 1 vs 2 (value)}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_value_length(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{'attn.attention' op key length 6 differs from value length 5}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_value_heads_ratio(%q: tensor<1x8x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op query heads (8) must be a multiple of value heads (3)}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x8x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32> -> tensor<1x8x4x8xf32>, tensor<1x8x4xf32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<1x8x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op key and value head counts differ: 2 vs 4}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x8x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32> -> tensor<1x8x4x8xf32>, tensor<1x8x4xf32>
  return
}

// -----

func.func @attention_output_shape(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x5xf32>) {
  // expected-error @+1 {{'attn.attention' op output must have shape 1x2x4x5, got 'tensor<1x2x4x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_lse_shape(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x5xf32>) {
  // expected-error @+1 {{'attn.attention' op lse must have shape 1x2x4, got 'tensor<1x2x6xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x5xf32>, tensor<1x2x6xf32>
  return
}

// -----

func.func @attention_lse_rank(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x5xf32>) {
  // expected-error @+1 {{'attn.attention' op lse must have shape 1x2x4, got 'tensor<1x2x4x1xf32>'}}
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x5xf32>, tensor<1x2x4x1xf32>
  return
}

// -----

func.func @attention_lse_bf16(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{'attn.attention' op result #1 must be ranked tensor of 32-bit float values, but got 'tensor<1x2x4xbf16>'}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>
  return
}

// -----

func.func @attention_scale_zero(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op scale must be finite and non-zero in f32, got 0.000000e+00}}
  %o, %lse = attn.attention %q, %q, %q scale 0.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_scale_inf(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op scale must be finite and non-zero in f32, got -INF}}
  %o, %lse = attn.attention %q, %q, %q scale 0xFFF0000000000000 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op window must be >= 1, got 0}}
  %o, %lse = attn.attention %q, %q, %q causal window 0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_lengths_rank(%q: tensor<2x2x4x8xf32>, %len: tensor<1x2xi32>) {
  // expected-error @+1 {{'attn.attention' op lengths must have rank 1, got 'tensor<1x2xi32>'}}
  %o, %lse = attn.attention %q, %q, %q lengths(%len : tensor<1x2xi32>) : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @attention_lengths_size(%q: tensor<2x2x4x8xf32>, %len: tensor<1xi64>) {
  // expected-error @+1 {{'attn.attention' op lengths must have one entry per batch (2), got 'tensor<1xi64>'}}
  %o, %lse = attn.attention %q, %q, %q lengths(%len : tensor<1xi64>) : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @attention_lengths_float(%q: tensor<2x2x4x8xf32>, %len: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention' op operand #3 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %o, %lse = attn.attention %q, %q, %q lengths(%len : tensor<2xf32>) : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @attention_score_captures_without_region(%q: tensor<1x2x4x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention' op has score_captures but no score_mod region}}
  %o, %lse = attn.attention %q, %q, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_mask_captures_without_region(%q: tensor<1x2x4x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'attn.attention' op has mask_captures but no mask_mod region}}
  %o, %lse = attn.attention %q, %q, %q causal mask_captures(%c : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

// The mask_captures of an attention belong to its mask_mod region, not its
// score_mod region.
func.func @attention_mask_captures_with_score_mod_only(%q: tensor<1x2x4x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'attn.attention' op has mask_captures but no mask_mod region}}
  %o, %lse = attn.attention %q, %q, %q mask_captures(%c : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @attention_score_mod_arg_count(%q: tensor<1x2x4x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention' op score_mod region must have 6 arguments (score: f32, b, h, i, j: index, then one per capture), got 5}}
  %o, %lse = attn.attention %q, %q, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @attention_score_mod_score_type(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op score_mod region argument 0 (the score) must be f32, got 'index'}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: index, %b: index, %h: index, %i: index, %j: index):
    %z = arith.constant 0.0 : f32
    attn.yield %z : f32
  }
  return
}

// -----

func.func @attention_score_mod_index_type(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op score_mod region argument 2 (h) must be index, got 'i32'}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: i32, %i: index, %j: index):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @attention_score_mod_capture_type(%q: tensor<1x2x4x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention' op score_mod region argument 5 must match capture 0 of type 'tensor<2xf32>', got 'tensor<2xf16>'}}
  %o, %lse = attn.attention %q, %q, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<2xf16>):
    attn.yield %score : f32
  }
  return
}

// -----

func.func @attention_score_mod_yield_type(%q: tensor<1x2x4x8xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %t = arith.truncf %score : f32 to f16
    // expected-error @+1 {{'attn.yield' op in a score_mod region must yield 'f32', got 'f16'}}
    attn.yield %t : f16
  }
  return
}

// -----

func.func @attention_score_mod_side_effect(%q: tensor<1x2x4x8xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'memref.alloc' op is not allowed in a score_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %m = memref.alloc() : memref<2xf32>
    attn.yield %score : f32
  }
  return
}

// -----

func.func @attention_score_mod_terminator(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op score_mod region must end with attn.yield}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    func.return %score : f32
  }
  return
}

// -----

func.func @attention_mask_mod_arg_count(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op mask_mod region must have 4 arguments (b, h, i, j: index, then one per capture), got 3}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @attention_mask_mod_index_type(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op mask_mod region argument 1 (h) must be index, got 'i64'}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: i64, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @attention_mask_mod_capture_type(%q: tensor<1x2x4x8xf32>, %d: tensor<4xi32>) {
  // expected-error @+1 {{'attn.attention' op mask_mod region argument 4 must match capture 0 of type 'tensor<4xi32>', got 'tensor<8xi32>'}}
  %o, %lse = attn.attention %q, %q, %q mask_captures(%d : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %x: tensor<8xi32>):
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

// The score_captures are not passed to the mask_mod region.
func.func @attention_mask_mod_gets_score_captures(%q: tensor<1x2x4x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{'attn.attention' op mask_mod region must have 4 arguments (b, h, i, j: index, then one per capture), got 5}}
  %o, %lse = attn.attention %q, %q, %q score_captures(%c : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<2xf32>):
    attn.yield %score : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %x: tensor<2xf32>):
    %t = arith.cmpi ule, %j, %i : index
    attn.yield %t : i1
  }
  return
}

// -----

func.func @attention_mask_mod_yield_type(%q: tensor<1x2x4x8xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.index_cast %i : index to i32
    // expected-error @+1 {{'attn.yield' op in a mask_mod region must yield 'i1', got 'i32'}}
    attn.yield %c : i32
  }
  return
}

// -----

func.func @attention_mask_mod_side_effect(%q: tensor<1x2x4x8xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'memref.alloca' op is not allowed in a mask_mod region: use arith, math and scf ops and tensor.extract of captures}}
    %m = memref.alloca() : memref<1xi1>
    %c = arith.cmpi ule, %j, %i : index
    attn.yield %c : i1
  }
  return
}

// -----

func.func @attention_mask_mod_terminator(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'attn.attention' op mask_mod region must end with attn.yield}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ule, %j, %i : index
    func.return %c : i1
  }
  return
}

//===----------------------------------------------------------------------===//
// attn.yield
//===----------------------------------------------------------------------===//

// -----

func.func @yield_outside(%x: f32) {
  // expected-error @+1 {{'attn.yield' op expects parent op to be one of 'attn.score_mod, attn.mask, attn.attention, attn.score_mod_grad, attn.attention_grad, attn.attention_stats}}
  attn.yield %x : f32
}

// -----

func.func @cache_without_causal(%q: tensor<1x2x1x8xf32>, %k: tensor<1x2x16x8xf32>, %len: tensor<1xi32>) {
  // expected-error @+1 {{'attn.attention' op 'cache' needs 'causal' or 'window': it places the queries at the end of each batch's keys, which only those masks read}}
  %o, %lse = attn.attention %q, %k, %k cache lengths(%len : tensor<1xi32>)
      : tensor<1x2x1x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32> -> tensor<1x2x1x8xf32>, tensor<1x2x1xf32>
  return
}

// -----

func.func @mask_cache_without_causal(%s: tensor<1x2x1x16xf32>, %len: tensor<1xi32>) {
  // expected-error @+1 {{'attn.mask' op 'cache' needs 'causal' or 'window'}}
  %m = attn.mask %s cache lengths(%len : tensor<1xi32>) : tensor<1x2x1x16xf32>
  return
}

// -----

// expected-error @+1 {{'attn.max_value' must be a non-negative i64 on a function argument}}
func.func @negative_max_value(%len: tensor<2xi32> {attn.max_value = -1 : i64}) {
  return
}

// -----

// expected-error @+1 {{unknown attn argument attribute 'attn.capacity'}}
func.func @unknown_argument_attribute(%len: tensor<2xi32> {attn.capacity = 4 : i64}) {
  return
}

// -----

func.func @pages_without_cache(%q: tensor<2x2x1x8xf32>, %k: tensor<5x2x16x8xf32>, %len: tensor<2xi32>, %t: tensor<2x3xi32>) {
  // expected-error @+1 {{'attn.attention' op 'pages' needs 'cache' and 'lengths': a paged KV cache holds each batch's first lengths[b] tokens}}
  %o, %lse = attn.attention %q, %k, %k causal lengths(%len : tensor<2xi32>) pages(%t : tensor<2x3xi32>)
      : tensor<2x2x1x8xf32>, tensor<5x2x16x8xf32>, tensor<5x2x16x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return
}

// -----

func.func @pages_per_batch(%q: tensor<2x2x1x8xf32>, %k: tensor<5x2x16x8xf32>, %len: tensor<2xi32>, %t: tensor<3x3xi32>) {
  // expected-error @+1 {{'attn.attention' op pages must have one row per batch (2), got 'tensor<3x3xi32>'}}
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>) pages(%t : tensor<3x3xi32>)
      : tensor<2x2x1x8xf32>, tensor<5x2x16x8xf32>, tensor<5x2x16x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return
}

// -----

func.func @pages_rank(%q: tensor<2x2x1x8xf32>, %k: tensor<5x2x16x8xf32>, %len: tensor<2xi32>, %t: tensor<6xi32>) {
  // expected-error @+1 {{'attn.attention' op pages must have rank 2, got 'tensor<6xi32>'}}
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>) pages(%t : tensor<6xi32>)
      : tensor<2x2x1x8xf32>, tensor<5x2x16x8xf32>, tensor<5x2x16x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return
}

// -----

func.func @pages_of_other_sizes(%q: tensor<2x2x1x8xf32>, %k: tensor<5x2x16x8xf32>, %v: tensor<5x2x8x8xf32>, %len: tensor<2xi32>, %t: tensor<2x3xi32>) {
  // expected-error @+1 {{'attn.attention' op key and value pools must have the same pages of the same size: 'tensor<5x2x16x8xf32>' vs 'tensor<5x2x8x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %v causal cache lengths(%len : tensor<2xi32>) pages(%t : tensor<2x3xi32>)
      : tensor<2x2x1x8xf32>, tensor<5x2x16x8xf32>, tensor<5x2x8x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return
}

// -----

func.func @pages_empty_pool(%q: tensor<2x2x1x8xf32>, %k: tensor<0x2x16x8xf32>, %len: tensor<2xi32>, %t: tensor<2x3xi32>) {
  // expected-error @+1 {{'attn.attention' op key must have every dimension >= 1, got 'tensor<0x2x16x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>) pages(%t : tensor<2x3xi32>)
      : tensor<2x2x1x8xf32>, tensor<0x2x16x8xf32>, tensor<0x2x16x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return
}

// -----

func.func @varlen_rank(%q: tensor<1x2x8x4xf32>, %cu: tensor<2x2xi32>) {
  // expected-error @+1 {{'attn.attention' op varlen must have rank 1, got 'tensor<2x2xi32>'}}
  %o, %lse = attn.attention %q, %q, %q varlen(%cu : tensor<2x2xi32>)
      : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @varlen_one_offset(%q: tensor<1x2x8x4xf32>, %cu: tensor<1xi32>) {
  // expected-error @+1 {{'attn.attention' op varlen needs n + 1 >= 2 offsets (n packed sequences), got 'tensor<1xi32>'}}
  %o, %lse = attn.attention %q, %q, %q varlen(%cu : tensor<1xi32>)
      : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @varlen_cross(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x9x4xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'attn.attention' op with varlen, queries and keys are packed alike: Sq must equal Skv, got 8 and 9}}
  %o, %lse = attn.attention %q, %k, %k varlen(%cu : tensor<3xi32>)
      : tensor<1x2x8x4xf32>, tensor<1x2x9x4xf32>, tensor<1x2x9x4xf32> -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @varlen_cache(%q: tensor<1x2x8x4xf32>, %len: tensor<1xi32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'attn.attention' op takes 'varlen' or 'cache', not both}}
  %o, %lse = attn.attention %q, %q, %q causal cache lengths(%len : tensor<1xi32>) varlen(%cu : tensor<3xi32>)
      : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @varlen_constant_unsorted(%s: tensor<1x2x8x8xf32>) {
  %cu = arith.constant dense<[0, 5, 3, 8]> : tensor<4xi32>
  // expected-error @+1 {{'attn.mask' op varlen offset 2 is 3: the offsets must be nondecreasing, from 0 up to Skv (8)}}
  %m = attn.mask %s varlen(%cu : tensor<4xi32>) : tensor<1x2x8x8xf32>
  return
}

// -----

func.func @varlen_constant_past_keys(%s: tensor<1x2x8x8xf32>) {
  %cu = arith.constant dense<[0, 9]> : tensor<2xi64>
  // expected-error @+1 {{'attn.mask' op varlen offset 1 is 9: the offsets must be nondecreasing, from 0 up to Skv (8)}}
  %m = attn.mask %s varlen(%cu : tensor<2xi64>) : tensor<1x2x8x8xf32>
  return
}
