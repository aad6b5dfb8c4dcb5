// RUN: attnc-opt %s -split-input-file -attn-derive-backward -verify-diagnostics | FileCheck %s

// A returned scores tensor feeds a scale without `by`: the factor is resolved
// before the backward recomputes the scale from @f_bwd's argument.
// CHECK-LABEL: func.func @returns_scores_bwd
// CHECK: attn.scale %{{.*}} by 2.500000e-01 : tensor<1x2x4x4xf32>
func.func @returns_scores(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %s = attn.scores %q, %k : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x4xf32>
  %t = attn.scale %s : tensor<1x2x4x4xf32>
  %p = attn.softmax %t : tensor<1x2x4x4xf32>
  return %s, %p : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Nothing to save (O and LSE are results): @f_fwd calls @f rather than
// carrying a second copy of the forward.
// CHECK-LABEL: func.func @nothing_saved_fwd
// CHECK-NEXT: %[[R:.*]]:2 = call @nothing_saved(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @nothing_saved(%q: tensor<1x1x4x16xf32>, %k: tensor<1x1x4x16xf32>, %v: tensor<1x1x4x16xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32> -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32>
  return %o, %lse : tensor<1x1x4x16xf32>, tensor<1x1x4xf32>
}
