// RUN: attnc-opt %s -split-input-file -attn-lower-to-linalg -mlir-print-local-scope | FileCheck %s

// attn-lower-to-linalg on the gradient ops: contractions in f32 with
// reassociated shapes, softmax_grad as a row dot and an elementwise step,
// score_mod_grad as the reverse sweep of each scalar rule (plus a sequential
// loop nest for capture gradients), attention_grad recomputing P from LSE.

// dV = P^T dO with GQA: both operands split their heads into (KV head,
// member) so the generic reduces over two plain dimensions (member, query);
// the f32 accumulator is truncated to bf16.
// CHECK-LABEL: func.func @transposed_apply
// CHECK-SAME: %[[P:[^:]*]]: tensor<1x4x8x6xf32> {bufferization.writable = false}, %[[DO:[^:]*]]: tensor<1x4x8x16xbf16> {bufferization.writable = false}
// CHECK-DAG: %[[PE:.*]] = tensor.expand_shape %[[P]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 6] : tensor<1x4x8x6xf32> into tensor<1x2x2x8x6xf32>
// CHECK-DAG: %[[DOE:.*]] = tensor.expand_shape %[[DO]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 16] : tensor<1x4x8x16xbf16> into tensor<1x2x2x8x16xbf16>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x6x16xf32>)
// CHECK: %[[ACC:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5, d2)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[PE]], %[[DOE]] : tensor<1x2x2x8x6xf32>, tensor<1x2x2x8x16xbf16>) outs(%[[INIT]] : tensor<1x2x6x16xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT: %[[BE:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[A]], %[[BE]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[M]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[ACC]] : tensor<1x2x6x16xf32>) outs(%{{.*}} : tensor<1x2x6x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[R]] : tensor<1x2x6x16xbf16>
func.func @transposed_apply(%p: tensor<1x4x8x6xf32>, %do: tensor<1x4x8x16xbf16>) -> tensor<1x2x6x16xbf16> {
  %dv = attn.transposed_apply %p, %do : tensor<1x4x8x6xf32>, tensor<1x4x8x16xbf16> -> tensor<1x2x6x16xbf16>
  return %dv : tensor<1x2x6x16xbf16>
}

// -----

// dX[b,s,e] = sum_{h,d} dY[b,h,s,d] W[e,h*D+d]; dW is computed as [E,H,D]
// and collapsed into [E,H*D].
// CHECK-LABEL: func.func @projection_grad
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x16x32xf32> {bufferization.writable = false}, %[[W:[^:]*]]: tensor<32x32xf32> {bufferization.writable = false}, %[[DY:[^:]*]]: tensor<2x4x16x8xf32> {bufferization.writable = false}
// CHECK: %[[DX:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d2, d3 * 8 + d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[DY]], %[[W]] : tensor<2x4x16x8xf32>, tensor<32x32xf32>) outs(%{{.*}} : tensor<2x16x32xf32>)
// CHECK: %[[DW3:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d0)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d1, d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[X]], %[[DY]] : tensor<2x16x32xf32>, tensor<2x4x16x8xf32>) outs(%{{.*}} : tensor<32x4x8xf32>)
// CHECK: %[[DW:.*]] = tensor.collapse_shape %[[DW3]] {{\[}}[0], [1, 2]] : tensor<32x4x8xf32> into tensor<32x32xf32>
// CHECK: return %[[DX]], %[[DW]] : tensor<2x16x32xf32>, tensor<32x32xf32>
func.func @projection_grad(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) -> (tensor<2x16x32xf32>, tensor<32x32xf32>) {
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return %dx, %dw : tensor<2x16x32xf32>, tensor<32x32xf32>
}

// -----

// f16: the weight gradient is truncated before it is collapsed.
// CHECK-LABEL: func.func @projection_grad_f16
// CHECK: %[[ACC:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16x2x8xf32>)
// CHECK: ^bb0(%{{.*}}: f16, %{{.*}}: f16, %{{.*}}: f32):
// CHECK: %[[DW3:.*]] = linalg.generic {{.*}} ins(%[[ACC]] : tensor<16x2x8xf32>) outs(%{{.*}} : tensor<16x2x8xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[DW:.*]] = tensor.collapse_shape %[[DW3]] {{\[}}[0], [1, 2]] : tensor<16x2x8xf16> into tensor<16x16xf16>
// CHECK: return %{{.*}}, %[[DW]] : tensor<1x4x16xf16>, tensor<16x16xf16>
func.func @projection_grad_f16(%x: tensor<1x4x16xf16>, %w: tensor<16x16xf16>, %dy: tensor<1x2x4x8xf16>) -> (tensor<1x4x16xf16>, tensor<16x16xf16>) {
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<1x4x16xf16>, tensor<16x16xf16>, tensor<1x2x4x8xf16> -> tensor<1x4x16xf16>, tensor<16x16xf16>
  return %dx, %dw : tensor<1x4x16xf16>, tensor<16x16xf16>
}

// -----

// dO[b,h,s,dv] = sum_e dY[b,s,e] Wo[h*Dv+dv,e]; dWo is computed as
// [H,Dv,E] and collapsed into [H*Dv,E].
// CHECK-LABEL: func.func @merge_grad
// CHECK-SAME: %[[O:[^:]*]]: tensor<2x4x16x8xf32> {bufferization.writable = false}, %[[WO:[^:]*]]: tensor<32x24xf32> {bufferization.writable = false}, %[[DY:[^:]*]]: tensor<2x16x24xf32> {bufferization.writable = false}
// CHECK: %[[DO:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d1 * 8 + d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[DY]], %[[WO]] : tensor<2x16x24xf32>, tensor<32x24xf32>) outs(%{{.*}} : tensor<2x4x16x8xf32>)
// CHECK: %[[DW3:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d4, d1)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[O]], %[[DY]] : tensor<2x4x16x8xf32>, tensor<2x16x24xf32>) outs(%{{.*}} : tensor<4x8x24xf32>)
// CHECK: %[[DWO:.*]] = tensor.collapse_shape %[[DW3]] {{\[}}[0, 1], [2]] : tensor<4x8x24xf32> into tensor<32x24xf32>
// CHECK: return %[[DO]], %[[DWO]] : tensor<2x4x16x8xf32>, tensor<32x24xf32>
func.func @merge_grad(%o: tensor<2x4x16x8xf32>, %wo: tensor<32x24xf32>, %dy: tensor<2x16x24xf32>) -> (tensor<2x4x16x8xf32>, tensor<32x24xf32>) {
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf32>, tensor<32x24xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<32x24xf32>
  return %do, %dwo : tensor<2x4x16x8xf32>, tensor<32x24xf32>
}

// -----

// dS = P * (dP - rowsum(P * dP)).
// CHECK-LABEL: func.func @softmax_grad
// CHECK-SAME: %[[P:[^:]*]]: tensor<1x2x4x4xf32> {bufferization.writable = false}, %[[DP:[^:]*]]: tensor<1x2x4x4xf32> {bufferization.writable = false}
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: %[[DELTA:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[P]], %[[DP]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%[[INIT]] : tensor<1x2x4xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[M]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[DS:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[P]], %[[DP]], %[[DELTA]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
// CHECK: ^bb0(%[[PI:.*]]: f32, %[[DPI:.*]]: f32, %[[DI:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[CEN:.*]] = arith.subf %[[DPI]], %[[DI]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[PI]], %[[CEN]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: return %[[DS]] : tensor<1x2x4x4xf32>
func.func @softmax_grad(%p: tensor<1x2x4x4xf32>, %dp: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %ds = attn.softmax_grad %p, %dp : tensor<1x2x4x4xf32>
  return %ds : tensor<1x2x4x4xf32>
}

// -----

// zero_fill: masked entries become 0, not -inf.
// CHECK-LABEL: func.func @mask_zero_fill
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 2 : index
// CHECK-NEXT: %[[J:.*]] = linalg.index 3 : index
// CHECK-NEXT: %[[VIS:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK-NEXT: %[[R:.*]] = arith.select %[[VIS]], %{{.*}}, %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK-NOT: 0xFF800000
func.func @mask_zero_fill(%s: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %m = attn.mask %s causal zero_fill : tensor<1x1x4x4xf32>
  return %m : tensor<1x1x4x4xf32>
}

// -----

// attn.score_mod_grad, one scalar rule at a time: dS = dS' * df/ds in one
// elementwise generic over (scores, dS') in which the region is recomputed
// (what the rule does not use folds away); a rule that multiplies the
// adjoint by a derivative gives 0 where the adjoint is 0 (masked scores,
// underflowed adjoints: the derivative may be inf); without float captures
// there is no loop nest.

// x + x: both operands get g, accumulated.
// CHECK-LABEL: func.func @rule_addf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[DS:.*]] = arith.addf %[[G]], %[[G]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_addf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = arith.addf %x, %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// 3 - x: the subtrahend gets -g.
// CHECK-LABEL: func.func @rule_subf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[DS:.*]] = arith.negf %[[G]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_subf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 3.0 : f32
    %r = arith.subf %c, %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// x * x: g * rhs for lhs plus g * lhs for rhs.
// CHECK-LABEL: func.func @rule_mulf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[A:.*]] = arith.mulf %[[G]], %[[X]] : f32
// CHECK-NEXT: %[[B:.*]] = arith.mulf %[[G]], %[[X]] : f32
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpf oeq, %[[G]], %[[ZERO:[^ ]*]] : f32
// CHECK-NEXT: %[[GA:.*]] = arith.select %[[NONE]], %[[ZERO]], %[[A]] : f32
// CHECK-NEXT: %[[GB:.*]] = arith.select %[[NONE]], %[[ZERO]], %[[B]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.addf %[[GA]], %[[GB]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_mulf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = arith.mulf %x, %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// 3 / x: the divisor gets -(g * r) / x, r = 3 / x recomputed.
// CHECK-LABEL: func.func @rule_divf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[C:.*]] = arith.constant 3.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[R:.*]] = arith.divf %[[C]], %[[X]] : f32
// CHECK-NEXT: %[[GR:.*]] = arith.mulf %[[G]], %[[R]] : f32
// CHECK-NEXT: %[[Q:.*]] = arith.divf %[[GR]], %[[X]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.negf %[[Q]] : f32
// CHECK-NEXT: %[[NONE225:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO225:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD225:.*]] = arith.select %[[NONE225]], %[[ZERO225]], %[[DS]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD225]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_divf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 3.0 : f32
    %r = arith.divf %c, %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// -x: -g.
// CHECK-LABEL: func.func @rule_negf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[DS:.*]] = arith.negf %[[G]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_negf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = arith.negf %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// exp x: g * r.
// CHECK-LABEL: func.func @rule_exp
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[R:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.mulf %[[G]], %[[R]] : f32
// CHECK-NEXT: %[[NONE271:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO271:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD271:.*]] = arith.select %[[NONE271]], %[[ZERO271]], %[[DS]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD271]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_exp(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.exp %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// log x: g / x.
// CHECK-LABEL: func.func @rule_log
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[DS:.*]] = arith.divf %[[G]], %[[X]] : f32
// CHECK-NEXT: %[[NONE293:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO293:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD293:.*]] = arith.select %[[NONE293]], %[[ZERO293]], %[[DS]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD293]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_log(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.log %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// tanh x: g * (1 - r * r).
// CHECK-LABEL: func.func @rule_tanh
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[R:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: %[[RR:.*]] = arith.mulf %[[R]], %[[R]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[ONE]], %[[RR]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.mulf %[[G]], %[[D]] : f32
// CHECK-NEXT: %[[NONE319:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO319:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD319:.*]] = arith.select %[[NONE319]], %[[ZERO319]], %[[DS]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD319]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_tanh(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.tanh %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// sqrt x: g * 0.5 / r.
// CHECK-LABEL: func.func @rule_sqrt
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[R:.*]] = math.sqrt %[[X]] : f32
// CHECK-NEXT: %[[GH:.*]] = arith.mulf %[[G]], %[[HALF]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.divf %[[GH]], %[[R]] : f32
// CHECK-NEXT: %[[NONE344:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO344:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD344:.*]] = arith.select %[[NONE344]], %[[ZERO344]], %[[DS]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD344]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_sqrt(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.sqrt %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// |x|: x >= 0 ? g : -g.
// CHECK-LABEL: func.func @rule_absf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[NN:.*]] = arith.cmpf oge, %[[X]], %[[ZERO]] : f32
// CHECK-NEXT: %[[NG:.*]] = arith.negf %[[G]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.select %[[NN]], %[[G]], %[[NG]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_absf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.absf %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// max(x, 0): g goes to x where x >= 0 (the first operand on ties).
// CHECK-LABEL: func.func @rule_maximumf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[FIRST:.*]] = arith.cmpf oge, %[[X]], %[[ZERO]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.select %[[FIRST]], %[[G]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_maximumf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 0.0 : f32
    %r = arith.maximumf %x, %c : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// min(x, 0): g goes to x where x <= 0.
// CHECK-LABEL: func.func @rule_minimumf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[FIRST:.*]] = arith.cmpf ole, %[[X]], %[[ZERO]] : f32
// CHECK-NEXT: %[[DS:.*]] = arith.select %[[FIRST]], %[[G]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_minimumf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 0.0 : f32
    %r = arith.minimumf %x, %c : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// j <= i ? x : 0: g where the score was selected, 0 elsewhere.
// CHECK-LABEL: func.func @rule_select
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[I:.*]] = linalg.index 2 : index
// CHECK-NEXT: %[[J:.*]] = linalg.index 3 : index
// CHECK-NEXT: %[[P:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK-NEXT: %[[DS:.*]] = arith.select %[[P]], %[[G]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_select(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant 0.0 : f32
    %p = arith.cmpi ule, %j, %i : index
    %r = arith.select %p, %x, %c : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// extf(truncf x): the adjoint goes back through truncf (of extf) then extf (of truncf).
// CHECK-LABEL: func.func @rule_extf_truncf
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false}, %[[GIN:[^:]*]]: tensor<1x1x2x2xf32> {bufferization.writable = false})
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[GIN]] : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>)
// CHECK: ^bb0(%[[X:[^:]*]]: f32, %[[G:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[GH:.*]] = arith.truncf %[[G]] : f32 to f16
// CHECK-NEXT: %[[DS:.*]] = arith.extf %[[GH]] : f16 to f32
// CHECK-NEXT: linalg.yield %[[DS]] : f32
// CHECK-NOT: scf.for
// CHECK: return
func.func @rule_extf_truncf(%s: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x1x2x2xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %t = arith.truncf %x : f32 to f16
    %r = arith.extf %t : f16 to f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x1x2x2xf32>
}

// -----

// Capture gradients: dS uses the capture in the elementwise generic; the
// float captures' gradients start at zero and are accumulated by a
// sequential scf.for nest over (b, h, i, j) with tensor.extract and
// tensor.insert at the read's indices, in f32 whatever the capture's type
// (the bf16 read's f32 adjoint, from before the extf rule's truncf; the
// slope's 0 where dS' is 0, the bias's dS' itself), then converted to
// bf16; the integer capture's gradient is a zero constant.
// CHECK-LABEL: func.func @captures
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x2x3x3xf32> {bufferization.writable = false}, %[[G:[^:]*]]: tensor<1x2x3x3xf32> {bufferization.writable = false}, %[[SL:[^:]*]]: tensor<2xf32> {bufferization.writable = false}, %{{[^:]*}}: tensor<3xbf16> {bufferization.writable = false}, %{{[^:]*}}: tensor<3xi32> {bufferization.writable = false})
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[IZERO:.*]] = arith.constant dense<0> : tensor<3xi32>
// CHECK-DAG: %[[FZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[DS:.*]] = linalg.generic
// CHECK-SAME: ins(%[[S]], %[[G]] : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>)
// CHECK: ^bb0(%{{[^:]*}}: f32, %[[GI:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[H:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[GI]], %[[M]] : f32
// CHECK-NEXT: %[[NONE505:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO505:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD505:.*]] = arith.select %[[NONE505]], %[[ZERO505]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD505]] : f32
// CHECK: %[[FINIT:.*]] = linalg.fill ins(%[[FZERO]] : f32) outs(%{{.*}} : tensor<2xf32>)
// CHECK: %[[BINIT:.*]] = linalg.fill ins(%[[FZERO]] : f32) outs(%{{.*}} : tensor<3xf32>)
// CHECK: %[[NEST:.*]]:2 = scf.for %[[B:.*]] = %[[C0]] to %[[C1]] step %[[C1]] iter_args(%{{.*}} = %[[FINIT]], %{{.*}} = %[[BINIT]]) -> (tensor<2xf32>, tensor<3xf32>) {
// CHECK-NEXT: scf.for %[[HH:.*]] = %[[C0]] to %[[C2]] step %[[C1]]
// CHECK-NEXT: scf.for %[[I:.*]] = %[[C0]] to %[[C3]] step %[[C1]]
// CHECK-NEXT: scf.for %[[J:.*]] = %[[C0]] to %[[C3]] step %[[C1]] iter_args(%[[FACC:.*]] = %{{.*}}, %[[BACC:.*]] = %{{.*}}) -> (tensor<2xf32>, tensor<3xf32>) {
// CHECK-NEXT: %[[SV:.*]] = tensor.extract %[[S]][%[[B]], %[[HH]], %[[I]], %[[J]]] : tensor<1x2x3x3xf32>
// CHECK-NEXT: %[[GV:.*]] = tensor.extract %[[G]][%[[B]], %[[HH]], %[[I]], %[[J]]] : tensor<1x2x3x3xf32>
// CHECK-NEXT: %[[DSL:.*]] = arith.mulf %[[GV]], %[[SV]] : f32
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpf oeq, %[[GV]], %[[FZERO]] : f32
// CHECK-NEXT: %[[GF:.*]] = arith.select %[[NONE]], %[[FZERO]], %[[DSL]] : f32
// CHECK-NEXT: %[[OLDB:.*]] = tensor.extract %[[BACC]][%[[J]]] : tensor<3xf32>
// CHECK-NEXT: %[[NEWB:.*]] = arith.addf %[[OLDB]], %[[GV]] : f32
// CHECK-NEXT: %[[INSB:.*]] = tensor.insert %[[NEWB]] into %[[BACC]][%[[J]]] : tensor<3xf32>
// CHECK-NEXT: %[[OLDF:.*]] = tensor.extract %[[FACC]][%[[HH]]] : tensor<2xf32>
// CHECK-NEXT: %[[NEWF:.*]] = arith.addf %[[OLDF]], %[[GF]] : f32
// CHECK-NEXT: %[[INSF:.*]] = tensor.insert %[[NEWF]] into %[[FACC]][%[[HH]]] : tensor<2xf32>
// CHECK-NEXT: scf.yield %[[INSF]], %[[INSB]] : tensor<2xf32>, tensor<3xf32>
// CHECK: %[[BGRAD:.*]] = linalg.generic {{.*}} ins(%[[NEST]]#1 : tensor<3xf32>) outs(%{{.*}} : tensor<3xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[DS]], %[[NEST]]#0, %[[BGRAD]], %[[IZERO]] : tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<3xbf16>, tensor<3xi32>
func.func @captures(%s: tensor<1x2x3x3xf32>, %g: tensor<1x2x3x3xf32>, %slopes: tensor<2xf32>, %bias: tensor<3xbf16>, %ids: tensor<3xi32>) -> (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<3xbf16>, tensor<3xi32>) {
  %ds, %dc:3 = attn.score_mod_grad %s, %g captures(%slopes, %bias, %ids : tensor<2xf32>, tensor<3xbf16>, tensor<3xi32>) : tensor<1x2x3x3xf32> -> tensor<2xf32>, tensor<3xbf16>, tensor<3xi32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>, %bi: tensor<3xbf16>, %id: tensor<3xi32>):
    %m = tensor.extract %sl[%h] : tensor<2xf32>
    %c = tensor.extract %bi[%j] : tensor<3xbf16>
    %ce = arith.extf %c : bf16 to f32
    %p = arith.mulf %x, %m : f32
    %r = arith.addf %p, %ce : f32
    attn.yield %r : f32
  }
  return %ds, %dc#0, %dc#1, %dc#2 : tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<3xbf16>, tensor<3xi32>
}

// -----

// Only integer captures: zero gradients and no loop nest.
// CHECK-LABEL: func.func @integer_captures_only
// CHECK: %[[IZERO:.*]] = arith.constant dense<0> : tensor<4xi64>
// CHECK-NOT: scf.for
// CHECK: return %{{.*}}, %[[IZERO]] : tensor<1x1x4x4xf32>, tensor<4xi64>
func.func @integer_captures_only(%s: tensor<1x1x4x4xf32>, %g: tensor<1x1x4x4xf32>, %pos: tensor<4xi64>) -> (tensor<1x1x4x4xf32>, tensor<4xi64>) {
  %ds, %dpos = attn.score_mod_grad %s, %g captures(%pos : tensor<4xi64>) : tensor<1x1x4x4xf32> -> tensor<4xi64> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %p: tensor<4xi64>):
    %pj = tensor.extract %p[%j] : tensor<4xi64>
    %pf = arith.sitofp %pj : i64 to f32
    %r = arith.mulf %x, %pf : f32
    attn.yield %r : f32
  }
  return %ds, %dpos : tensor<1x1x4x4xf32>, tensor<4xi64>
}

// -----

// attention_grad: S' = scale * Q K^T recomputed and masked; P = exp(S' - LSE)
// with P = 0 where LSE = -inf (fully masked row); dP = dO V^T;
// Delta = rowsum(P * dP) (= rowsum(dO * O), without O's rounding in narrow
// types); dS' = P * (dP - Delta + dLSE); dS = scale * dS';
// dQ = dS K (GQA floordiv map), dK = dS^T Q and dV = P^T dO summed per group.
// CHECK-LABEL: func.func @attention_grad
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x4x8x16xf32> {bufferization.writable = false}, %[[K:[^:]*]]: tensor<1x2x8x16xf32> {bufferization.writable = false}, %[[V:[^:]*]]: tensor<1x2x8x16xf32> {bufferization.writable = false}, %[[O:[^:]*]]: tensor<1x4x8x16xf32> {bufferization.writable = false}, %[[LSE:[^:]*]]: tensor<1x4x8xf32> {bufferization.writable = false}, %[[DO:[^:]*]]: tensor<1x4x8x16xf32> {bufferization.writable = false}, %[[DLSE:[^:]*]]: tensor<1x4x8xf32> {bufferization.writable = false})
// CHECK-DAG: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[S:.*]] = linalg.generic
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) outs(%{{.*}} : tensor<1x4x8x8xf32>)
// CHECK: %[[SS:.*]] = linalg.generic
// CHECK-SAME: ins(%[[S]] : tensor<1x4x8x8xf32>)
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[SM:.*]] = linalg.generic
// CHECK-SAME: ins(%[[SS]] : tensor<1x4x8x8xf32>)
// CHECK: arith.cmpi ule
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[NEGINF]] : f32
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME: ins(%[[SM]], %[[LSE]] : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>)
// CHECK: ^bb0(%[[SV:[^:]*]]: f32, %[[L:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[EMPTY:.*]] = arith.cmpf oeq, %[[L]], %[[NEGINF]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[SV]], %[[L]] : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT: %[[PV:.*]] = arith.select %[[EMPTY]], %[[ZERO]], %[[E]] : f32
// CHECK-NEXT: linalg.yield %[[PV]] : f32
// CHECK: %[[DP:.*]] = linalg.generic
// CHECK-SAME: affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-SAME: ins(%[[DO]], %[[V]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) outs(%{{.*}} : tensor<1x4x8x8xf32>)
// CHECK: %[[DELTA:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[P]], %[[DP]] : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) outs(%{{.*}} : tensor<1x4x8xf32>)
// CHECK: %[[DSP:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]], %[[DP]], %[[DELTA]], %[[DLSE]] : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>)
// CHECK: ^bb0(%[[PI:[^:]*]]: f32, %[[DPI:[^:]*]]: f32, %[[DI:[^:]*]]: f32, %[[DLI:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[DPI]], %[[DI]] : f32
// CHECK-NEXT: %[[CL:.*]] = arith.addf %[[C]], %[[DLI]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[PI]], %[[CL]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: %[[DS:.*]] = linalg.generic
// CHECK-SAME: ins(%[[DSP]] : tensor<1x4x8x8xf32>)
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[DQ:.*]] = linalg.generic
// CHECK-SAME: affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d4, d3)>
// CHECK-SAME: ins(%[[DS]], %[[K]] : tensor<1x4x8x8xf32>, tensor<1x2x8x16xf32>) outs(%{{.*}} : tensor<1x4x8x16xf32>)
// CHECK: %[[DSE:.*]] = tensor.expand_shape %[[DS]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 8]
// CHECK: %[[QE:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 16]
// CHECK: %[[DK:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[DSE]], %[[QE]] : tensor<1x2x2x8x8xf32>, tensor<1x2x2x8x16xf32>) outs(%{{.*}} : tensor<1x2x8x16xf32>)
// CHECK: %[[PE:.*]] = tensor.expand_shape %[[P]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 8]
// CHECK: %[[DOE:.*]] = tensor.expand_shape %[[DO]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 8, 16]
// CHECK: %[[DV:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[PE]], %[[DOE]] : tensor<1x2x2x8x8xf32>, tensor<1x2x2x8x16xf32>) outs(%{{.*}} : tensor<1x2x8x16xf32>)
// CHECK: return %[[DQ]], %[[DK]], %[[DV]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
func.func @attention_grad(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x4x8x16xf32>, %lse: tensor<1x4x8xf32>, %do: tensor<1x4x8x16xf32>, %dlse: tensor<1x4x8xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do lse_grad(%dlse : tensor<1x4x8xf32>) causal : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return %dq, %dk, %dv : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
}

// -----

// With a score_mod: the gradient flows through the region's rule before the
// scale (dS = scale * dS' * m), and the capture's gradient comes from the
// loop nest; without lse_grad, dS' = P * (dP - Delta).
// CHECK-LABEL: func.func @attention_grad_score_mod
// CHECK-SAME: %[[SL:[^:]*]]: tensor<2xf32> {bufferization.writable = false})
// CHECK: %[[SCALE:.*]] = arith.constant 0.353553385 : f32
// CHECK: %[[SS:.*]] = linalg.generic {{.*}} ins(%{{[^ ,]*}} : tensor<1x2x4x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: %[[SM:.*]] = linalg.generic
// CHECK-SAME: ins(%[[SS]] : tensor<1x2x4x4xf32>)
// CHECK: %[[H:.*]] = linalg.index 1 : index
// CHECK-NEXT: tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
// CHECK: ^bb0(%[[PI:[^:]*]]: f32, %[[DPI:[^:]*]]: f32, %[[DI:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[DPI]], %[[DI]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[PI]], %[[C]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: %[[DSM:.*]] = linalg.generic
// CHECK-SAME: ins(%[[SS]], %{{.*}} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK: ^bb0(%{{[^:]*}}: f32, %[[GI:[^:]*]]: f32, %{{[^:]*}}: f32):
// CHECK-NEXT: %[[H2:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[SL]][%[[H2]]] : tensor<2xf32>
// CHECK-NEXT: %[[G2:.*]] = arith.mulf %[[GI]], %[[M]] : f32
// CHECK-NEXT: %[[NONE646:.*]] = arith.cmpf oeq, %{{[^,]*}}, %[[ZERO646:[^ ]*]] : f32
// CHECK-NEXT: %[[GUARD646:.*]] = arith.select %[[NONE646]], %[[ZERO646]], %[[G2]] : f32
// CHECK-NEXT: linalg.yield %[[GUARD646]] : f32
// CHECK: %[[NEST:.*]] = scf.for
// CHECK: tensor.insert
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[DSM]] : tensor<1x2x4x4xf32>)
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NEST]] : tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<2xf32>
func.func @attention_grad_score_mod(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x1x4x8xbf16>, %v: tensor<1x1x4x8xbf16>, %o: tensor<1x2x4x8xbf16>, %lse: tensor<1x2x4xf32>, %do: tensor<1x2x4x8xbf16>, %sl: tensor<2xf32>) -> (tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<2xf32>) {
  %dq, %dk, %dv, %dsl = attn.attention_grad %q, %k, %v, %o, %lse, %do score_captures(%sl : tensor<2xf32>) : tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x8xbf16> -> tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<2xf32> score_mod {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
    %m = tensor.extract %c[%h] : tensor<2xf32>
    %r = arith.mulf %x, %m : f32
    attn.yield %r : f32
  }
  return %dq, %dk, %dv, %dsl : tensor<1x2x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<2xf32>
}
