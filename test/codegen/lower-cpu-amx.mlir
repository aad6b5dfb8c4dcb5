// RUN: attnc-opt %s -attn-plan-tiles=amx=true -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -attn-plan-tiles=amx=true | FileCheck %s --check-prefix=PLAN
// RUN: attnc-opt %s -attn-plan-tiles | FileCheck %s --check-prefix=NOAMX

// A bf16 forward on a target with AMX (64 query rows: 4 tiles of 16, one
// task per head): 16-row tiles and 32-key steps in the plan; the task
// reads K and V where they are and pairs each key block (VNNI) into its
// scratch, no per-call copy; Q K^T as two 16 x 16 f32 tiles of D / 32
// tdpbf16ps each; P V on tiles of 16 columns; the module marked for the
// entry points' AMX request.
// CHECK: module attributes {attn.uses_amx}
// CHECK-NOT: @__attnc_flash_pairs
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x2x64x64xbf16>, %{{.*}}: memref<1x1x20x64xbf16>, %{{.*}}: memref<1x1x20x32xbf16>,
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<4x16x64xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x2x32x32xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x1x1x16x64xbf16>
// CHECK: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: amx.tile_load {{.*}} : memref<4x16x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load {{.*}} : memref<1x1x2x32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_mulf
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store
// The softmax in base 2 (no score_mod): t = S scale log2(e) - m log2(e) in
// one FMA of the unscaled products, 2^t from round(t) and a degree-4
// polynomial, scaled by vscalefps.
// CHECK: %[[T:.*]] = vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[K:.*]] = math.roundeven %[[T]] : vector<16xf32>
// CHECK: arith.subf %[[T]], %[[K]] : vector<16xf32>
// CHECK-COUNT-4: vector.fma
// CHECK: x86vector.avx512.mask.scalef %{{.*}}, %[[K]],
// CHECK: amx.tile_load {{.*}} : memref<1x1x1x16x64xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store
// CHECK-LABEL: func.func @forward
// CHECK-NOT: attn.attention
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 64, key_block = 32, amx = true>
// NOAMX: attn.tile_plan = #attn.cpu_plan<rows = 11, query_block = 66, key_block = 32>
func.func @forward(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x20x64xbf16>, %v: tensor<1x1x20x32xbf16>) -> (tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x64x64xbf16>, tensor<1x1x20x64xbf16>, tensor<1x1x20x32xbf16> -> tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
  return %o, %lse : tensor<1x2x64x32xbf16>, tensor<1x2x64xf32>
}

// With more keys, steps of all 200 (224 in whole 32-key tiles): 14 score
// tiles, 4 at a time (the most that fit AMX's eight tile registers with A
// and B; zeroed, multiplied over D / 32 and stored per group of 4), then
// P V over the seven 32-key tiles per tile of 16 columns, P's tiles loaded
// for each (7 do not fit beside A and C). 13 query tiles a head, more than
// a task takes: K and V copied into bf16 pairs once per call, per (batch,
// KV head), for the tasks to share.
// PLAN-LABEL: func.func @long
// PLAN: attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 224, amx = true>
// CHECK-LABEL: func.func private @__attnc_flash_pairs
// CHECK-SAME: memref<1x2x200x64xbf16>, %{{.*}}: memref<1x2x200x64xbf16>, %{{.*}}: memref<1x2x14x32x32xbf16>, %{{.*}}: memref<1x2x7x16x128xbf16>
// CHECK-LABEL: func.func private @__attnc_flash_forward_0
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_store %{{.*}} : memref<16x224xf32>, !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_store %{{.*}} : memref<16x224xf32>, !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_store %{{.*}} : memref<16x224xf32>, !amx.tile<16x16xf32>
// CHECK-COUNT-2: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-2: amx.tile_store %{{.*}} : memref<16x224xf32>, !amx.tile<16x16xf32>
// CHECK-NOT: amx.tile_store %{{.*}} : memref<16x224xf32>
// CHECK: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-7: amx.tile_load {{.*}} : memref<16x224xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_store
func.func @long(%q: tensor<1x2x200x64xbf16>) -> (tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>) {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16> -> tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>
  return %o, %lse : tensor<1x2x200x64xbf16>, tensor<1x2x200xf32>
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
