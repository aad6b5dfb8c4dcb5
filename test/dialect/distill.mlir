// RUN: attnc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: attnc-opt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | attnc-opt -split-input-file -verify-diagnostics | FileCheck %s

// attn.distill and attn.distill_grad: round trip (different head dims, KV
// head counts and element types per side, every option, a mask_mod), then
// one case per verifier and parser error.

// CHECK-LABEL: func.func @all
// CHECK: attn.distill %{{.*}}, %{{.*}}, %{{.*}} teacher %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 teacher_scale 1.250000e-01 causal window 16 lengths(%{{.*}} : tensor<2xi32>) mask_captures(%{{.*}} : tensor<40xi32>) : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32> teacher tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32> -> tensor<2x4x40xf32> mask_mod {
// CHECK: attn.distill_grad %{{.*}}, %{{.*}}, %{{.*}} teacher %{{.*}}, %{{.*}}, %{{.*}} grad %{{.*}} scale 2.500000e-01 teacher_scale 1.250000e-01 causal window 16 lengths(%{{.*}} : tensor<2xi32>) mask_captures(%{{.*}} : tensor<40xi32>) : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32> teacher tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32> grad tensor<2x4x40xf32> -> tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>, tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32> mask_mod {
func.func @all(%qs: tensor<2x4x40x16xbf16>, %ks: tensor<2x2x48x16xbf16>, %ls: tensor<2x4x40xf32>,
               %qt: tensor<2x4x40x64xf32>, %kt: tensor<2x1x48x64xf32>, %lt: tensor<2x4x40xf32>,
               %len: tensor<2xi32>, %doc: tensor<40xi32>, %g: tensor<2x4x40xf32>)
    -> (tensor<2x4x40xf32>, tensor<2x4x40x16xbf16>) {
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt scale 0.25 teacher_scale 0.125
      causal window 16 lengths(%len : tensor<2xi32>) mask_captures(%doc : tensor<40xi32>)
      : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
        teacher tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32>
        -> tensor<2x4x40xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<40xi32>):
    %di = tensor.extract %d[%i] : tensor<40xi32>
    %z = arith.constant 0 : i32
    %keep = arith.cmpi sge, %di, %z : i32
    attn.yield %keep : i1
  }
  %dqs, %dks, %dls, %dqt, %dkt, %dlt = attn.distill_grad %qs, %ks, %ls teacher %qt, %kt, %lt
      grad %g scale 0.25 teacher_scale 0.125 causal window 16 lengths(%len : tensor<2xi32>)
      mask_captures(%doc : tensor<40xi32>)
      : tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>
        teacher tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32>
        grad tensor<2x4x40xf32>
        -> tensor<2x4x40x16xbf16>, tensor<2x2x48x16xbf16>, tensor<2x4x40xf32>,
           tensor<2x4x40x64xf32>, tensor<2x1x48x64xf32>, tensor<2x4x40xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<40xi32>):
    %di = tensor.extract %d[%i] : tensor<40xi32>
    %z = arith.constant 0 : i32
    %keep = arith.cmpi sge, %di, %z : i32
    attn.yield %keep : i1
  }
  return %kl, %dqs : tensor<2x4x40xf32>, tensor<2x4x40x16xbf16>
}

// -----

// The mean: a tensor<f32> result, and its scalar cotangent.
// CHECK-LABEL: func.func @mean
// CHECK: attn.distill %{{.*}}, %{{.*}}, %{{.*}} teacher %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> teacher tensor<1x2x8x32xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8xf32> -> tensor<f32>
// CHECK: attn.distill_grad {{.*}} grad %{{.*}} : {{.*}} grad tensor<f32> ->
func.func @mean(%qs: tensor<1x2x8x16xf32>, %ks: tensor<1x2x8x16xf32>, %ls: tensor<1x2x8xf32>,
                %qt: tensor<1x2x8x32xf32>, %kt: tensor<1x2x8x32xf32>, %lt: tensor<1x2x8xf32>,
                %g: tensor<f32>) -> (tensor<f32>, tensor<1x2x8xf32>) {
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x32xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8xf32> -> tensor<f32>
  %a, %b, %c, %d, %e, %f = attn.distill_grad %qs, %ks, %ls teacher %qt, %kt, %lt grad %g
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x32xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8xf32> grad tensor<f32>
        -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>,
           tensor<1x2x8x32xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8xf32>
  return %kl, %f : tensor<f32>, tensor<1x2x8xf32>
}

// -----

func.func @result_shape(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op result must be tensor<1x2x8xf32> (the KL per row) or tensor<f32> (its mean), got 'tensor<1x2xf32>'}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2xf32>
  return
}

// -----

func.func @result_f16(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op result #0 must be ranked tensor of 32-bit float values}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<f16>
  return
}

// -----

func.func @teacher_rows(%q: tensor<1x2x8x16xf32>, %qt: tensor<1x2x9x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op the teacher's B, H, Sq and Skv (1, 2, 9, 8) must be the student's (1, 2, 8, 8)}}
  %kl = attn.distill %q, %q, %l teacher %qt, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x9x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @teacher_keys(%q: tensor<1x2x8x16xf32>, %kt: tensor<1x2x6x32xf32>, %qt: tensor<1x2x8x32xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op the teacher's B, H, Sq and Skv (1, 2, 8, 6) must be the student's (1, 2, 8, 8)}}
  %kl = attn.distill %q, %q, %l teacher %qt, %kt, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x32xf32>, tensor<1x2x6x32xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @teacher_head_dims(%q: tensor<1x2x8x16xf32>, %qt: tensor<1x2x8x32xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op teacher_query and teacher_key head dimensions differ: 32 vs 16}}
  %kl = attn.distill %q, %q, %l teacher %qt, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x32xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @teacher_gqa(%q: tensor<1x4x8x16xf32>, %kt: tensor<1x3x8x16xf32>, %l: tensor<1x4x8xf32>) {
  // expected-error @+1 {{'attn.distill' op teacher_query heads (4) must be a multiple of teacher_key heads (3) for GQA/MQA}}
  %kl = attn.distill %q, %q, %l teacher %q, %kt, %l
      : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8xf32>
        teacher tensor<1x4x8x16xf32>, tensor<1x3x8x16xf32>, tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  return
}

// -----

func.func @student_types(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xbf16>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op query and key must have the same element type, got 'f32' and 'bf16'}}
  %kl = attn.distill %q, %k, %l teacher %q, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xbf16>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @teacher_lse(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %lt: tensor<1x2x7xf32>) {
  // expected-error @+1 {{'attn.distill' op teacher_lse must have shape 1x2x8, got 'tensor<1x2x7xf32>'}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %lt
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x7xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @teacher_scale(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op teacher_scale must be finite and non-zero in f32, got 0.000000e+00}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l teacher_scale 0.0
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @window(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{'attn.distill' op window must be >= 1, got 0}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l window 0
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @lengths(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.distill' op lengths must have one entry per batch (1), got 'tensor<2xi32>'}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l lengths(%len : tensor<2xi32>)
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @captures_without_region(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %d: tensor<8xi32>) {
  // expected-error @+1 {{'attn.distill' op has mask_captures but no mask_mod region}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l mask_captures(%d : tensor<8xi32>)
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @mask_mod_yield(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 1.0 : f32
    // expected-error @+1 {{'attn.yield' op in a mask_mod region must yield 'i1', got 'f32'}}
    attn.yield %c : f32
  }
  return
}

// -----

func.func @mask_mod_out_of_bounds(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %t: tensor<1xi32>) {
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l mask_captures(%t : tensor<1xi32>)
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %x: tensor<1xi32>):
    // expected-error @+1 {{'tensor.extract' op index h takes values up to 1, out of bounds for dimension 0 of size 1}}
    %v = tensor.extract %x[%h] : tensor<1xi32>
    %z = arith.constant 0 : i32
    %keep = arith.cmpi eq, %v, %z : i32
    attn.yield %keep : i1
  }
  return
}

// -----

func.func @misspelt(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{custom op 'attn.distill' unknown keyword 'teacher_scael'; did you mean 'teacher_scale'?}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l teacher_scael 0.5
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @out_of_order(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{keyword 'scale' repeated or out of order; the keywords come in this order: 'scale', 'teacher_scale', 'causal', 'window', 'lengths', 'mask_captures'}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l causal scale 0.5
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @score_captures(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{custom op 'attn.distill' takes no score_captures: attn.distill has no score_mod region}}
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l score_captures(%c : tensor<2xf32>)
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  return
}

// -----

func.func @score_mod(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) {
  %kl = attn.distill %q, %q, %l teacher %q, %q, %l
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
      // expected-error @+1 {{custom op 'attn.distill' has no score_mod region (this version of attn.distill takes a mask_mod only)}}
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  return
}

// -----

func.func @grad_cotangent(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %g: tensor<1x2xf32>) {
  // expected-error @+1 {{'attn.distill_grad' op kl_grad must be tensor<1x2x8xf32> (the KL per row) or tensor<f32> (its mean), got 'tensor<1x2xf32>'}}
  %a, %b, %c, %d, %e, %f = attn.distill_grad %q, %q, %l teacher %q, %q, %l grad %g
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> grad tensor<1x2xf32>
        -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>,
           tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @grad_types(%q: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'attn.distill_grad' op gradients must have the types of query, key, lse, teacher_query, teacher_key and teacher_lse}}
  %a, %b, %c, %d, %e, %f = attn.distill_grad %q, %q, %l teacher %q, %q, %l grad %g
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> grad tensor<f32>
        -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>,
           tensor<1x2x8x16xbf16>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @grad_teacher_rows(%q: tensor<1x2x8x16xf32>, %qt: tensor<1x4x8x16xf32>, %l: tensor<1x2x8xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'attn.distill_grad' op the teacher's B, H, Sq and Skv (1, 4, 8, 8) must be the student's (1, 2, 8, 8)}}
  %a, %b, %c, %d, %e, %f = attn.distill_grad %q, %q, %l teacher %qt, %q, %l grad %g
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> grad tensor<f32>
        -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>,
           tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return
}
