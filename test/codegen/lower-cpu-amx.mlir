// RUN: attnc-opt %s -attn-plan-tiles=amx=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles=amx=true | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles | FileCheck %s --check-prefix=NOAMX

// A bf16 forward on a target with AMX (64 query rows: 2 tiles of 32, one
// task per head): 32-row tiles (two AMX tiles of rows, which share each K
// and V tile) and 32-key steps in the plan; the task reads K and V where
// they are and pairs each key block (VNNI) into its scratch, no per-call
// copy; the first tile's Q K^T as 2 x 2 16 x 16 f32 tiles of D / 32
// tdpbf16ps each; then the tile's softmax rows, whose loop computes the
// next tile's Q K^T (a C tile of each tile of rows every 16 rows, into the
// second scores buffer) between them; P V on tiles of 16 columns; the
// module marked for the entry points' AMX request.
// CHECK: module attributes {attn.uses_amx}
// CHECK-NOT: @__attnc_flash_pairs
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x2x64x64xbf16>, %{{.*}}: memref<1x1x20x64xbf16>, %{{.*}}: memref<1x1x20x32xbf16>,
// CHECK: %[[S0:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x32x64xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x2x32x32xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x1x16x64xbf16>
// CHECK: %[[S1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: amx.tile_load {{.*}} : memref<2x32x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load {{.*}} : memref<2x32x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load {{.*}} : memref<1x1x2x32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-2: amx.tile_mulf
// CHECK: amx.tile_load {{.*}} : memref<1x1x2x32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-2: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store
// The softmax in base 2 (no score_mod): t = S scale log2(e) - m log2(e) in
// one FMA of the unscaled products, 2^t from round(t) and a degree-4
// polynomial, scaled by vscalefps.
// CHECK: arith.select %{{.*}}, %[[S0]], %[[S1]] : memref<32x32xf32>
// A row's max moves only past the old one plus 8 ln 2 (lazyMax), and only
// then is alpha an exp.
// CHECK: %[[OLD:.*]] = memref.load
// CHECK-NEXT: %[[SLACK:.*]] = arith.constant 5.54517746 : f32
// CHECK-NEXT: %[[BOUND:.*]] = arith.addf %[[OLD]], %[[SLACK]] : f32
// CHECK-NEXT: %[[MOVED:.*]] = arith.cmpf ogt, %{{.*}}, %[[BOUND]] : f32
// CHECK: scf.if %[[MOVED]] -> (f32) {
// CHECK: %[[T:.*]] = vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[K:.*]] = math.roundeven %[[T]] : vector<16xf32>
// CHECK: arith.subf %[[T]], %[[K]] : vector<16xf32>
// CHECK-COUNT-4: vector.fma
// CHECK: x86vector.avx512.mask.scalef %{{.*}}, %[[K]],
// Between the rows, a pass of the next tile's products: one 16-key tile
// for each tile of rows.
// CHECK: scf.if
// CHECK-COUNT-2: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NOT: amx.tile_zero
// CHECK-COUNT-2: amx.tile_store {{.*}} : memref<32x32xf32>, !amx.tile<16x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// Then P V from the two tiles of P's rows: into O's own tiles where every
// alpha of the step is 1, else into a buffer that the rescale adds.
// CHECK: vector.reduction <and>
// CHECK: vector.reduction <and>
// CHECK: scf.if
// CHECK-COUNT-4: amx.tile_load {{.*}} : memref<32x32xf32, strided<[32, 1], offset: ?>> into !amx.tile<16x16xf32>
// CHECK: } else {
// CHECK: amx.tile_load {{.*}} : memref<32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load {{.*}} : memref<32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load {{.*}} : memref<1x1x1x16x64xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-2: amx.tile_mulf
// CHECK: amx.tile_store
// CHECK-LABEL: func.func @forward
// CHECK-NOT: attn.attention
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 64, key_block = 32, amx = true>
// NOAMX: attn.tile_plan = #attn.cpu_plan<rows = 11, query_block = 66, key_block = 32>
func.func @forward(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x32xbf16>) -> (tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x64x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
  return %o, %lse : tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
}

// With more keys, steps of 256: 16 score tiles for each of the two tiles of
// rows, 2 at a time (the most that fit AMX's eight tile registers with two
// A tiles and a B tile; zeroed, multiplied over D / 32 and stored per
// group), then P V over the eight 32-key tiles per two tiles of 16
// columns. 10 query tiles a head, more than a task takes: K and V copied
// into bf16 pairs once per call, per (batch, KV head), for the tasks to
// share; a task of one query tile has no next tile to compute ahead.
// PLAN-LABEL: func.func @long
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 32, key_block = 256, amx = true>
// CHECK-LABEL: func.func private @__attnc_flash_pairs
// CHECK-SAME: memref<1x2x300x64xbf16>, %{{.*}}: memref<1x2x300x64xbf16>, %{{.*}}: memref<1x2x32x32x32xbf16>, %{{.*}}: memref<1x2x16x16x128xbf16>
// CHECK-LABEL: func.func private @__attnc_flash_forward_0
// CHECK-COUNT-8: amx.tile_store %{{.*}} : memref<32x256xf32>, !amx.tile<16x16xf32>
// CHECK-COUNT-24: amx.tile_store %{{.*}} : memref<32x256xf32>, !amx.tile<16x16xf32>
// CHECK-NOT: amx.tile_store %{{.*}} : memref<32x256xf32>
// CHECK: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-8: amx.tile_load {{.*}} : memref<32x256xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_store
func.func @long(%q: tensor<1x2x300x64xbf16>) -> (tensor<1x2x300x64xbf16>, tensor<1x2x300xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16>, tensor<1x2x300x64xbf16> -> tensor<1x2x300x64xbf16>, tensor<1x2x300xf32>
  return %o, %lse : tensor<1x2x300x64xbf16>, tensor<1x2x300xf32>
}

// A bf16 step of 16 query rows (one AMX tile) of MQA over 4096 keys: AMX,
// its keys split across tasks (split-KV), each pairing its key blocks.
// PLAN-LABEL: func.func @step
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 256, amx = true, splits = 4>
// NOAMX-LABEL: func.func @step
// NOAMX: attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 16, key_block = 256, splits = 4>
// CHECK-LABEL: func.func private @__attnc_flash_forward_1
// CHECK-SAME: memref<1x1x4096x128xbf16>
// CHECK: memref<1x1x16x64x32xbf16>
// CHECK: amx.tile_mulf
// CHECK-LABEL: func.func @step
// CHECK: @__attnc_flash_merge_splits
func.func @step(%q: tensor<1x4x16x128xbf16>, %k: tensor<1x1x4096x128xbf16>, %v: tensor<1x1x4096x128xbf16>) -> (tensor<1x4x16x128xbf16>, tensor<1x4x16xf32>) {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x4x16x128xbf16>, tensor<1x1x4096x128xbf16>, tensor<1x1x4096x128xbf16> -> tensor<1x4x16x128xbf16>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x128xbf16>, tensor<1x4x16xf32>
}
