// RUN: attnc-opt %s | FileCheck %s
// RUN: attnc-opt %s | attnc-opt | FileCheck %s

// The typed tile plans print only what differs from their defaults (amx =
// false, splits = 1; stages = 1, shared_kv = true) and parse back.

// CHECK-LABEL: func.func @plans
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 64, key_block = 256, amx = true>}
// CHECK: attn.attention_grad {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 128, splits = 3>}
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 32>}
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.gpu_plan<query_block = 64, key_block = 32, workgroup_size = 128, subgroups = 4, stages = 2, shared_kv = false>}
// CHECK: attn.attention {{.*}} {attn.tile_plan = #attn.gpu_plan<query_block = 128, key_block = 64, workgroup_size = 256, subgroups = 8>}
// CHECK: attn.projection {{.*}} {attn.tile_plan = #attn.cpu_plan<rows = 8>}
func.func @plans(%q: tensor<1x2x40x32xbf16>, %f: tensor<1x2x40x32xf32>, %lse: tensor<1x2x40xf32>,
                 %x: tensor<1x8x32xf32>, %w: tensor<32x32xf32>) {
  %o, %l = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 64, key_block = 256, amx = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>
  %dq, %dk, %dv = attn.attention_grad %f, %f, %f, %f, %lse, %f {attn.tile_plan = #attn.cpu_plan<rows = 12, query_block = 12, key_block = 128, amx = false, splits = 3>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>
  %o2, %l2 = attn.attention %f, %f, %f {attn.tile_plan = #attn.cpu_plan<key_block = 32, rows = 8, query_block = 8>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
  %o3, %l3 = attn.attention %f, %f, %f {attn.tile_plan = #attn.gpu_plan<query_block = 64, key_block = 32, workgroup_size = 128, subgroups = 4, stages = 2, shared_kv = false>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
  %o4, %l4 = attn.attention %f, %f, %f {attn.tile_plan = #attn.gpu_plan<query_block = 128, key_block = 64, workgroup_size = 256, subgroups = 8, stages = 1>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
  %y = attn.projection %x, %w {attn.tile_plan = #attn.cpu_plan<rows = 8>} : tensor<1x8x32xf32>, tensor<32x32xf32> -> tensor<1x2x8x16xf32>
  return
}
