// RUN: attnc-opt %s -attn-derive-backward -attn-keep-entry-points=entry-points=forward | FileCheck %s --check-prefix=FORWARD --implicit-check-not=_bwd
// RUN: attnc-opt %s -attn-derive-backward -attn-keep-entry-points=entry-points=backward | FileCheck %s --check-prefix=BACKWARD --implicit-check-not='func.func @f(' --implicit-check-not='func.func @g(' --implicit-check-not=_fwd
// RUN: attnc-opt %s -attn-derive-backward -attn-keep-entry-points | FileCheck %s --check-prefix=ALL

// The forward half keeps @f and @f_fwd of every kernel, the backward half
// @f_bwd (the JIT compiles the two on threads of their own); all of them by
// default.
// FORWARD: func.func @f(
// FORWARD: func.func @f_fwd(
// FORWARD: func.func @g(
// FORWARD: func.func @g_fwd(
// BACKWARD: func.func @f_bwd(
// BACKWARD: func.func @g_bwd(
// ALL: func.func @f(
// ALL: func.func @f_fwd(
// ALL: func.func @f_bwd(
// ALL: func.func @g(
// ALL: func.func @g_fwd(
// ALL: func.func @g_bwd(
func.func @f(%q: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %o, %lse = attn.attention %q, %q, %q causal : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %o : tensor<1x2x8x16xf32>
}
func.func @g(%q: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %o : tensor<1x2x8x16xf32>
}
