// RUN: attnc-opt %s -split-input-file -attn-fuse | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attn-fuse -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// attn-fuse: scores -> scale* -> score_mod? -> mask* -> softmax -> apply
// with single-use links becomes one attn.attention.

// The whole chain: the scales multiply (1/sqrt(32) * 2), the masks combine
// (causal, the narrowest window, the lengths), the region and its captures
// move over, and the op carries every fused op's location.
// CHECK-LABEL: func.func @full_chain(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x8x80x32xf32>, %[[K:[^:]*]]: tensor<2x2x80x32xf32>, %[[V:[^:]*]]: tensor<2x2x80x16xf32>, %[[SL:[^:]*]]: tensor<8xf32>, %[[LEN:[^:]*]]: tensor<2xi32>)
// CHECK-NEXT: %[[O:.*]], %{{.*}} = attn.attention %[[Q]], %[[K]], %[[V]] scale 0.35355339059327373 causal window 16 lengths(%[[LEN]] : tensor<2xi32>) score_captures(%[[SL]] : tensor<8xf32>) : tensor<2x8x80x32xf32>, tensor<2x2x80x32xf32>, tensor<2x2x80x16xf32> -> tensor<2x8x80x16xf32>, tensor<2x8x80xf32> score_mod {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[C:.*]]: tensor<8xf32>):
// CHECK-NEXT: tensor.extract %[[C]][%[[H]]] : tensor<8xf32>
// CHECK: attn.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]] : tensor<2x8x80x16xf32>
// LOC: attn.yield
// LOC-NEXT: } loc(#[[LOC:loc[0-9]*]])
// LOC: #[[LOC]] = loc(fused[
func.func @full_chain(%q: tensor<2x8x80x32xf32>, %k: tensor<2x2x80x32xf32>,
                      %v: tensor<2x2x80x16xf32>, %slopes: tensor<8xf32>,
                      %len: tensor<2xi32>) -> tensor<2x8x80x16xf32> {
  %s = attn.scores %q, %k : tensor<2x8x80x32xf32>, tensor<2x2x80x32xf32> -> tensor<2x8x80x80xf32>
  %t = attn.scale %s : tensor<2x8x80x80xf32>
  %t2 = attn.scale %t by 2.0 : tensor<2x8x80x80xf32>
  %b = attn.score_mod %t2 captures(%slopes : tensor<8xf32>) : tensor<2x8x80x80xf32> {
  ^bb0(%score: f32, %bi: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
    %slope = tensor.extract %sl[%h] : tensor<8xf32>
    %r = arith.addf %score, %slope : f32
    attn.yield %r : f32
  }
  %m1 = attn.mask %b causal window 64 : tensor<2x8x80x80xf32>
  %m2 = attn.mask %m1 window 16 lengths(%len : tensor<2xi32>) : tensor<2x8x80x80xf32>
  %p = attn.softmax %m2 : tensor<2x8x80x80xf32>
  %o = attn.apply %p, %v : tensor<2x8x80x80xf32>, tensor<2x2x80x16xf32> -> tensor<2x8x80x16xf32>
  return %o : tensor<2x8x80x16xf32>
}

// -----

// No scale op: the fused op's scale is 1. A mask_mod region moves to
// mask_mod with its captures; bf16 stays bf16.
// CHECK-LABEL: func.func @unscaled_mask_mod(
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 mask_captures(%{{.*}} : tensor<16xi32>) : tensor<1x1x16x8xbf16>, tensor<1x1x16x8xbf16>, tensor<1x1x16x8xbf16> -> tensor<1x1x16x8xbf16>, tensor<1x1x16xf32> mask_mod {
// CHECK: arith.cmpi eq
// CHECK-NOT: attn.softmax
func.func @unscaled_mask_mod(%q: tensor<1x1x16x8xbf16>, %ids: tensor<16xi32>) -> tensor<1x1x16x8xbf16> {
  %s = attn.scores %q, %q : tensor<1x1x16x8xbf16>, tensor<1x1x16x8xbf16> -> tensor<1x1x16x16xf32>
  %m = attn.mask %s captures(%ids : tensor<16xi32>) : tensor<1x1x16x16xf32> {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<16xi32>):
    %x = tensor.extract %d[%i] : tensor<16xi32>
    %y = tensor.extract %d[%j] : tensor<16xi32>
    %e = arith.cmpi eq, %x, %y : i32
    attn.yield %e : i1
  }
  %p = attn.softmax %m : tensor<1x1x16x16xf32>
  %o = attn.apply %p, %q : tensor<1x1x16x16xf32>, tensor<1x1x16x8xbf16> -> tensor<1x1x16x8xbf16>
  return %o : tensor<1x1x16x8xbf16>
}

// -----

// Left alone: the probabilities are also returned.
// CHECK-LABEL: func.func @probs_returned(
// CHECK-NOT: attn.attention
// CHECK: attn.softmax
func.func @probs_returned(%q: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) {
  %s = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %p = attn.softmax %s : tensor<1x1x4x4xf32>
  %o = attn.apply %p, %q : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o, %p : tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>
}

// -----

// Left alone: a score_mod after a mask (attn.attention applies score_mod
// first), a second lengths tensor, and mixed Q/V element types.
// CHECK-LABEL: func.func @not_fusable(
// CHECK-NOT: attn.attention
// CHECK: return
func.func @not_fusable(%q: tensor<1x1x4x8xf32>, %vh: tensor<1x1x4x8xf16>,
                       %l1: tensor<1xi32>, %l2: tensor<1xi32>)
    -> (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf16>) {
  %s = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %m = attn.mask %s causal : tensor<1x1x4x4xf32>
  %b = attn.score_mod %m : tensor<1x1x4x4xf32> {
  ^bb0(%x: f32, %bi: index, %h: index, %i: index, %j: index):
    %y = arith.mulf %x, %x : f32
    attn.yield %y : f32
  }
  %p = attn.softmax %b : tensor<1x1x4x4xf32>
  %o = attn.apply %p, %q : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>

  %s2 = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %a = attn.mask %s2 lengths(%l1 : tensor<1xi32>) : tensor<1x1x4x4xf32>
  %c = attn.mask %a lengths(%l2 : tensor<1xi32>) : tensor<1x1x4x4xf32>
  %p2 = attn.softmax %c : tensor<1x1x4x4xf32>
  %o2 = attn.apply %p2, %q : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>

  %s3 = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %p3 = attn.softmax %s3 : tensor<1x1x4x4xf32>
  %o3 = attn.apply %p3, %vh : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf16> -> tensor<1x1x4x8xf16>
  return %o, %o2, %o3 : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf16>
}

// -----

// A cache's masks fuse with `cache`; causal from the start and a window
// from the end do not mix.
// CHECK-LABEL: func.func @cache(
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} scale {{.*}} causal window 4 cache lengths(%{{.*}} : tensor<1xi32>)
// CHECK-LABEL: func.func @cache_mixed(
// CHECK-NOT: attn.attention
// CHECK: return
func.func @cache(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x6x8xf32>, %len: tensor<1xi32>) -> tensor<1x1x2x8xf32> {
  %s = attn.scores %q, %k : tensor<1x1x2x8xf32>, tensor<1x1x6x8xf32> -> tensor<1x1x2x6xf32>
  %t = attn.scale %s : tensor<1x1x2x6xf32>
  %m = attn.mask %t causal cache lengths(%len : tensor<1xi32>) : tensor<1x1x2x6xf32>
  %w = attn.mask %m window 4 cache : tensor<1x1x2x6xf32>
  %p = attn.softmax %w : tensor<1x1x2x6xf32>
  %o = attn.apply %p, %k : tensor<1x1x2x6xf32>, tensor<1x1x6x8xf32> -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}
func.func @cache_mixed(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x6x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = attn.scores %q, %k : tensor<1x1x2x8xf32>, tensor<1x1x6x8xf32> -> tensor<1x1x2x6xf32>
  %m = attn.mask %s causal : tensor<1x1x2x6xf32>
  %w = attn.mask %m window 4 cache : tensor<1x1x2x6xf32>
  %p = attn.softmax %w : tensor<1x1x2x6xf32>
  %o = attn.apply %p, %k : tensor<1x1x2x6xf32>, tensor<1x1x6x8xf32> -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// A chain with varlen fuses into one attn.attention with the offsets.
// CHECK-LABEL: func.func @packed_chain
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal varlen(%{{.*}} : tensor<3xi32>)
// CHECK-NOT: attn.softmax
func.func @packed_chain(%q: tensor<1x2x9x8xf32>, %cu: tensor<3xi32>) -> tensor<1x2x9x8xf32> {
  %s = attn.scores %q, %q : tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x9x9xf32>
  %m = attn.mask %s causal varlen(%cu : tensor<3xi32>) : tensor<1x2x9x9xf32>
  %p = attn.softmax %m : tensor<1x2x9x9xf32>
  %o = attn.apply %p, %q : tensor<1x2x9x9xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x9x8xf32>
  return %o : tensor<1x2x9x8xf32>
}
