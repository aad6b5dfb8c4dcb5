// RUN: attnc-opt %s -split-input-file -attn-lower-to-linalg -mlir-print-local-scope | FileCheck %s

// attn-lower-to-linalg: one linalg op per step, f32 accumulation, GQA via
// floordiv maps, regions inlined with linalg.index, read-only arguments.
// (-mlir-print-local-scope prints the indexing maps inline.)

// CHECK-LABEL: func.func @projection
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x16x64xf32> {bufferization.writable = false}
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x96xf32> {bufferization.writable = false}
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<2x3x16x32xf32>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<2x3x16x32xf32>)
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d4, d1 * 32 + d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<2x16x64xf32>, tensor<64x96xf32>) outs(%[[INIT]] : tensor<2x3x16x32xf32>)
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: return %[[R]] : tensor<2x3x16x32xf32>
func.func @projection(%x: tensor<2x16x64xf32>, %w: tensor<64x96xf32>) -> tensor<2x3x16x32xf32> {
  %h = attn.projection %x, %w : tensor<2x16x64xf32>, tensor<64x96xf32> -> tensor<2x3x16x32xf32>
  return %h : tensor<2x3x16x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge
// CHECK: linalg.fill
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d3 * 32 + d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: outs(%{{.*}} : tensor<2x16x40xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: return %[[R]] : tensor<2x16x40xf32>
func.func @merge(%o: tensor<2x3x16x32xf32>, %wo: tensor<96x40xf32>) -> tensor<2x16x40xf32> {
  %y = attn.merge %o, %wo : tensor<2x3x16x32xf32>, tensor<96x40xf32> -> tensor<2x16x40xf32>
  return %y : tensor<2x16x40xf32>
}

// -----

// f16 projection: the contraction extends to f32, a second generic truncates.
// CHECK-LABEL: func.func @projection_f16
// CHECK: %[[ACC:.*]] = linalg.generic
// CHECK-SAME: outs(%{{.*}} : tensor<1x2x8x16xf32>)
// CHECK: ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %{{.*}}: f32):
// CHECK-NEXT: %[[AE:.*]] = arith.extf %[[A]] : f16 to f32
// CHECK-NEXT: %[[BE:.*]] = arith.extf %[[B]] : f16 to f32
// CHECK-NEXT: arith.mulf %[[AE]], %[[BE]] : f32
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[ACC]] : tensor<1x2x8x16xf32>) outs(%{{.*}} : tensor<1x2x8x16xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: return %[[R]] : tensor<1x2x8x16xf16>
func.func @projection_f16(%x: tensor<1x8x32xf16>, %w: tensor<32x32xf16>) -> tensor<1x2x8x16xf16> {
  %h = attn.projection %x, %w : tensor<1x8x32xf16>, tensor<32x32xf16> -> tensor<1x2x8x16xf16>
  return %h : tensor<1x2x8x16xf16>
}

// -----

// GQA: 8 query heads over 2 key heads reads key head h floordiv 4; the
// default scale of the scale op is resolved to 1/sqrt(32).
// CHECK-LABEL: func.func @scores_gqa_default_scale
// CHECK-DAG: %[[FACTOR:.*]] = arith.constant 0.176776692 : f32
// CHECK: %[[S:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: outs(%{{.*}} : tensor<1x8x16x24xf32>)
// CHECK: %[[T:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME: ins(%[[S]] : tensor<1x8x16x24xf32>)
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[IN]], %[[FACTOR]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK: return %[[T]]
// CHECK-NOT: attn.
func.func @scores_gqa_default_scale(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x24x32xf32>) -> tensor<1x8x16x24xf32> {
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x16x24xf32>
  %t = attn.scale %s : tensor<1x8x16x24xf32>
  return %t : tensor<1x8x16x24xf32>
}

// -----

// MQA: the 4 query heads all read key head h floordiv 4 = 0; the explicit
// factor is kept.
// CHECK-LABEL: func.func @scores_mqa_explicit_scale
// CHECK-DAG: %[[FACTOR:.*]] = arith.constant -2.500000e-01 : f32
// CHECK: linalg.generic
// CHECK-SAME: affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 4, d3, d4)>
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<1x4x16x32xbf16>, tensor<1x1x24x32xbf16>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[FACTOR]] : f32
func.func @scores_mqa_explicit_scale(%q: tensor<1x4x16x32xbf16>, %k: tensor<1x1x24x32xbf16>) -> tensor<1x4x16x24xf32> {
  %s = attn.scores %q, %k : tensor<1x4x16x32xbf16>, tensor<1x1x24x32xbf16> -> tensor<1x4x16x24xf32>
  %t = attn.scale %s by -0.25 : tensor<1x4x16x24xf32>
  return %t : tensor<1x4x16x24xf32>
}

// -----

// The default scale takes D of the scores op (here 64), not of any other op.
// CHECK-LABEL: func.func @scale_default_d64
// CHECK-DAG: arith.constant 1.250000e-01 : f32
// CHECK-NOT: arith.constant 0.176776692
func.func @scale_default_d64(%q: tensor<1x2x4x64xf32>) -> tensor<1x2x4x4xf32> {
  %s = attn.scores %q, %q : tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32> -> tensor<1x2x4x4xf32>
  %t = attn.scale %s : tensor<1x2x4x4xf32>
  return %t : tensor<1x2x4x4xf32>
}

// -----

// The score_mod body is inlined; (b, h, i, j) become linalg.index and the
// capture becomes the function argument.
// CHECK-LABEL: func.func @score_mod_alibi
// CHECK-SAME: %[[S:[^:]*]]: tensor<1x8x4x4xf32>
// CHECK-SAME: %[[SLOPES:[^:]*]]: tensor<8xf32>
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]] : tensor<1x8x4x4xf32>)
// CHECK: ^bb0(%[[SCORE:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG: %[[H:.*]] = linalg.index 1 : index
// CHECK-DAG: %[[I:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[J:.*]] = linalg.index 3 : index
// CHECK: %[[SLOPE:.*]] = tensor.extract %[[SLOPES]][%[[H]]] : tensor<8xf32>
// CHECK: %[[D:.*]] = arith.subi %[[J]], %[[I]] : index
// CHECK: %[[DI:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK: %[[DF:.*]] = arith.sitofp %[[DI]] : i64 to f32
// CHECK: %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %[[DF]] : f32
// CHECK: %[[NEW:.*]] = arith.addf %[[SCORE]], %[[BIAS]] : f32
// CHECK: linalg.yield %[[NEW]] : f32
// CHECK: return %[[R]]
// CHECK-NOT: attn.yield
func.func @score_mod_alibi(%s: tensor<1x8x4x4xf32>, %slopes: tensor<8xf32>) -> tensor<1x8x4x4xf32> {
  %r = attn.score_mod %s captures(%slopes : tensor<8xf32>) : tensor<1x8x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
    %m = tensor.extract %sl[%h] : tensor<8xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %y = arith.addf %score, %bias : f32
    attn.yield %y : f32
  }
  return %r : tensor<1x8x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @score_mod_softcap
// CHECK-DAG: %[[CAP:.*]] = arith.constant 3.000000e+01 : f32
// CHECK: linalg.generic
// CHECK: ^bb0(%[[SCORE:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[X:.*]] = arith.divf %[[SCORE]], %[[CAP]] : f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK-NEXT: linalg.yield %[[Y]] : f32
func.func @score_mod_softcap(%s: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %r = attn.score_mod %s : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %t = math.tanh %x : f32
    %y = arith.mulf %t, %cap : f32
    attn.yield %y : f32
  }
  return %r : tensor<1x2x4x4xf32>
}

// -----

// Causal: key j is visible from query i when j <= i.
// CHECK-LABEL: func.func @mask_causal
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG: %[[I:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[J:.*]] = linalg.index 3 : index
// CHECK: %[[VIS:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK: %[[R:.*]] = arith.select %[[VIS]], %[[IN]], %[[NEG_INF]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @mask_causal(%s: tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32> {
  %m = attn.mask %s causal : tensor<1x2x4x6xf32>
  return %m : tensor<1x2x4x6xf32>
}

// -----

// A window of 3: j <= i and i - j < 3.
// CHECK-LABEL: func.func @mask_window
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[W:.*]] = arith.constant 3 : index
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG: %[[I:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[J:.*]] = linalg.index 3 : index
// CHECK: %[[CAUSAL:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK: %[[DIFF:.*]] = arith.subi %[[I]], %[[J]] : index
// CHECK: %[[NEAR:.*]] = arith.cmpi slt, %[[DIFF]], %[[W]] : index
// CHECK: %[[VIS:.*]] = arith.andi %[[CAUSAL]], %[[NEAR]] : i1
// CHECK: arith.select %[[VIS]], %[[IN]], %[[NEG_INF]] : f32
func.func @mask_window(%s: tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32> {
  %m = attn.mask %s window 3 : tensor<1x2x4x6xf32>
  return %m : tensor<1x2x4x6xf32>
}

// -----

// Key padding: j < len[b], with i32 lengths cast to index.
// CHECK-LABEL: func.func @mask_lengths_i32
// CHECK-SAME: %[[LEN:[^:]*]]: tensor<2xi32>
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG: %[[B:.*]] = linalg.index 0 : index
// CHECK-DAG: %[[J:.*]] = linalg.index 3 : index
// CHECK: %[[L:.*]] = tensor.extract %[[LEN]][%[[B]]] : tensor<2xi32>
// CHECK: %[[LI:.*]] = arith.index_cast %[[L]] : i32 to index
// CHECK: %[[VIS:.*]] = arith.cmpi slt, %[[J]], %[[LI]] : index
// CHECK: arith.select %[[VIS]], %[[IN]], %{{.*}} : f32
// CHECK-NOT: arith.cmpi ule
func.func @mask_lengths_i32(%s: tensor<2x2x4x6xf32>, %len: tensor<2xi32>) -> tensor<2x2x4x6xf32> {
  %m = attn.mask %s lengths(%len : tensor<2xi32>) : tensor<2x2x4x6xf32>
  return %m : tensor<2x2x4x6xf32>
}

// -----

// CHECK-LABEL: func.func @mask_causal_lengths_i64
// CHECK-SAME: %[[LEN:[^:]*]]: tensor<2xi64>
// CHECK: linalg.generic
// CHECK: %[[CAUSAL:.*]] = arith.cmpi ule
// CHECK: %[[L:.*]] = tensor.extract %[[LEN]][%{{.*}}] : tensor<2xi64>
// CHECK: %[[LI:.*]] = arith.index_cast %[[L]] : i64 to index
// CHECK: %[[PAD:.*]] = arith.cmpi slt, %{{.*}}, %[[LI]] : index
// CHECK: %[[VIS:.*]] = arith.andi %[[CAUSAL]], %[[PAD]] : i1
// CHECK: arith.select %[[VIS]]
func.func @mask_causal_lengths_i64(%s: tensor<2x2x4x6xf32>, %len: tensor<2xi64>) -> tensor<2x2x4x6xf32> {
  %m = attn.mask %s causal lengths(%len : tensor<2xi64>) : tensor<2x2x4x6xf32>
  return %m : tensor<2x2x4x6xf32>
}

// -----

// Document masking with a mask_mod region over a captured tensor.
// CHECK-LABEL: func.func @mask_mod_document
// CHECK-SAME: %[[DOC:[^:]*]]: tensor<4xi32>
// CHECK: linalg.generic
// CHECK: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG: %[[I:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[J:.*]] = linalg.index 3 : index
// CHECK: %[[DI:.*]] = tensor.extract %[[DOC]][%[[I]]] : tensor<4xi32>
// CHECK: %[[DJ:.*]] = tensor.extract %[[DOC]][%[[J]]] : tensor<4xi32>
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[DI]], %[[DJ]] : i32
// CHECK: arith.select %[[SAME]], %[[IN]], %{{.*}} : f32
// CHECK-NOT: attn.yield
func.func @mask_mod_document(%s: tensor<1x2x4x4xf32>, %doc: tensor<4xi32>) -> tensor<1x2x4x4xf32> {
  %m = attn.mask %s captures(%doc : tensor<4xi32>) : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<4xi32>):
    %di = tensor.extract %ids[%i] : tensor<4xi32>
    %dj = tensor.extract %ids[%j] : tensor<4xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %m : tensor<1x2x4x4xf32>
}

// -----

// Softmax: row max (reduction from -inf), row sum of exp(s - m) with a
// fully masked row (m = -inf) subtracting 0, and division with 0 for an
// empty row.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: %[[S:[^:]*]]: tensor<1x2x4x6xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAX_INIT:.*]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[S]] : tensor<1x2x4x6xf32>) outs(%[[MAX_INIT]] : tensor<1x2x4xf32>)
// CHECK: arith.maximumf
// CHECK: %[[SUM_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[S]], %[[MAX]] : tensor<1x2x4x6xf32>, tensor<1x2x4xf32>) outs(%[[SUM_INIT]] : tensor<1x2x4xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[M:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[EMPTY_ROW:.*]] = arith.cmpf oeq, %[[M]], %[[NEG_INF]] : f32
// CHECK-NEXT: %[[SAFE:.*]] = arith.select %[[EMPTY_ROW]], %[[ZERO]], %[[M]] : f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[X]], %[[SAFE]] : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT: %[[ADD:.*]] = arith.addf %[[ACC]], %[[E]] : f32
// CHECK-NEXT: linalg.yield %[[ADD]] : f32
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[S]], %[[MAX]], %[[SUM]] : tensor<1x2x4x6xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %[[L:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[E2:.*]] = math.exp
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[L]], %[[ZERO]] : f32
// CHECK: %[[DIV:.*]] = arith.divf %[[E2]], %[[L]] : f32
// CHECK: %[[PR:.*]] = arith.select %[[NONE]], %[[ZERO]], %[[DIV]] : f32
// CHECK: linalg.yield %[[PR]] : f32
// CHECK: return %[[P]] : tensor<1x2x4x6xf32>
func.func @softmax(%s: tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32> {
  %p = attn.softmax %s : tensor<1x2x4x6xf32>
  return %p : tensor<1x2x4x6xf32>
}

// -----

// P V with GQA in bf16: V is extended to f32, the f32 result truncated.
// CHECK-LABEL: func.func @apply_gqa_bf16
// CHECK: %[[ACC:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: outs(%{{.*}} : tensor<2x4x8x24xf32>)
// CHECK: ^bb0(%[[P:.*]]: f32, %[[V:.*]]: bf16, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[VE:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK-NEXT: %[[PROD:.*]] = arith.mulf %[[P]], %[[VE]] : f32
// CHECK-NEXT: arith.addf %[[OUT]], %[[PROD]] : f32
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[ACC]] : tensor<2x4x8x24xf32>) outs(%{{.*}} : tensor<2x4x8x24xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[R]] : tensor<2x4x8x24xbf16>
func.func @apply_gqa_bf16(%p: tensor<2x4x8x12xf32>, %v: tensor<2x2x12x24xbf16>) -> tensor<2x4x8x24xbf16> {
  %o = attn.apply %p, %v : tensor<2x4x8x12xf32>, tensor<2x2x12x24xbf16> -> tensor<2x4x8x24xbf16>
  return %o : tensor<2x4x8x24xbf16>
}

// -----

// The fused op, unfused: scores, scale (default 1/sqrt(16)), score_mod,
// mask, max, sum, probabilities, LSE and P V, in this order.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x4x8x16xf16> {bufferization.writable = false}
// CHECK-SAME: %[[K:[^:]*]]: tensor<1x2x8x16xf16> {bufferization.writable = false}
// CHECK-SAME: %[[V:[^:]*]]: tensor<1x2x8x16xf16> {bufferization.writable = false}
// CHECK-SAME: %[[LEN:[^:]*]]: tensor<1xi32> {bufferization.writable = false}
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[W:.*]] = arith.constant 4 : index
// scores
// CHECK: %[[S:.*]] = linalg.generic
// CHECK-SAME: affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<1x4x8x16xf16>, tensor<1x2x8x16xf16>)
// CHECK: arith.extf
// scale
// CHECK: %[[T:.*]] = linalg.generic
// CHECK-SAME: ins(%[[S]] : tensor<1x4x8x8xf32>)
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// score_mod
// CHECK: %[[U:.*]] = linalg.generic
// CHECK-SAME: ins(%[[T]] : tensor<1x4x8x8xf32>)
// CHECK: math.tanh
// mask
// CHECK: %[[M:.*]] = linalg.generic
// CHECK-SAME: ins(%[[U]] : tensor<1x4x8x8xf32>)
// CHECK: arith.cmpi ule
// CHECK: arith.cmpi slt, %{{.*}}, %[[W]] : index
// CHECK: tensor.extract %[[LEN]]
// CHECK: arith.index_cast %{{.*}} : i32 to index
// CHECK: arith.cmpi ne
// CHECK: arith.select
// softmax
// CHECK: %[[MAX:.*]] = linalg.generic
// CHECK-SAME: ins(%[[M]] : tensor<1x4x8x8xf32>)
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: ins(%[[M]], %[[MAX]] :
// CHECK: math.exp
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: ins(%[[M]], %[[MAX]], %[[SUM]] :
// CHECK: arith.divf
// LSE = max + log(sum)
// CHECK: %[[LSE:.*]] = linalg.generic
// CHECK-SAME: indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK-SAME: ins(%[[MAX]], %[[SUM]] : tensor<1x4x8xf32>, tensor<1x4x8xf32>)
// CHECK: ^bb0(%[[MX:.*]]: f32, %[[SM:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[LOG:.*]] = math.log %[[SM]] : f32
// CHECK: %[[LSEV:.*]] = arith.addf %{{.*}}, %[[LOG]] : f32
// CHECK: linalg.yield %[[LSEV]] : f32
// P V and the conversion to f16
// CHECK: %[[OACC:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]], %[[V]] : tensor<1x4x8x8xf32>, tensor<1x2x8x16xf16>)
// CHECK: %[[O:.*]] = linalg.generic
// CHECK-SAME: ins(%[[OACC]] : tensor<1x4x8x16xf32>) outs(%{{.*}} : tensor<1x4x8x16xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: return %[[O]], %[[LSE]] : tensor<1x4x8x16xf16>, tensor<1x4x8xf32>
// CHECK-NOT: attn.
func.func @attention(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>, %len: tensor<1xi32>)
    -> (tensor<1x4x8x16xf16>, tensor<1x4x8xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal window 4 lengths(%len : tensor<1xi32>)
      : tensor<1x4x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x4x8x16xf16>, tensor<1x4x8xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %t = math.tanh %score : f32
    attn.yield %t : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %ne = arith.cmpi ne, %h, %j : index
    attn.yield %ne : i1
  }
  return %o, %lse : tensor<1x4x8x16xf16>, tensor<1x4x8xf32>
}

// -----

// An explicit scale, no mask and no region: no masking generic at all.
// CHECK-LABEL: func.func @attention_plain
// CHECK-DAG: arith.constant 5.000000e-01 : f32
// CHECK-NOT: arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// CHECK-NOT: linalg.index
// CHECK: arith.maximumf
// CHECK: return
func.func @attention_plain(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %q, %q scale 0.5 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}
