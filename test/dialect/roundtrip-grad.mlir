// RUN: attnc-opt %s | attnc-opt | FileCheck %s
// RUN: attnc-opt %s -mlir-print-op-generic | attnc-opt | FileCheck %s

// Every gradient op of the attn dialect and every optional form of its
// assembly format, printed and parsed again (custom and generic forms).

// CHECK-LABEL: func.func @projection_grad
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x16x32xf32>, %[[W:[^:]*]]: tensor<32x32xf32>, %[[DY:[^:]*]]: tensor<2x4x16x8xf32>)
// CHECK: %[[DX:.*]], %[[DW:.*]] = attn.projection_grad %[[X]], %[[W]], %[[DY]] : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
// CHECK: return %[[DX]], %[[DW]]
func.func @projection_grad(%x: tensor<2x16x32xf32>, %w: tensor<32x32xf32>, %dy: tensor<2x4x16x8xf32>) -> (tensor<2x16x32xf32>, tensor<32x32xf32>) {
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32> -> tensor<2x16x32xf32>, tensor<32x32xf32>
  return %dx, %dw : tensor<2x16x32xf32>, tensor<32x32xf32>
}

// CHECK-LABEL: func.func @projection_grad_bf16
// CHECK: attn.projection_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x8x32xbf16>, tensor<32x64xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x8x32xbf16>, tensor<32x64xbf16>
func.func @projection_grad_bf16(%x: tensor<1x8x32xbf16>, %w: tensor<32x64xbf16>, %dy: tensor<1x4x8x16xbf16>) -> (tensor<1x8x32xbf16>, tensor<32x64xbf16>) {
  %dx, %dw = attn.projection_grad %x, %w, %dy : tensor<1x8x32xbf16>, tensor<32x64xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x8x32xbf16>, tensor<32x64xbf16>
  return %dx, %dw : tensor<1x8x32xbf16>, tensor<32x64xbf16>
}

// CHECK-LABEL: func.func @merge_grad
// CHECK-SAME: (%[[O:[^:]*]]: tensor<2x4x16x8xf16>, %[[WO:[^:]*]]: tensor<32x24xf16>, %[[DY:[^:]*]]: tensor<2x16x24xf16>)
// CHECK: %[[DO:.*]], %[[DWO:.*]] = attn.merge_grad %[[O]], %[[WO]], %[[DY]] : tensor<2x4x16x8xf16>, tensor<32x24xf16>, tensor<2x16x24xf16> -> tensor<2x4x16x8xf16>, tensor<32x24xf16>
// CHECK: return %[[DO]], %[[DWO]]
func.func @merge_grad(%o: tensor<2x4x16x8xf16>, %wo: tensor<32x24xf16>, %dy: tensor<2x16x24xf16>) -> (tensor<2x4x16x8xf16>, tensor<32x24xf16>) {
  %do, %dwo = attn.merge_grad %o, %wo, %dy : tensor<2x4x16x8xf16>, tensor<32x24xf16>, tensor<2x16x24xf16> -> tensor<2x4x16x8xf16>, tensor<32x24xf16>
  return %do, %dwo : tensor<2x4x16x8xf16>, tensor<32x24xf16>
}

// GQA (8 query heads over 2), MQA (over 1) and plain (same head counts).
// CHECK-LABEL: func.func @transposed_apply
// CHECK-SAME: (%[[P:[^:]*]]: tensor<1x8x64x96xf32>, %[[DO:[^:]*]]: tensor<1x8x64x16xbf16>, %[[DOF:[^:]*]]: tensor<1x8x64x16xf32>)
// CHECK: attn.transposed_apply %[[P]], %[[DO]] : tensor<1x8x64x96xf32>, tensor<1x8x64x16xbf16> -> tensor<1x2x96x16xbf16>
// CHECK: attn.transposed_apply %[[P]], %[[DOF]] : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x1x96x16xf32>
// CHECK: attn.transposed_apply %[[P]], %[[DOF]] : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x8x96x16xf32>
func.func @transposed_apply(%p: tensor<1x8x64x96xf32>, %do: tensor<1x8x64x16xbf16>, %dof: tensor<1x8x64x16xf32>) -> (tensor<1x2x96x16xbf16>, tensor<1x1x96x16xf32>, tensor<1x8x96x16xf32>) {
  %gqa = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>, tensor<1x8x64x16xbf16> -> tensor<1x2x96x16xbf16>
  %mqa = attn.transposed_apply %p, %dof : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x1x96x16xf32>
  %mha = attn.transposed_apply %p, %dof : tensor<1x8x64x96xf32>, tensor<1x8x64x16xf32> -> tensor<1x8x96x16xf32>
  return %gqa, %mqa, %mha : tensor<1x2x96x16xbf16>, tensor<1x1x96x16xf32>, tensor<1x8x96x16xf32>
}

// CHECK-LABEL: func.func @softmax_grad
// CHECK-SAME: (%[[P:[^:]*]]: tensor<1x8x64x64xf32>, %[[DP:[^:]*]]: tensor<1x8x64x64xf32>)
// CHECK: attn.softmax_grad %[[P]], %[[DP]] : tensor<1x8x64x64xf32>
func.func @softmax_grad(%p: tensor<1x8x64x64xf32>, %dp: tensor<1x8x64x64xf32>) -> tensor<1x8x64x64xf32> {
  %ds = attn.softmax_grad %p, %dp : tensor<1x8x64x64xf32>
  return %ds : tensor<1x8x64x64xf32>
}

// Without captures there is no `->` and no capture gradient.
// CHECK-LABEL: func.func @score_mod_grad_no_captures
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x2x4x4xf32>, %[[G:[^:]*]]: tensor<1x2x4x4xf32>)
// CHECK: %{{.*}} = attn.score_mod_grad %[[S]], %[[G]] : tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: f32, %{{[^:]*}}: index, %{{[^:]*}}: index, %{{[^:]*}}: index, %{{[^:]*}}: index):
// CHECK-NEXT: %[[R:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: }
func.func @score_mod_grad_no_captures(%s: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %ds = attn.score_mod_grad %s, %g : tensor<1x2x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    %r = math.tanh %x : f32
    attn.yield %r : f32
  }
  return %ds : tensor<1x2x4x4xf32>
}

// One gradient per capture, integer ones included.
// CHECK-LABEL: func.func @score_mod_grad_captures
// CHECK-SAME: (%[[S:[^:]*]]: tensor<1x8x4x4xf32>, %[[G:[^:]*]]: tensor<1x8x4x4xf32>, %[[SL:[^:]*]]: tensor<8xf32>, %[[IDS:[^:]*]]: tensor<4xi32>)
// CHECK: %[[DS:.*]], %[[DC:.*]]:2 = attn.score_mod_grad %[[S]], %[[G]] captures(%[[SL]], %[[IDS]] : tensor<8xf32>, tensor<4xi32>) : tensor<1x8x4x4xf32> -> tensor<8xf32>, tensor<4xi32> {
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: f32, %{{[^:]*}}: index, %[[H:[^:]*]]: index, %{{[^:]*}}: index, %{{[^:]*}}: index, %[[CSL:[^:]*]]: tensor<8xf32>, %{{[^:]*}}: tensor<4xi32>):
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[CSL]][%[[H]]] : tensor<8xf32>
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[X]], %[[M]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return %[[DS]], %[[DC]]#0, %[[DC]]#1
func.func @score_mod_grad_captures(%s: tensor<1x8x4x4xf32>, %g: tensor<1x8x4x4xf32>, %slopes: tensor<8xf32>, %ids: tensor<4xi32>) -> (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<4xi32>) {
  %ds, %dc:2 = attn.score_mod_grad %s, %g captures(%slopes, %ids : tensor<8xf32>, tensor<4xi32>) : tensor<1x8x4x4xf32> -> tensor<8xf32>, tensor<4xi32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>, %id: tensor<4xi32>):
    %m = tensor.extract %sl[%h] : tensor<8xf32>
    %r = arith.addf %x, %m : f32
    attn.yield %r : f32
  }
  return %ds, %dc#0, %dc#1 : tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<4xi32>
}

// zero_fill alone with the named options, and with every option and a
// mask_mod region.
// CHECK-LABEL: func.func @mask_zero_fill
// CHECK-SAME: (%[[S:[^:]*]]: tensor<2x2x4x4xf32>, %[[LEN:[^:]*]]: tensor<2xi64>, %[[DOC:[^:]*]]: tensor<4xi32>)
// CHECK: %[[A:.*]] = attn.mask %[[S]] causal zero_fill : tensor<2x2x4x4xf32>
// CHECK: %[[B:.*]] = attn.mask %[[A]] window 3 lengths(%[[LEN]] : tensor<2xi64>) zero_fill : tensor<2x2x4x4xf32>
// CHECK: %{{.*}} = attn.mask %[[B]] causal window 2 lengths(%[[LEN]] : tensor<2xi64>) captures(%[[DOC]] : tensor<4xi32>) zero_fill : tensor<2x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: index, %{{[^:]*}}: index, %[[I:[^:]*]]: index, %[[J:[^:]*]]: index, %[[IDS:[^:]*]]: tensor<4xi32>):
// CHECK-NEXT: tensor.extract %[[IDS]][%[[I]]]
// CHECK-NEXT: tensor.extract %[[IDS]][%[[J]]]
// CHECK-NEXT: arith.cmpi eq
// CHECK-NEXT: attn.yield %{{.*}} : i1
// CHECK-NEXT: }
func.func @mask_zero_fill(%s: tensor<2x2x4x4xf32>, %len: tensor<2xi64>, %doc: tensor<4xi32>) -> tensor<2x2x4x4xf32> {
  %a = attn.mask %s causal zero_fill : tensor<2x2x4x4xf32>
  %b = attn.mask %a window 3 lengths(%len : tensor<2xi64>) zero_fill : tensor<2x2x4x4xf32>
  %c = attn.mask %b causal window 2 lengths(%len : tensor<2xi64>) captures(%doc : tensor<4xi32>) zero_fill : tensor<2x2x4x4xf32> {
  ^bb0(%bb: index, %h: index, %i: index, %j: index, %ids: tensor<4xi32>):
    %di = tensor.extract %ids[%i] : tensor<4xi32>
    %dj = tensor.extract %ids[%j] : tensor<4xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %c : tensor<2x2x4x4xf32>
}

// The minimal form: no lse_grad, default scale, nothing masked.
// CHECK-LABEL: func.func @attention_grad_minimal
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x8x64x32xf32>, %[[K:[^:]*]]: tensor<1x2x64x32xf32>, %[[V:[^:]*]]: tensor<1x2x64x16xf32>, %[[O:[^:]*]]: tensor<1x8x64x16xf32>, %[[LSE:[^:]*]]: tensor<1x8x64xf32>, %[[DO:[^:]*]]: tensor<1x8x64x16xf32>)
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>, tensor<1x8x64x16xf32>, tensor<1x8x64xf32>, tensor<1x8x64x16xf32> -> tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>{{$}}
// CHECK-NEXT: return %[[DQ]], %[[DK]], %[[DV]]
func.func @attention_grad_minimal(%q: tensor<1x8x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x16xf32>, %o: tensor<1x8x64x16xf32>, %lse: tensor<1x8x64xf32>, %do: tensor<1x8x64x16xf32>) -> (tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>, tensor<1x8x64x16xf32>, tensor<1x8x64xf32>, tensor<1x8x64x16xf32> -> tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>
  return %dq, %dk, %dv : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>
}

// lse_grad and the named options, in bf16.
// CHECK-LABEL: func.func @attention_grad_options
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x4x8x16xbf16>, %[[K:[^:]*]]: tensor<2x1x8x16xbf16>, %[[V:[^:]*]]: tensor<2x1x8x16xbf16>, %[[O:[^:]*]]: tensor<2x4x8x16xbf16>, %[[LSE:[^:]*]]: tensor<2x4x8xf32>, %[[DO:[^:]*]]: tensor<2x4x8x16xbf16>, %[[DLSE:[^:]*]]: tensor<2x4x8xf32>, %[[LEN:[^:]*]]: tensor<2xi32>)
// CHECK: attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] lse_grad(%[[DLSE]] : tensor<2x4x8xf32>) scale 1.250000e-01 causal window 4 lengths(%[[LEN]] : tensor<2xi32>) : tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>{{$}}
// CHECK: attn.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] lse_grad(%[[DLSE]] : tensor<2x4x8xf32>) :
func.func @attention_grad_options(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x1x8x16xbf16>, %v: tensor<2x1x8x16xbf16>, %o: tensor<2x4x8x16xbf16>, %lse: tensor<2x4x8xf32>, %do: tensor<2x4x8x16xbf16>, %dlse: tensor<2x4x8xf32>, %len: tensor<2xi32>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do lse_grad(%dlse : tensor<2x4x8xf32>) scale 0.125 causal window 4 lengths(%len : tensor<2xi32>) : tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>
  %dq2, %dk2, %dv2 = attn.attention_grad %q, %k, %v, %o, %lse, %do lse_grad(%dlse : tensor<2x4x8xf32>) : tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x1x8x16xbf16>, tensor<2x1x8x16xbf16>
  return %dq, %dq2 : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>
}

// A score_mod with captures (one gradient each) and a mask_mod with
// captures (none).
// CHECK-LABEL: func.func @attention_grad_regions
// CHECK-SAME: %[[SL:[^:]*]]: tensor<2xf32>, %[[POS:[^:]*]]: tensor<4xi64>, %[[DOC:[^:]*]]: tensor<4xi32>)
// CHECK: %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}}:2 = attn.attention_grad %{{.*}} score_captures(%[[SL]], %[[POS]] : tensor<2xf32>, tensor<4xi64>) mask_captures(%[[DOC]] : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>, tensor<4xi64> score_mod {
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: f32, %{{[^:]*}}: index, %[[H:[^:]*]]: index, %{{[^:]*}}: index, %{{[^:]*}}: index, %[[CSL:[^:]*]]: tensor<2xf32>, %{{[^:]*}}: tensor<4xi64>):
// CHECK-NEXT: %[[M:.*]] = tensor.extract %[[CSL]][%[[H]]] : tensor<2xf32>
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[X]], %[[M]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32
// CHECK-NEXT: } mask_mod {
// CHECK-NEXT: ^bb0(%{{[^:]*}}: index, %{{[^:]*}}: index, %[[I:[^:]*]]: index, %[[J:[^:]*]]: index, %[[IDS:[^:]*]]: tensor<4xi32>):
// CHECK-NEXT: tensor.extract %[[IDS]][%[[I]]]
// CHECK-NEXT: tensor.extract %[[IDS]][%[[J]]]
// CHECK-NEXT: arith.cmpi eq
// CHECK-NEXT: attn.yield %{{.*}} : i1
// CHECK-NEXT: }
// Only a mask_mod: no capture gradients.
// CHECK: attn.attention_grad %{{.*}} mask_captures(%[[DOC]] : tensor<4xi32>) : {{.*}} -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> mask_mod {
func.func @attention_grad_regions(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf32>, %do: tensor<1x2x4x8xf32>, %sl: tensor<2xf32>, %pos: tensor<4xi64>, %doc: tensor<4xi32>) -> tensor<2xf32> {
  %g:5 = attn.attention_grad %q, %q, %q, %o, %lse, %do score_captures(%sl, %pos : tensor<2xf32>, tensor<4xi64>) mask_captures(%doc : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>, tensor<4xi64> score_mod {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>, %p: tensor<4xi64>):
    %m = tensor.extract %c[%h] : tensor<2xf32>
    %r = arith.mulf %x, %m : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<4xi32>):
    %di = tensor.extract %ids[%i] : tensor<4xi32>
    %dj = tensor.extract %ids[%j] : tensor<4xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  %h:3 = attn.attention_grad %q, %q, %q, %o, %lse, %do mask_captures(%doc : tensor<4xi32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> mask_mod {
  ^bb0(%b: index, %hh: index, %i: index, %j: index, %ids: tensor<4xi32>):
    %di = tensor.extract %ids[%i] : tensor<4xi32>
    %dj = tensor.extract %ids[%j] : tensor<4xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %g#3 : tensor<2xf32>
}
