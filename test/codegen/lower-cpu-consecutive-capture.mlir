// RUN: attnc-opt %s -attn-plan-tiles -attn-lower-cpu | FileCheck %s

// A bias read at [h, i, j] (j the key index, the others the same in every
// lane): 16 consecutive elements, read with one masked load where they lie
// in the capture (prefetching the row 256 elements on), else gathered; the
// backward adds their adjoints to its partial row as one vector, else lane
// by lane. A read at [j, i] is not consecutive: gathered.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK: arith.cmpi sle, {{.*}}, %c1184 : index
// CHECK-NEXT: %[[IN:.*]] = arith.andi
// CHECK-NEXT: scf.if %[[IN]] -> (vector<16xf32>)
// CHECK: memref.prefetch
// CHECK: vector.maskedload {{.*}} : memref<1200xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK: } else {
// CHECK: vector.gather
// CHECK-LABEL: func.func private @__attnc_flash_backward_kv
// CHECK: vector.maskedload
// CHECK: scf.if
// CHECK: vector.load {{.*}} : memref<{{[0-9]+}}x1200xf32>, vector<16xf32>
// CHECK: arith.addf
// CHECK: vector.store
// CHECK: } else {
// CHECK: vector.extract
// The partial rows summed in task order into the gradient, 16 elements at
// a time, chunks of elements as tasks on the pool.
// CHECK-LABEL: func.func private @__attnc_sum_partials(%{{.*}}: memref<2x1200xf32>, %{{.*}}: memref<1200xf32>, %{{.*}}: index, %{{.*}}: index) attributes {attn.parallel_tasks}
// CHECK: %[[FIRST:.*]] = vector.load %{{.*}}[%c0, %[[E:.*]]] : memref<2x1200xf32>, vector<16xf32>
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]]) -> (vector<16xf32>)
// CHECK: %[[ROW:.*]] = vector.load %{{.*}}[%{{.*}}, %[[E]]] : memref<2x1200xf32>, vector<16xf32>
// CHECK: arith.addf %[[ACC]], %[[ROW]] : vector<16xf32>
// CHECK: vector.store %[[SUM]], %{{.*}}[%[[E]]] : memref<1200xf32>, vector<16xf32>
// CHECK-LABEL: func.func @bias
func.func @bias(%q: tensor<1x2x20x16xf32>, %k: tensor<1x2x30x16xf32>, %v: tensor<1x2x30x16xf32>, %bias: tensor<2x20x30xf32>, %do: tensor<1x2x20x16xf32>) -> (tensor<1x2x20x16xf32>, tensor<2x20x30xf32>) {
  %o, %lse = attn.attention %q, %k, %v score_captures(%bias : tensor<2x20x30xf32>) : tensor<1x2x20x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x30x16xf32> -> tensor<1x2x20x16xf32>, tensor<1x2x20xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x20x30xf32>):
    %x = tensor.extract %t[%h, %i, %j] : tensor<2x20x30xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  %dq, %dk, %dv, %db = attn.attention_grad %q, %k, %v, %o, %lse, %do score_captures(%bias : tensor<2x20x30xf32>) : tensor<1x2x20x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x20x16xf32>, tensor<1x2x20xf32>, tensor<1x2x20x16xf32> -> tensor<1x2x20x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x30x16xf32>, tensor<2x20x30xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x20x30xf32>):
    %x = tensor.extract %t[%h, %i, %j] : tensor<2x20x30xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %o, %db : tensor<1x2x20x16xf32>, tensor<2x20x30xf32>
}

// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-NOT: vector.maskedload
// CHECK: vector.gather
// CHECK-NOT: vector.maskedload
// CHECK-LABEL: func.func @transposed
func.func @transposed(%q: tensor<1x1x20x16xf32>, %k: tensor<1x1x20x16xf32>, %bias: tensor<20x20xf32>) -> tensor<1x1x20x16xf32> {
  %o, %lse = attn.attention %q, %k, %k score_captures(%bias : tensor<20x20xf32>) : tensor<1x1x20x16xf32>, tensor<1x1x20x16xf32>, tensor<1x1x20x16xf32> -> tensor<1x1x20x16xf32>, tensor<1x1x20xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<20x20xf32>):
    %x = tensor.extract %t[%j, %i] : tensor<20x20xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x20x16xf32>
}
