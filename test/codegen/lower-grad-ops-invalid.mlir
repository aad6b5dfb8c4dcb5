// RUN: attnc-opt %s -attn-lower-to-linalg -verify-diagnostics

// A hand-written gradient op gets the rule check of attn-derive-backward:
// never a silently zero gradient.
func.func @atan(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{could not be lowered to linalg}}
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    // expected-error @+1 {{'math.atan' op has no gradient rule}}
    %r = math.atan %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}
