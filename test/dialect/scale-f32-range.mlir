// Regression: scale factors must be finite and non-zero in f32, the type scores are computed in.
// RUN: attnc-opt %s -split-input-file -verify-diagnostics


func.func @scale_overflows_f32(%s: tensor<1x1x2x2xf32>) {
  // expected-error @+1 {{factor}}
  %t = attn.scale %s by 1.0e300 : tensor<1x1x2x2xf32>
  return
}

// -----

func.func @scale_underflows_f32(%s: tensor<1x1x2x2xf32>) {
  // expected-error @+1 {{factor}}
  %t = attn.scale %s by 1.0e-50 : tensor<1x1x2x2xf32>
  return
}

// -----

func.func @attention_scale_overflows_f32(%q: tensor<1x1x2x4xf32>) {
  // expected-error @+1 {{scale}}
  %o, %lse = attn.attention %q, %q, %q scale 1.0e300 : tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>, tensor<1x1x2xf32>
  return
}
