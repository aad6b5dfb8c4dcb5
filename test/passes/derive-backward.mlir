// RUN: attnc-opt %s -split-input-file -attn-derive-backward | FileCheck %s

// attn-derive-backward: for each public @f, @f_fwd returns @f's results and
// the saved values (projection results, fused attention O/LSE that @f does
// not return); @f_bwd(inputs, results, saved, d results) -> d float inputs
// applies one rule per op in reverse, accumulating with arith.addf.

// A projection result is saved by the forward, not recomputed by the
// backward: merge_grad then projection_grad on the saved value.
// CHECK-LABEL: func.func @projection(
// CHECK-LABEL: func.func @projection_fwd(
// CHECK-SAME: {{^}}%[[X:[^:]*]]: tensor<2x16x32xf32>, %[[WQ:[^:]*]]: tensor<32x32xf32>, %[[WO:[^:]*]]: tensor<32x24xf32>) -> (tensor<2x16x24xf32>, tensor<2x4x16x8xf32>) attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-NEXT: %[[Q:.*]] = attn.projection %[[X]], %[[WQ]]
// CHECK-NEXT: %[[Y:.*]] = attn.merge %[[Q]], %[[WO]]
// CHECK-NEXT: return %[[Y]], %[[Q]] : tensor<2x16x24xf32>, tensor<2x4x16x8xf32>
// CHECK-LABEL: func.func @projection_bwd(
// CHECK-SAME: {{^}}%[[X:[^:]*]]: tensor<2x16x32xf32>, %[[WQ:[^:]*]]: tensor<32x32xf32>, %[[WO:[^:]*]]: tensor<32x24xf32>, %{{[^:]*}}: tensor<2x16x24xf32>, %[[SQ:[^:]*]]: tensor<2x4x16x8xf32>, %[[DY:[^:]*]]: tensor<2x16x24xf32>) -> (tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<32x24xf32>) {
// CHECK-NEXT: %[[DQ:.*]], %[[DWO:.*]] = attn.merge_grad %[[SQ]], %[[WO]], %[[DY]] : tensor<2x4x16x8xf32>, tensor<32x24xf32>, tensor<2x16x24xf32> -> tensor<2x4x16x8xf32>, tensor<32x24xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DWQ:.*]] = attn.projection_grad %[[X]], %[[WQ]], %[[DQ]] : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
// CHECK-NEXT: return %[[DX]], %[[DWQ]], %[[DWO]] : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<32x24xf32>
func.func @projection(%x: tensor<2x16x32xf32>, %wq: tensor<32x32xf32>, %wo: tensor<32x24xf32>) -> tensor<2x16x24xf32> {
  %q = attn.projection %x, %wq : tensor<2x16x32xf32>, tensor<32x32xf32> -> tensor<2x4x16x8xf32>
  %y = attn.merge %q, %wo : tensor<2x4x16x8xf32>, tensor<32x24xf32> -> tensor<2x16x24xf32>
  return %y : tensor<2x16x24xf32>
}

// -----

// A returned projection result is not saved again: the backward reads it
// from the results.
// CHECK-LABEL: func.func @projection_returned_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x4x8xbf16>, %{{[^:]*}}: tensor<8x8xbf16>) -> tensor<1x2x4x4xbf16> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @projection_returned_bwd(
// CHECK-SAME: {{^}}%[[X:[^:]*]]: tensor<1x4x8xbf16>, %[[W:[^:]*]]: tensor<8x8xbf16>, %{{[^:]*}}: tensor<1x2x4x4xbf16>, %[[DQ:[^:]*]]: tensor<1x2x4x4xbf16>) -> (tensor<1x4x8xbf16>, tensor<8x8xbf16>) {
// CHECK-NEXT: %[[DX:.*]], %[[DW:.*]] = attn.projection_grad %[[X]], %[[W]], %[[DQ]] : tensor<1x4x8xbf16>, tensor<8x8xbf16>, tensor<1x2x4x4xbf16> -> tensor<1x4x8xbf16>, tensor<8x8xbf16>
// CHECK-NEXT: return %[[DX]], %[[DW]]
func.func @projection_returned(%x: tensor<1x4x8xbf16>, %w: tensor<8x8xbf16>) -> tensor<1x2x4x4xbf16> {
  %q = attn.projection %x, %w : tensor<1x4x8xbf16>, tensor<8x8xbf16> -> tensor<1x2x4x4xbf16>
  return %q : tensor<1x2x4x4xbf16>
}

// -----

// CHECK-LABEL: func.func @merge_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<2x4x16x8xf16>, %{{[^:]*}}: tensor<32x24xf16>) -> tensor<2x16x24xf16> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @merge_bwd(
// CHECK-SAME: {{^}}%[[O:[^:]*]]: tensor<2x4x16x8xf16>, %[[WO:[^:]*]]: tensor<32x24xf16>, %{{[^:]*}}: tensor<2x16x24xf16>, %[[DY:[^:]*]]: tensor<2x16x24xf16>) -> (tensor<2x4x16x8xf16>, tensor<32x24xf16>) {
// CHECK-NEXT: %[[DO:.*]], %[[DWO:.*]] = attn.merge_grad %[[O]], %[[WO]], %[[DY]] : tensor<2x4x16x8xf16>, tensor<32x24xf16>, tensor<2x16x24xf16> -> tensor<2x4x16x8xf16>, tensor<32x24xf16>
// CHECK-NEXT: return %[[DO]], %[[DWO]] : tensor<2x4x16x8xf16>, tensor<32x24xf16>
func.func @merge(%o: tensor<2x4x16x8xf16>, %wo: tensor<32x24xf16>) -> tensor<2x16x24xf16> {
  %y = attn.merge %o, %wo : tensor<2x4x16x8xf16>, tensor<32x24xf16> -> tensor<2x16x24xf16>
  return %y : tensor<2x16x24xf16>
}

// -----

// GQA (8 query heads, 2 KV heads): dQ = dS K with attn.apply, dK = dS^T Q
// summed over each group with attn.transposed_apply.
// CHECK-LABEL: func.func @scores_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x8x16x32xf32>, %{{[^:]*}}: tensor<1x2x24x32xf32>) -> tensor<1x8x16x24xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @scores_bwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x8x16x32xf32>, %[[K:[^:]*]]: tensor<1x2x24x32xf32>, %{{[^:]*}}: tensor<1x8x16x24xf32>, %[[DS:[^:]*]]: tensor<1x8x16x24xf32>) -> (tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32>) {
// CHECK-NEXT: %[[DQ:.*]] = attn.apply %[[DS]], %[[K]] : tensor<1x8x16x24xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x16x32xf32>
// CHECK-NEXT: %[[DK:.*]] = attn.transposed_apply %[[DS]], %[[Q]] : tensor<1x8x16x24xf32>, tensor<1x8x16x32xf32> -> tensor<1x2x24x32xf32>
// CHECK-NEXT: return %[[DQ]], %[[DK]] : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32>
func.func @scores(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x24x32xf32>) -> tensor<1x8x16x24xf32> {
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x16x24xf32>
  return %s : tensor<1x8x16x24xf32>
}

// -----

// The gradient of a scale is the same scale; the default 1/sqrt(16) is
// resolved to an explicit factor (the gradient is no attn.scores result).
// CHECK-LABEL: func.func @scale_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x16xf32>, %{{[^:]*}}: tensor<1x2x4x16xf32>) -> tensor<1x2x4x4xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @scale_bwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x2x4x16xf32>, %[[K:[^:]*]]: tensor<1x2x4x16xf32>, %{{[^:]*}}: tensor<1x2x4x4xf32>, %[[DU:[^:]*]]: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) {
// CHECK: %[[DT:.*]] = attn.scale %[[DU]] by -2.000000e+00 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DS:.*]] = attn.scale %[[DT]] by 2.500000e-01 : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DQ:.*]] = attn.apply %[[DS]], %[[K]]
// CHECK-NEXT: %[[DK:.*]] = attn.transposed_apply %[[DS]], %[[Q]]
// CHECK-NEXT: return %[[DQ]], %[[DK]]
func.func @scale(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>) -> tensor<1x2x4x4xf32> {
  %s = attn.scores %q, %k : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x4xf32>
  %t = attn.scale %s : tensor<1x2x4x4xf32>
  %u = attn.scale %t by -2.0 : tensor<1x2x4x4xf32>
  return %u : tensor<1x2x4x4xf32>
}

// -----

// attn.score_mod_grad carries the region and the captures; the float
// capture's gradient is returned, the integer capture (an integer input)
// gets none.
// CHECK-LABEL: func.func @score_mod_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x8x4x4xf32>, %{{[^:]*}}: tensor<8xf32>, %{{[^:]*}}: tensor<4xi32>) -> tensor<1x8x4x4xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @score_mod_bwd(
// CHECK-SAME: {{^}}%[[S:[^:]*]]: tensor<1x8x4x4xf32>, %[[SL:[^:]*]]: tensor<8xf32>, %[[IDS:[^:]*]]: tensor<4xi32>, %{{[^:]*}}: tensor<1x8x4x4xf32>, %[[DT:[^:]*]]: tensor<1x8x4x4xf32>) -> (tensor<1x8x4x4xf32>, tensor<8xf32>) {
// CHECK-NEXT: %[[DS:.*]], %[[DC:.*]]:2 = attn.score_mod_grad %[[S]], %[[DT]] captures(%[[SL]], %[[IDS]] : tensor<8xf32>, tensor<4xi32>) : tensor<1x8x4x4xf32> -> tensor<8xf32>, tensor<4xi32> {
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: f32, %{{[^:]*}}: index, %[[H:[^:]*]]: index, %{{[^:]*}}: index, %[[J:[^:]*]]: index, %[[CSL:[^:]*]]: tensor<8xf32>, %[[CIDS:[^:]*]]: tensor<4xi32>):
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[CSL]][%[[H]]] : tensor<8xf32>
// CHECK-NEXT: %[[ID:.*]] = tensor.extract %[[CIDS]][%[[J]]] : tensor<4xi32>
// CHECK-NEXT: %[[IDF:.*]] = arith.sitofp %[[ID]] : i32 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[M]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[P]], %[[IDF]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[DS]], %[[DC]]#0 : tensor<1x8x4x4xf32>, tensor<8xf32>
func.func @score_mod(%s: tensor<1x8x4x4xf32>, %slopes: tensor<8xf32>, %ids: tensor<4xi32>) -> tensor<1x8x4x4xf32> {
  %t = attn.score_mod %s captures(%slopes, %ids : tensor<8xf32>, tensor<4xi32>) : tensor<1x8x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>, %id: tensor<4xi32>):
    %m = tensor.extract %sl[%h] : tensor<8xf32>
    %idj = tensor.extract %id[%j] : tensor<4xi32>
    %idf = arith.sitofp %idj : i32 to f32
    %p = arith.mulf %score, %m : f32
    %r = arith.addf %p, %idf : f32
    attn.yield %r : f32
  }
  return %t : tensor<1x8x4x4xf32>
}

// -----

// The gradient of a mask is the same mask with zero_fill: same options,
// lengths, captures and region. lengths and the document ids are integer
// inputs without gradients.
// CHECK-LABEL: func.func @mask_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<2x2x4x4xf32>, %{{[^:]*}}: tensor<2xi32>, %{{[^:]*}}: tensor<4xi32>) -> tensor<2x2x4x4xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @mask_bwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<2x2x4x4xf32>, %[[LEN:[^:]*]]: tensor<2xi32>, %[[DOC:[^:]*]]: tensor<4xi32>, %{{[^:]*}}: tensor<2x2x4x4xf32>, %[[DM:[^:]*]]: tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32> {
// CHECK-NEXT: %[[DS:.*]] = attn.mask %[[DM]] causal window 2 lengths(%[[LEN]] : tensor<2xi32>) captures(%[[DOC]] : tensor<4xi32>) zero_fill : tensor<2x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: index, %{{[^:]*}}: index, %[[I:[^:]*]]: index, %[[J:[^:]*]]: index, %[[IDS:[^:]*]]: tensor<4xi32>):
// CHECK-NEXT: %[[DI:.*]] = tensor.extract %[[IDS]][%[[I]]] : tensor<4xi32>
// CHECK-NEXT: %[[DJ:.*]] = tensor.extract %[[IDS]][%[[J]]] : tensor<4xi32>
// CHECK-NEXT: %[[SAME:.*]] = arith.cmpi eq, %[[DI]], %[[DJ]] : i32
// CHECK-NEXT: attn.yield %[[SAME]] : i1
// CHECK-NEXT: }
// CHECK-NEXT: return %[[DS]] : tensor<2x2x4x4xf32>
func.func @mask(%s: tensor<2x2x4x4xf32>, %len: tensor<2xi32>, %doc: tensor<4xi32>) -> tensor<2x2x4x4xf32> {
  %m = attn.mask %s causal window 2 lengths(%len : tensor<2xi32>) captures(%doc : tensor<4xi32>) : tensor<2x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<4xi32>):
    %di = tensor.extract %ids[%i] : tensor<4xi32>
    %dj = tensor.extract %ids[%j] : tensor<4xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %m : tensor<2x2x4x4xf32>
}

// -----

// P is not saved: the backward recomputes it from S and takes the
// softmax_grad of the recomputed P.
// CHECK-LABEL: func.func @softmax_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x4xf32>, %{{[^:]*}}: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @softmax_bwd(
// CHECK-SAME: {{^}}%[[S:[^:]*]]: tensor<1x2x4x4xf32>, %[[V:[^:]*]]: tensor<1x1x4x8xf32>, %{{[^:]*}}: tensor<1x2x4x8xf32>, %[[DO:[^:]*]]: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x1x4x8xf32>) {
// CHECK-NEXT: %[[P:.*]] = attn.softmax %[[S]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DP:.*]] = attn.scores %[[DO]], %[[V]]
// CHECK-NEXT: %[[DV:.*]] = attn.transposed_apply %[[P]], %[[DO]]
// CHECK-NEXT: %[[DS:.*]] = attn.softmax_grad %[[P]], %[[DP]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: return %[[DS]], %[[DV]] : tensor<1x2x4x4xf32>, tensor<1x1x4x8xf32>
func.func @softmax(%s: tensor<1x2x4x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %p = attn.softmax %s : tensor<1x2x4x4xf32>
  %o = attn.apply %p, %v : tensor<1x2x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A returned P is read from the results, not recomputed.
// CHECK-LABEL: func.func @softmax_returned_bwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x4xf32>, %[[P:[^:]*]]: tensor<1x2x4x4xf32>, %[[DP:[^:]*]]: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
// CHECK-NEXT: %[[DS:.*]] = attn.softmax_grad %[[P]], %[[DP]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: return %[[DS]]
func.func @softmax_returned(%s: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %p = attn.softmax %s : tensor<1x2x4x4xf32>
  return %p : tensor<1x2x4x4xf32>
}

// -----

// dP = dO V^T with attn.scores (f32 from bf16), dV = P^T dO summed over
// each group with attn.transposed_apply.
// CHECK-LABEL: func.func @apply_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x4x8x6xf32>, %{{[^:]*}}: tensor<1x2x6x16xbf16>) -> tensor<1x4x8x16xbf16> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @apply_bwd(
// CHECK-SAME: {{^}}%[[P:[^:]*]]: tensor<1x4x8x6xf32>, %[[V:[^:]*]]: tensor<1x2x6x16xbf16>, %{{[^:]*}}: tensor<1x4x8x16xbf16>, %[[DO:[^:]*]]: tensor<1x4x8x16xbf16>) -> (tensor<1x4x8x6xf32>, tensor<1x2x6x16xbf16>) {
// CHECK-NEXT: %[[DP:.*]] = attn.scores %[[DO]], %[[V]] : tensor<1x4x8x16xbf16>, tensor<1x2x6x16xbf16> -> tensor<1x4x8x6xf32>
// CHECK-NEXT: %[[DV:.*]] = attn.transposed_apply %[[P]], %[[DO]] : tensor<1x4x8x6xf32>, tensor<1x4x8x16xbf16> -> tensor<1x2x6x16xbf16>
// CHECK-NEXT: return %[[DP]], %[[DV]] : tensor<1x4x8x6xf32>, tensor<1x2x6x16xbf16>
func.func @apply(%p: tensor<1x4x8x6xf32>, %v: tensor<1x2x6x16xbf16>) -> tensor<1x4x8x16xbf16> {
  %o = attn.apply %p, %v : tensor<1x4x8x6xf32>, tensor<1x2x6x16xbf16> -> tensor<1x4x8x16xbf16>
  return %o : tensor<1x4x8x16xbf16>
}

// -----

// Fused attention returning O only: the forward saves LSE, the backward
// passes the returned O and the saved LSE to attn.attention_grad, without
// lse_grad.
// CHECK-LABEL: func.func @attention_o_fwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x4x8x16xf32>, %[[K:[^:]*]]: tensor<1x2x8x16xf32>, %[[V:[^:]*]]: tensor<1x2x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>) attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = attn.attention %[[Q]], %[[K]], %[[V]] causal
// CHECK-NEXT: return %[[O]], %[[LSE]] : tensor<1x4x8x16xf32>, tensor<1x4x8xf32>
// CHECK-LABEL: func.func @attention_o_bwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x4x8x16xf32>, %[[K:[^:]*]]: tensor<1x2x8x16xf32>, %[[V:[^:]*]]: tensor<1x2x8x16xf32>, %[[O:[^:]*]]: tensor<1x4x8x16xf32>, %[[LSE:[^:]*]]: tensor<1x4x8xf32>, %[[DO:[^:]*]]: tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] causal : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
// CHECK-NEXT: return %[[DQ]], %[[DK]], %[[DV]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
func.func @attention_o(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x4x8xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// O and LSE both returned: nothing is saved, d LSE is passed as lse_grad;
// scale, window, lengths, both regions and their captures are kept; the
// score capture's gradient is returned, lengths (integer) gets none.
// CHECK-LABEL: func.func @attention_both_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x4x8x16xf32>, %{{[^:]*}}: tensor<1x2x8x16xf32>, %{{[^:]*}}: tensor<1x2x8x16xf32>, %{{[^:]*}}: tensor<1xi64>, %{{[^:]*}}: tensor<4xf32>, %{{[^:]*}}: tensor<8xi32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>) attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @attention_both_bwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x4x8x16xf32>, %[[K:[^:]*]]: tensor<1x2x8x16xf32>, %[[V:[^:]*]]: tensor<1x2x8x16xf32>, %[[LEN:[^:]*]]: tensor<1xi64>, %[[SL:[^:]*]]: tensor<4xf32>, %[[DOC:[^:]*]]: tensor<8xi32>, %[[O:[^:]*]]: tensor<1x4x8x16xf32>, %[[LSE:[^:]*]]: tensor<1x4x8xf32>, %[[DO:[^:]*]]: tensor<1x4x8x16xf32>, %[[DLSE:[^:]*]]: tensor<1x4x8xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<4xf32>) {
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]], %[[DSL:.*]] = attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] lse_grad(%[[DLSE]] : tensor<1x4x8xf32>) scale 5.000000e-01 window 4 lengths(%[[LEN]] : tensor<1xi64>) score_captures(%[[SL]] : tensor<4xf32>) mask_captures(%[[DOC]] : tensor<8xi32>) : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<4xf32> score_mod {
// CHECK-NEXT: ^bb0(%[[A:[^:]*]]: f32, %{{[^:]*}}: index, %[[H:[^:]*]]: index, %{{[^:]*}}: index, %{{[^:]*}}: index, %[[CSL:[^:]*]]: tensor<4xf32>):
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[CSL]][%[[H]]] : tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[A]], %[[M]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: } mask_mod {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: index, %{{[^:]*}}: index, %[[I:[^:]*]]: index, %[[J:[^:]*]]: index, %[[IDS:[^:]*]]: tensor<8xi32>):
// CHECK-NEXT: tensor.extract %[[IDS]][%[[I]]]
// CHECK-NEXT: tensor.extract %[[IDS]][%[[J]]]
// CHECK-NEXT: arith.cmpi eq
// CHECK-NEXT: attn.yield %{{.*}} : i1
// CHECK-NEXT: }
// CHECK-NEXT: return %[[DQ]], %[[DK]], %[[DV]], %[[DSL]] : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<4xf32>
func.func @attention_both(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %len: tensor<1xi64>, %slopes: tensor<4xf32>, %doc: tensor<8xi32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>) {
  %o, %lse = attn.attention %q, %k, %v scale 0.5 window 4 lengths(%len : tensor<1xi64>) score_captures(%slopes : tensor<4xf32>) mask_captures(%doc : tensor<8xi32>) : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x4x8xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%h] : tensor<4xf32>
    %r = arith.addf %s, %m : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<8xi32>):
    %di = tensor.extract %ids[%i] : tensor<8xi32>
    %dj = tensor.extract %ids[%j] : tensor<8xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %o, %lse : tensor<1x4x8x16xf32>, tensor<1x4x8xf32>
}

// -----

// LSE returned alone: O is saved and gets a zero cotangent.
// CHECK-LABEL: func.func @attention_lse_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x8xf32>, %{{[^:]*}}: tensor<1x2x4x8xf32>, %{{[^:]*}}: tensor<1x2x4x8xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = attn.attention
// CHECK-NEXT: return %[[LSE]], %[[O]] : tensor<1x2x4xf32>, tensor<1x2x4x8xf32>
// CHECK-LABEL: func.func @attention_lse_bwd(
// CHECK-SAME: {{^}}%[[Q:[^:]*]]: tensor<1x2x4x8xf32>, %[[K:[^:]*]]: tensor<1x2x4x8xf32>, %[[V:[^:]*]]: tensor<1x2x4x8xf32>, %[[LSE:[^:]*]]: tensor<1x2x4xf32>, %[[O:[^:]*]]: tensor<1x2x4x8xf32>, %[[DLSE:[^:]*]]: tensor<1x2x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<1x2x4x8xf32>
// CHECK-NEXT: attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[ZERO]] lse_grad(%[[DLSE]] : tensor<1x2x4xf32>) :
func.func @attention_lse(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %lse : tensor<1x2x4xf32>
}

// -----

// An unused float input gets a zero gradient; an integer input none.
// CHECK-LABEL: func.func @unused_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x4xf32>, %{{[^:]*}}: tensor<3x5xbf16>, %{{[^:]*}}: tensor<1xi32>) -> tensor<1x2x4x4xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @unused_bwd(
// CHECK-SAME: {{^}}%[[S:[^:]*]]: tensor<1x2x4x4xf32>, %{{[^:]*}}: tensor<3x5xbf16>, %[[LEN:[^:]*]]: tensor<1xi32>, %{{[^:]*}}: tensor<1x2x4x4xf32>, %[[DM:[^:]*]]: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<3x5xbf16>) {
// CHECK-NEXT: %[[DS:.*]] = attn.mask %[[DM]] lengths(%[[LEN]] : tensor<1xi32>) zero_fill : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<3x5xbf16>
// CHECK-NEXT: return %[[DS]], %[[ZERO]] : tensor<1x2x4x4xf32>, tensor<3x5xbf16>
func.func @unused(%s: tensor<1x2x4x4xf32>, %unused: tensor<3x5xbf16>, %len: tensor<1xi32>) -> tensor<1x2x4x4xf32> {
  %m = attn.mask %s lengths(%len : tensor<1xi32>) : tensor<1x2x4x4xf32>
  return %m : tensor<1x2x4x4xf32>
}

// -----

// A value used twice (Q as both query and key) accumulates both gradients.
// CHECK-LABEL: func.func @used_twice_fwd(
// CHECK-SAME: {{^}}%{{[^:]*}}: tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> attributes {attn.saved_bytes = {{[0-9]+}} : i64} {
// CHECK-LABEL: func.func @used_twice_bwd(
// CHECK-SAME: {{^}}%[[X:[^:]*]]: tensor<1x2x4x8xf32>, %{{[^:]*}}: tensor<1x2x4x4xf32>, %[[DS:[^:]*]]: tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32> {
// CHECK-NEXT: %[[DQ:.*]] = attn.apply %[[DS]], %[[X]]
// CHECK-NEXT: %[[DK:.*]] = attn.transposed_apply %[[DS]], %[[X]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[DQ]], %[[DK]] : tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[SUM]] : tensor<1x2x4x8xf32>
func.func @used_twice(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> {
  %s = attn.scores %x, %x : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  return %s : tensor<1x2x4x4xf32>
}

// -----

// Only public functions are derived; a private one is left alone.
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT: @helper_fwd
// CHECK-NOT: @helper_bwd
func.func private @helper(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %p = attn.softmax %s : tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}

// -----

// A cache's attention differentiates into an attention_grad with `cache`.
// CHECK-LABEL: func.func @cache_bwd(
// CHECK: attn.attention_grad {{.*}} causal cache lengths(
func.func @cache(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x9x8xf32>, %len: tensor<1xi32>) -> tensor<1x2x3x8xf32> {
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<1xi32>)
      : tensor<1x2x3x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x3x8xf32>, tensor<1x2x3xf32>
  return %o : tensor<1x2x3x8xf32>
}
