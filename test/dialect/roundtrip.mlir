// RUN: attnc-opt %s | attnc-opt | FileCheck %s
// RUN: attnc-opt %s -mlir-print-op-generic | attnc-opt | FileCheck %s

// Every op of the attn dialect and every optional form of its assembly
// format, printed and parsed again (custom and generic forms).

// CHECK-LABEL: func.func @scores_scale
func.func @scores_scale(%q: tensor<1x8x16x32xf32>, %k: tensor<1x2x24x32xf32>) -> tensor<1x8x16x24xf32> {
  // CHECK: attn.scores %{{.*}}, %{{.*}} : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x16x24xf32>
  %s = attn.scores %q, %k : tensor<1x8x16x32xf32>, tensor<1x2x24x32xf32> -> tensor<1x8x16x24xf32>
  // CHECK: attn.scale %{{.*}} by 1.250000e-01 : tensor<1x8x16x24xf32>
  %t = attn.scale %s by 0.125 : tensor<1x8x16x24xf32>
  return %t : tensor<1x8x16x24xf32>
}

// CHECK-LABEL: func.func @scale_default
// CHECK: %[[S:.*]] = attn.scores
// CHECK-NEXT: %[[T:.*]] = attn.scale %[[S]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: attn.scale %[[T]] by -2.000000e+00 : tensor<1x2x4x4xf32>
func.func @scale_default(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> {
  %s = attn.scores %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x4xf32>
  %t = attn.scale %s : tensor<1x2x4x4xf32>
  %u = attn.scale %t by -2.0 : tensor<1x2x4x4xf32>
  return %u : tensor<1x2x4x4xf32>
}

// CHECK-LABEL: func.func @projection_merge_f32
// CHECK: attn.projection %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64x96xf32> -> tensor<2x3x16x32xf32>
// CHECK: attn.merge %{{.*}}, %{{.*}} : tensor<2x3x16x32xf32>, tensor<96x40xf32> -> tensor<2x16x40xf32>
func.func @projection_merge_f32(%x: tensor<2x16x64xf32>, %w: tensor<64x96xf32>, %wo: tensor<96x40xf32>) -> tensor<2x16x40xf32> {
  %h = attn.projection %x, %w : tensor<2x16x64xf32>, tensor<64x96xf32> -> tensor<2x3x16x32xf32>
  %y = attn.merge %h, %wo : tensor<2x3x16x32xf32>, tensor<96x40xf32> -> tensor<2x16x40xf32>
  return %y : tensor<2x16x40xf32>
}

// CHECK-LABEL: func.func @projection_merge_f16
// CHECK: attn.projection %{{.*}}, %{{.*}} : tensor<1x8x32xf16>, tensor<32x32xf16> -> tensor<1x2x8x16xf16>
// CHECK: attn.merge %{{.*}}, %{{.*}} : tensor<1x2x8x16xf16>, tensor<32x32xf16> -> tensor<1x8x32xf16>
func.func @projection_merge_f16(%x: tensor<1x8x32xf16>, %w: tensor<32x32xf16>) -> tensor<1x8x32xf16> {
  %h = attn.projection %x, %w : tensor<1x8x32xf16>, tensor<32x32xf16> -> tensor<1x2x8x16xf16>
  %y = attn.merge %h, %w : tensor<1x2x8x16xf16>, tensor<32x32xf16> -> tensor<1x8x32xf16>
  return %y : tensor<1x8x32xf16>
}

// CHECK-LABEL: func.func @projection_merge_bf16
// CHECK: attn.projection %{{.*}}, %{{.*}} : tensor<1x8x32xbf16>, tensor<32x32xbf16> -> tensor<1x4x8x8xbf16>
// CHECK: attn.merge %{{.*}}, %{{.*}} : tensor<1x4x8x8xbf16>, tensor<32x32xbf16> -> tensor<1x8x32xbf16>
func.func @projection_merge_bf16(%x: tensor<1x8x32xbf16>, %w: tensor<32x32xbf16>) -> tensor<1x8x32xbf16> {
  %h = attn.projection %x, %w : tensor<1x8x32xbf16>, tensor<32x32xbf16> -> tensor<1x4x8x8xbf16>
  %y = attn.merge %h, %w : tensor<1x4x8x8xbf16>, tensor<32x32xbf16> -> tensor<1x8x32xbf16>
  return %y : tensor<1x8x32xbf16>
}

// MQA (one key/value head) in bf16; scores are f32 whatever the inputs.
// CHECK-LABEL: func.func @mqa_bf16
// CHECK: attn.scores %{{.*}}, %{{.*}} : tensor<2x4x8x16xbf16>, tensor<2x1x12x16xbf16> -> tensor<2x4x8x12xf32>
// CHECK: attn.softmax %{{.*}} : tensor<2x4x8x12xf32>
// CHECK: attn.apply %{{.*}}, %{{.*}} : tensor<2x4x8x12xf32>, tensor<2x1x12x24xbf16> -> tensor<2x4x8x24xbf16>
func.func @mqa_bf16(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x1x12x16xbf16>, %v: tensor<2x1x12x24xbf16>) -> tensor<2x4x8x24xbf16> {
  %s = attn.scores %q, %k : tensor<2x4x8x16xbf16>, tensor<2x1x12x16xbf16> -> tensor<2x4x8x12xf32>
  %p = attn.softmax %s : tensor<2x4x8x12xf32>
  %o = attn.apply %p, %v : tensor<2x4x8x12xf32>, tensor<2x1x12x24xbf16> -> tensor<2x4x8x24xbf16>
  return %o : tensor<2x4x8x24xbf16>
}

// GQA (4 query heads over 2 key/value heads) in f16.
// CHECK-LABEL: func.func @gqa_f16
// CHECK: attn.scores %{{.*}}, %{{.*}} : tensor<1x4x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x4x8x8xf32>
// CHECK: attn.apply %{{.*}}, %{{.*}} : tensor<1x4x8x8xf32>, tensor<1x2x8x16xf16> -> tensor<1x4x8x16xf16>
func.func @gqa_f16(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>) -> tensor<1x4x8x16xf16> {
  %s = attn.scores %q, %k : tensor<1x4x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x4x8x8xf32>
  %p = attn.softmax %s : tensor<1x4x8x8xf32>
  %o = attn.apply %p, %v : tensor<1x4x8x8xf32>, tensor<1x2x8x16xf16> -> tensor<1x4x8x16xf16>
  return %o : tensor<1x4x8x16xf16>
}

// CHECK-LABEL: func.func @score_mod_no_captures
// CHECK: attn.score_mod %{{.*}} : tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: math.tanh
// CHECK: attn.yield %{{.*}} : f32
// CHECK-NEXT: }
func.func @score_mod_no_captures(%s: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
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

// CHECK-LABEL: func.func @score_mod_captures
// CHECK: attn.score_mod %{{.*}} captures(%{{.*}}, %{{.*}} : tensor<2xf32>, tensor<4x4xf16>) : tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<4x4xf16>):
// CHECK: tensor.extract
// CHECK: tensor.extract
// CHECK: attn.yield %{{.*}} : f32
func.func @score_mod_captures(%s: tensor<1x2x4x4xf32>, %slopes: tensor<2xf32>, %bias: tensor<4x4xf16>) -> tensor<1x2x4x4xf32> {
  %r = attn.score_mod %s captures(%slopes, %bias : tensor<2xf32>, tensor<4x4xf16>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>, %bi: tensor<4x4xf16>):
    %m = tensor.extract %sl[%h] : tensor<2xf32>
    %e = tensor.extract %bi[%i, %j] : tensor<4x4xf16>
    %ef = arith.extf %e : f16 to f32
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %t = arith.mulf %m, %df : f32
    %u = arith.addf %score, %t : f32
    %r0 = arith.addf %u, %ef : f32
    attn.yield %r0 : f32
  }
  return %r : tensor<1x2x4x4xf32>
}

// CHECK-LABEL: func.func @mask_named
// CHECK: attn.mask %{{.*}} causal : tensor<2x2x4x6xf32>
// CHECK: attn.mask %{{.*}} window 3 : tensor<2x2x4x6xf32>
// CHECK: attn.mask %{{.*}} lengths(%{{.*}} : tensor<2xi32>) : tensor<2x2x4x6xf32>
// CHECK: attn.mask %{{.*}} lengths(%{{.*}} : tensor<2xi64>) : tensor<2x2x4x6xf32>
// CHECK: attn.mask %{{.*}} causal window 1 lengths(%{{.*}} : tensor<2xi32>) : tensor<2x2x4x6xf32>
func.func @mask_named(%s: tensor<2x2x4x6xf32>, %l32: tensor<2xi32>, %l64: tensor<2xi64>) -> tensor<2x2x4x6xf32> {
  %a = attn.mask %s causal : tensor<2x2x4x6xf32>
  %b = attn.mask %a window 3 : tensor<2x2x4x6xf32>
  %c = attn.mask %b lengths(%l32 : tensor<2xi32>) : tensor<2x2x4x6xf32>
  %d = attn.mask %c lengths(%l64 : tensor<2xi64>) : tensor<2x2x4x6xf32>
  %e = attn.mask %d causal window 1 lengths(%l32 : tensor<2xi32>) : tensor<2x2x4x6xf32>
  return %e : tensor<2x2x4x6xf32>
}

// CHECK-LABEL: func.func @mask_mod_no_captures
// CHECK: attn.mask %{{.*}} : tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: arith.cmpi
// CHECK: attn.yield %{{.*}} : i1
func.func @mask_mod_no_captures(%s: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %r = attn.mask %s : tensor<1x2x4x4xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi ne, %i, %j : index
    attn.yield %c : i1
  }
  return %r : tensor<1x2x4x4xf32>
}

// Document masking: every option at once, with captures.
// CHECK-LABEL: func.func @mask_everything
// CHECK: attn.mask %{{.*}} causal window 256 lengths(%{{.*}} : tensor<2xi64>) captures(%{{.*}} : tensor<16xi32>) : tensor<2x8x16x16xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<16xi32>):
// CHECK: arith.cmpi eq
// CHECK: attn.yield %{{.*}} : i1
func.func @mask_everything(%s: tensor<2x8x16x16xf32>, %len: tensor<2xi64>, %doc: tensor<16xi32>) -> tensor<2x8x16x16xf32> {
  %m = attn.mask %s causal window 256 lengths(%len : tensor<2xi64>) captures(%doc : tensor<16xi32>) : tensor<2x8x16x16xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<16xi32>):
    %di = tensor.extract %ids[%i] : tensor<16xi32>
    %dj = tensor.extract %ids[%j] : tensor<16xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %m : tensor<2x8x16x16xf32>
}

// Extra attributes go through attr-dict.
// CHECK-LABEL: func.func @attr_dict
// CHECK: attn.softmax %{{.*}} {note = "kept"} : tensor<1x1x2x2xf32>
func.func @attr_dict(%s: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %p = attn.softmax %s {note = "kept"} : tensor<1x1x2x2xf32>
  return %p : tensor<1x1x2x2xf32>
}

// CHECK-LABEL: func.func @attention_minimal
// CHECK: %{{.*}}, %{{.*}} = attn.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x5xf32>, tensor<1x2x4xf32>
// CHECK-NEXT: return
func.func @attention_minimal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x5xf32>) -> (tensor<1x2x4x5xf32>, tensor<1x2x4xf32>) {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x5xf32>, tensor<1x2x4xf32>
  return %o, %lse : tensor<1x2x4x5xf32>, tensor<1x2x4xf32>
}

// CHECK-LABEL: func.func @attention_named_options
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal window 2 lengths(%{{.*}} : tensor<1xi64>) : tensor<1x8x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16> -> tensor<1x8x4x8xf16>, tensor<1x8x4xf32>
func.func @attention_named_options(%q: tensor<1x8x4x8xf16>, %k: tensor<1x2x4x8xf16>, %v: tensor<1x2x4x8xf16>, %len: tensor<1xi64>) -> tensor<1x8x4x8xf16> {
  %o, %lse = attn.attention %q, %k, %v scale 0.5 causal window 2 lengths(%len : tensor<1xi64>) : tensor<1x8x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16> -> tensor<1x8x4x8xf16>, tensor<1x8x4xf32>
  return %o : tensor<1x8x4x8xf16>
}

// Every option and both regions, with captures, in bf16 with MQA.
// CHECK-LABEL: func.func @attention_everything
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 2.500000e-01 causal window 8 lengths(%{{.*}} : tensor<2xi32>) score_captures(%{{.*}} : tensor<4xf32>) mask_captures(%{{.*}}, %{{.*}} : tensor<6xi32>, tensor<6xi32>) : tensor<2x4x6x16xbf16>, tensor<2x1x6x16xbf16>, tensor<2x1x6x16xbf16> -> tensor<2x4x6x16xbf16>, tensor<2x4x6xf32> score_mod {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4xf32>):
// CHECK: attn.yield %{{.*}} : f32
// CHECK-NEXT: } mask_mod {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<6xi32>, %{{.*}}: tensor<6xi32>):
// CHECK: attn.yield %{{.*}} : i1
// CHECK-NEXT: }
func.func @attention_everything(%q: tensor<2x4x6x16xbf16>, %k: tensor<2x1x6x16xbf16>, %v: tensor<2x1x6x16xbf16>,
                                %len: tensor<2xi32>, %slopes: tensor<4xf32>, %qdoc: tensor<6xi32>, %kdoc: tensor<6xi32>)
    -> (tensor<2x4x6x16xbf16>, tensor<2x4x6xf32>) {
  %o, %lse = attn.attention %q, %k, %v scale 0.25 causal window 8 lengths(%len : tensor<2xi32>)
      score_captures(%slopes : tensor<4xf32>) mask_captures(%qdoc, %kdoc : tensor<6xi32>, tensor<6xi32>)
      : tensor<2x4x6x16xbf16>, tensor<2x1x6x16xbf16>, tensor<2x1x6x16xbf16> -> tensor<2x4x6x16xbf16>, tensor<2x4x6xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%h] : tensor<4xf32>
    %r = arith.addf %score, %m : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %qd: tensor<6xi32>, %kd: tensor<6xi32>):
    %a = tensor.extract %qd[%i] : tensor<6xi32>
    %c = tensor.extract %kd[%j] : tensor<6xi32>
    %same = arith.cmpi eq, %a, %c : i32
    attn.yield %same : i1
  }
  return %o, %lse : tensor<2x4x6x16xbf16>, tensor<2x4x6xf32>
}

// Only a mask_mod region (no score_mod): the keyword says which region it is.
// CHECK-LABEL: func.func @attention_mask_mod_only
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32> mask_mod {
// CHECK-NOT: score_mod
// CHECK: attn.yield %{{.*}} : i1
func.func @attention_mask_mod_only(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi uge, %i, %j : index
    attn.yield %c : i1
  }
  return %o : tensor<1x2x4x8xf32>
}

// Only a score_mod region without captures.
// CHECK-LABEL: func.func @attention_score_mod_only
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32> score_mod {
// CHECK: attn.yield %{{.*}} : f32
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @attention_score_mod_only(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o, %lse = attn.attention %q, %q, %q causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %score, %two : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x4x8xf32>
}

// Regions may use scf control flow and tensor.dim/tensor.extract of captures.
// CHECK-LABEL: func.func @score_mod_scf
// CHECK: attn.score_mod %{{.*}} captures(%{{.*}} : tensor<4xf32>) : tensor<1x2x4x4xf32> {
// CHECK: tensor.dim
// CHECK: scf.if %{{.*}} -> (f32) {
// CHECK: tensor.extract
// CHECK: scf.yield
// CHECK: } else {
// CHECK: math.exp
// CHECK: scf.yield
// CHECK: attn.yield %{{.*}} : f32
func.func @score_mod_scf(%s: tensor<1x2x4x4xf32>, %bias: tensor<4xf32>) -> tensor<1x2x4x4xf32> {
  %r = attn.score_mod %s captures(%bias : tensor<4xf32>) : tensor<1x2x4x4xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %bi: tensor<4xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %bi, %c0 : tensor<4xf32>
    %in = arith.cmpi ult, %j, %n : index
    %v = scf.if %in -> (f32) {
      %x = tensor.extract %bi[%j] : tensor<4xf32>
      %y = arith.addf %score, %x : f32
      scf.yield %y : f32
    } else {
      %e = math.exp %score : f32
      scf.yield %e : f32
    }
    attn.yield %v : f32
  }
  return %r : tensor<1x2x4x4xf32>
}

// A KV cache: causal and window from the end of each batch's keys.
// CHECK-LABEL: func.func @cache
// CHECK: attn.mask %{{.*}} causal cache lengths(%{{.*}} : tensor<2xi32>) : tensor<2x2x1x16xf32>
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal window 8 cache lengths(%{{.*}} : tensor<2xi32>) : tensor<2x4x1x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16> -> tensor<2x4x1x8xbf16>, tensor<2x4x1xf32>
// CHECK: attn.attention_grad {{.*}} causal cache : tensor<1x2x3x8xf32>
func.func @cache(%s: tensor<2x2x1x16xf32>, %q: tensor<2x4x1x8xbf16>, %k: tensor<2x2x16x8xbf16>, %len: tensor<2xi32>,
                 %qf: tensor<1x2x3x8xf32>, %kf: tensor<1x2x9x8xf32>, %of: tensor<1x2x3x8xf32>, %lf: tensor<1x2x3xf32>)
    -> (tensor<2x2x1x16xf32>, tensor<2x4x1x8xbf16>, tensor<1x2x3x8xf32>) {
  %m = attn.mask %s causal cache lengths(%len : tensor<2xi32>) : tensor<2x2x1x16xf32>
  %o, %lse = attn.attention %q, %k, %k causal window 8 cache lengths(%len : tensor<2xi32>)
      : tensor<2x4x1x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16> -> tensor<2x4x1x8xbf16>, tensor<2x4x1xf32>
  %dq, %dk, %dv = attn.attention_grad %qf, %kf, %kf, %of, %lf, %of causal cache
      : tensor<1x2x3x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3xf32>, tensor<1x2x3x8xf32>
        -> tensor<1x2x3x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>
  return %m, %o, %dq : tensor<2x2x1x16xf32>, tensor<2x4x1x8xbf16>, tensor<1x2x3x8xf32>
}

// A paged KV cache: pools of pages and a block table per sequence.
// CHECK-LABEL: func.func @paged_cache
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal cache lengths(%{{.*}} : tensor<2xi32>) pages(%{{.*}} : tensor<2x3xi32>) : tensor<2x4x1x8xbf16>, tensor<5x2x16x8xbf16>, tensor<5x2x16x8xbf16> -> tensor<2x4x1x8xbf16>, tensor<2x4x1xf32>
func.func @paged_cache(%q: tensor<2x4x1x8xbf16>, %k: tensor<5x2x16x8xbf16>, %len: tensor<2xi32>, %table: tensor<2x3xi32>)
    -> tensor<2x4x1x8xbf16> {
  %o, %lse = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>) pages(%table : tensor<2x3xi32>)
      : tensor<2x4x1x8xbf16>, tensor<5x2x16x8xbf16>, tensor<5x2x16x8xbf16> -> tensor<2x4x1x8xbf16>, tensor<2x4x1xf32>
  return %o : tensor<2x4x1x8xbf16>
}

// Packed variable-length sequences: varlen's cumulative offsets.
// CHECK-LABEL: func.func @packed
// CHECK: attn.mask %{{.*}} causal varlen(%{{.*}} : tensor<4xi32>) : tensor<1x2x9x9xf32>
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} window 4 lengths(%{{.*}} : tensor<1xi32>) varlen(%{{.*}} : tensor<4xi32>) : tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x9x8xf32>, tensor<1x2x9xf32>
// CHECK: attn.attention_grad %{{.*}} causal varlen(%{{.*}} : tensor<4xi64>) :
func.func @packed(%s: tensor<1x2x9x9xf32>, %q: tensor<1x2x9x8xf32>, %len: tensor<1xi32>, %cu: tensor<4xi32>,
                  %lse: tensor<1x2x9xf32>, %cu64: tensor<4xi64>)
    -> (tensor<1x2x9x9xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>) {
  %m = attn.mask %s causal varlen(%cu : tensor<4xi32>) : tensor<1x2x9x9xf32>
  %o, %l = attn.attention %q, %q, %q window 4 lengths(%len : tensor<1xi32>) varlen(%cu : tensor<4xi32>)
      : tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x9x8xf32>, tensor<1x2x9xf32>
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q causal varlen(%cu64 : tensor<4xi64>)
      : tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9xf32>, tensor<1x2x9x8xf32>
        -> tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>
  return %m, %o, %dq : tensor<1x2x9x9xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>
}
