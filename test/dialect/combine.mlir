// RUN: attnc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// attn.combine and attn.combine_grad: round trip, then one case per
// verifier error.

// CHECK-LABEL: func.func @three_parts
// CHECK: attn.combine %{{.*}}, %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16> lse tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32> -> tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>
// CHECK: attn.combine_grad %{{.*}} lse %{{.*}} grad %{{.*}} lse_grad(%{{.*}} : tensor<1x2x5xf32>) : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16> lse tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32> grad tensor<1x2x5x8xbf16> -> tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>
func.func @three_parts(%a: tensor<1x2x5x8xbf16>, %b: tensor<1x2x5x8xbf16>, %c: tensor<1x2x5x8xbf16>,
                       %la: tensor<1x2x5xf32>, %lb: tensor<1x2x5xf32>, %lc: tensor<1x2x5xf32>)
    -> (tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>) {
  %o, %l = attn.combine %a, %b, %c lse %la, %lb, %lc
      : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>
        lse tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>
        -> tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>
  %ga, %gb, %gc, %gla, %glb, %glc = attn.combine_grad %a, %b, %c lse %la, %lb, %lc grad %o lse_grad(%l : tensor<1x2x5xf32>)
      : tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>
        lse tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32> grad tensor<1x2x5x8xbf16>
        -> tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>,
           tensor<1x2x5xf32>, tensor<1x2x5xf32>, tensor<1x2x5xf32>
  return %o, %l : tensor<1x2x5x8xbf16>, tensor<1x2x5xf32>
}

// -----

func.func @counts(%a: tensor<1x2x5x8xf32>, %la: tensor<1x2x5xf32>, %lb: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine' op needs one lse per output, got 1 outputs and 2 lses}}
  %o, %l = attn.combine %a lse %la, %lb : tensor<1x2x5x8xf32> lse tensor<1x2x5xf32>, tensor<1x2x5xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
  return
}

// -----

func.func @none() {
  // expected-error @+1 {{'attn.combine' op needs at least one partial result}}
  %o, %l = "attn.combine"() {operandSegmentSizes = array<i32: 0, 0>} : () -> (tensor<1x2x5x8xf32>, tensor<1x2x5xf32>)
  return
}

// -----

func.func @types(%a: tensor<1x2x5x8xf32>, %b: tensor<1x2x5x8xbf16>, %la: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine' op needs outputs of one type, got 'tensor<1x2x5x8xf32>' and 'tensor<1x2x5x8xbf16>'}}
  %o, %l = attn.combine %a, %b lse %la, %la : tensor<1x2x5x8xf32>, tensor<1x2x5x8xbf16> lse tensor<1x2x5xf32>, tensor<1x2x5xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
  return
}

// -----

func.func @lse_shape(%a: tensor<1x2x5x8xf32>, %la: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'attn.combine' op lse must have shape}}
  %o, %l = attn.combine %a lse %la : tensor<1x2x5x8xf32> lse tensor<1x2x6xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x6xf32>
  return
}

// -----

func.func @result(%a: tensor<1x2x5x8xf32>, %la: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine' op results must have the partials' types 'tensor<1x2x5x8xf32>' and 'tensor<1x2x5xf32>'}}
  %o, %l = attn.combine %a lse %la : tensor<1x2x5x8xf32> lse tensor<1x2x5xf32> -> tensor<1x2x5x8xf16>, tensor<1x2x5xf32>
  return
}

// -----

func.func @grad_count(%a: tensor<1x2x5x8xf32>, %la: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine_grad' op returns dO_k then dLSE_k: expected 2 results, got 1}}
  %g = attn.combine_grad %a lse %la grad %a : tensor<1x2x5x8xf32> lse tensor<1x2x5xf32> grad tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>
  return
}

// -----

func.func @grad_types(%a: tensor<1x2x5x8xf32>, %la: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine_grad' op result 1 must have type 'tensor<1x2x5xf32>', got 'tensor<1x2x5x8xf32>'}}
  %g, %h = attn.combine_grad %a lse %la grad %a : tensor<1x2x5x8xf32> lse tensor<1x2x5xf32> grad tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>
  return
}

// -----

func.func @grad_output(%a: tensor<1x2x5x8xf32>, %b: tensor<1x2x5x8xf16>, %la: tensor<1x2x5xf32>) {
  // expected-error @+1 {{'attn.combine_grad' op output_grad must have the outputs' type 'tensor<1x2x5x8xf32>', got 'tensor<1x2x5x8xf16>'}}
  %g, %h = attn.combine_grad %a lse %la grad %b : tensor<1x2x5x8xf32> lse tensor<1x2x5xf32> grad tensor<1x2x5x8xf16> -> tensor<1x2x5x8xf32>, tensor<1x2x5xf32>
  return
}
