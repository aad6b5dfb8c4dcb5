// RUN: attnc-opt %s -split-input-file -attn-plan-tiles | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attn-plan-tiles=vector-bits=256 | FileCheck %s --check-prefix=AVX2
// RUN: not attnc-opt %s -split-input-file -attn-plan-tiles=vector-bits=100 2>&1 | FileCheck %s --check-prefix=BADBITS

// Causal written as a region: the named mask says all it says, so the
// region goes; the plan for 512-bit vectors: 17 tiles of 12 rows (11 + 1
// copy of row 199 in the last), one 224-key step (the 200 keys in whole
// 32-key tiles).
// CHECK-LABEL: func.func @causal_region
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 224>} :
// CHECK-NOT: mask_mod
// CHECK: return
// AVX2-LABEL: func.func @causal_region
// AVX2-NEXT: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 3, query_block = 6, key_block = 224>}
// AVX2-LABEL: func.func @window_region
// BADBITS: attn-plan-tiles: vector-bits must be 128, 256 or 512, got 100
func.func @causal_region(%q: tensor<1x2x200x16xf32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi sle, %j, %i : index
    attn.yield %c : i1
  }
  return %o, %lse : tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
}

// -----

// (i - j) <u 16 is 0 <= i - j < 16: a window of 16 (which includes j <= i);
// the steps shrink to the 32-key tiles a window of 16 and 12 rows span.
// CHECK-LABEL: func.func @window_region
// CHECK: attn.attention %{{.*}} causal window 16 {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 32>} :
// CHECK-NOT: mask_mod
func.func @window_region(%q: tensor<1x2x200x16xf32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %w = arith.constant 16 : index
    %d = arith.subi %i, %j : index
    %c = arith.cmpi ult, %d, %w : index
    attn.yield %c : i1
  }
  return %o, %lse : tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
}

// -----

// A document mask and j <= i + 3 * 0 with a window already named (which
// includes j <= i): the region keeps the document test and its captures;
// the plan follows the window.
// CHECK-LABEL: func.func @documents_and_causal
// CHECK: attn.attention {{.*}} window 40 mask_captures(%{{.*}} : tensor<200xi32>) {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 64>}
// CHECK: mask_mod
// CHECK: tensor.extract
func.func @documents_and_causal(%q: tensor<1x2x200x16xf32>, %doc: tensor<200xi32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q window 40 mask_captures(%doc : tensor<200xi32>) : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<200xi32>):
    %di = tensor.extract %ids[%i] : tensor<200xi32>
    %dj = tensor.extract %ids[%j] : tensor<200xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    %three = arith.constant 3 : index
    %zero = arith.constant 0 : index
    %off = arith.muli %three, %zero : index
    %hi = arith.addi %i, %off : index
    %c = arith.cmpi sle, %j, %hi : index
    %both = arith.andi %same, %c : i1
    attn.yield %both : i1
  }
  return %o, %lse : tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
}

// -----

// j < i: causal is implied but not all of it (the diagonal is masked
// too), so the region stays. i - j < 5 alone bounds only one side: no
// named mask.
// CHECK-LABEL: func.func @strict
// CHECK: attn.attention {{.*}} causal {attn.tile_plan
// CHECK: arith.cmpi slt
// CHECK-LABEL: func.func @one_sided
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} {attn.tile_plan
// CHECK: arith.cmpi slt
func.func @strict(%q: tensor<1x2x200x16xf32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi slt, %j, %i : index
    attn.yield %c : i1
  }
  return %o, %lse : tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
}
func.func @one_sided(%q: tensor<1x2x200x16xf32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %five = arith.constant 5 : index
    %d = arith.subi %i, %j : index
    %c = arith.cmpi slt, %d, %five : index
    attn.yield %c : i1
  }
  return %o, %lse : tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
}

// -----

// A plan already there is kept; the backward op is analysed and planned
// the same way, its key blocks at most 128 keys.
// CHECK-LABEL: func.func @planned
// CHECK: attn.tile_plan = #attn.cpu_plan<rows = 4, query_block = 4, key_block = 32>
// CHECK: attn.attention_grad {{.*}} causal {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 128>}
func.func @planned(%q: tensor<1x2x200x16xf32>, %lse: tensor<1x2x200xf32>) -> (tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>) {
  %o, %l = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 4, query_block = 4, key_block = 32>} : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200xf32>
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi uge, %i, %j : index
    attn.yield %c : i1
  }
  return %o, %dq : tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32>
}

// -----

// Few query rows: tiles as even as 12 rows allow (13 rows: 2 tiles of 7,
// not 12 and 1 + 11 copies of the last row), all of a head's in one task
// (8 tiles or fewer: the kernel then packs K and V a block at a time);
// one row: a 1-row tile.
// CHECK-LABEL: func.func @short_queries
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 7, query_block = 14, key_block = 32>}
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 1, query_block = 1, key_block = 64>}
// AVX2-LABEL: func.func @short_queries
// AVX2: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 3, query_block = 15, key_block = 32>}
// AVX2: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 1, query_block = 1, key_block = 64>}
func.func @short_queries(%q: tensor<1x2x13x16xf32>, %q1: tensor<1x2x1x16xf32>, %k: tensor<1x2x40x16xf32>) -> (tensor<1x2x13x16xf32>, tensor<1x2x1x16xf32>) {
  %o, %l = attn.attention %q, %q, %q : tensor<1x2x13x16xf32>, tensor<1x2x13x16xf32>, tensor<1x2x13x16xf32> -> tensor<1x2x13x16xf32>, tensor<1x2x13xf32>
  %o1, %l1 = attn.attention %q1, %k, %k : tensor<1x2x1x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x1x16xf32>, tensor<1x2x1xf32>
  return %o, %o1 : tensor<1x2x13x16xf32>, tensor<1x2x1x16xf32>
}

// -----

// Backward key blocks: 128 keys, halved while keys * (D + Dv) > 2^15
// (D = Dv = 256: 64 keys); a window of 40 keys: the 40 + 11 a tile sees.
// CHECK-LABEL: func.func @backward_key_blocks
// CHECK: attn.attention_grad {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 64>}
// CHECK: attn.attention_grad {{.*}} window 40 {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 64>}
func.func @backward_key_blocks(%q: tensor<1x1x300x256xf32>, %lse: tensor<1x1x300xf32>, %q2: tensor<1x1x300x16xf32>) -> (tensor<1x1x300x256xf32>, tensor<1x1x300x16xf32>) {
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x1x300x256xf32>, tensor<1x1x300x256xf32>, tensor<1x1x300x256xf32>, tensor<1x1x300x256xf32>, tensor<1x1x300xf32>, tensor<1x1x300x256xf32> -> tensor<1x1x300x256xf32>, tensor<1x1x300x256xf32>, tensor<1x1x300x256xf32>
  %dq2, %dk2, %dv2 = attn.attention_grad %q2, %q2, %q2, %q2, %lse, %q2 window 40 : tensor<1x1x300x16xf32>, tensor<1x1x300x16xf32>, tensor<1x1x300x16xf32>, tensor<1x1x300x16xf32>, tensor<1x1x300xf32>, tensor<1x1x300x16xf32> -> tensor<1x1x300x16xf32>, tensor<1x1x300x16xf32>, tensor<1x1x300x16xf32>
  return %dq, %dq2 : tensor<1x1x300x256xf32>, tensor<1x1x300x16xf32>
}

// -----

// Split-KV: one (batch, KV head) pair decoding over 5000 keys takes 4 key
// ranges (one per 1024 keys a row sees, up to 16 tasks); 8 pairs take
// none; a 1500-key window leaves one range. (A GQA decoding step's query
// tile is its KV head's 8 query heads: 8 rows.)
// CHECK-LABEL: func.func @split_keys
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 8, query_block = 8, key_block = 256, splits = 4>
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 8, query_block = 8, key_block = 256>}
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 8, query_block = 8, key_block = 256>}
func.func @split_keys(%q: tensor<1x8x1x64xf32>, %k: tensor<1x1x5000x64xf32>,
                      %q8: tensor<1x64x1x64xf32>, %k8: tensor<1x8x5000x64xf32>)
    -> (tensor<1x8x1x64xf32>, tensor<1x64x1x64xf32>, tensor<1x8x1x64xf32>) {
  %o, %l = attn.attention %q, %k, %k : tensor<1x8x1x64xf32>, tensor<1x1x5000x64xf32>, tensor<1x1x5000x64xf32> -> tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
  %o8, %l8 = attn.attention %q8, %k8, %k8 : tensor<1x64x1x64xf32>, tensor<1x8x5000x64xf32>, tensor<1x8x5000x64xf32> -> tensor<1x64x1x64xf32>, tensor<1x64x1xf32>
  %ow, %lw = attn.attention %q, %k, %k window 1500 : tensor<1x8x1x64xf32>, tensor<1x1x5000x64xf32>, tensor<1x1x5000x64xf32> -> tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
  return %o, %o8, %ow : tensor<1x8x1x64xf32>, tensor<1x64x1x64xf32>, tensor<1x8x1x64xf32>
}

// -----

// A cache's region compares rows, its named masks positions: j <= i in
// its mask_mod is not its causal mask, and stays a region.
// CHECK-LABEL: func.func @cache_region
// CHECK: attn.attention {{.*}} window 64 cache {attn.tile_plan
// CHECK: mask_mod
func.func @cache_region(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x200x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) {
  %o, %lse = attn.attention %q, %k, %k window 64 cache : tensor<1x2x8x16xf32>, tensor<1x2x200x16xf32>, tensor<1x2x200x16xf32> -> tensor<1x2x8x16xf32>, tensor<1x2x8xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c = arith.cmpi sle, %j, %i : index
    attn.yield %c : i1
  }
  return %o, %lse : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
}

