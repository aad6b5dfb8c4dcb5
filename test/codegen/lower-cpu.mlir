// RUN: attnc-opt %s -split-input-file -attn-lower-cpu | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attn-lower-cpu=rows=4 | FileCheck %s --check-prefix=ROWS4
// RUN: not attnc-opt %s -split-input-file -attn-lower-cpu=rows=13 2>&1 | FileCheck %s --check-prefix=BADROWS

// The forward: inputs through bufferization.to_buffer, K transposed into
// padded 32-key tiles, the task loop outlined for the thread pool, results
// back through to_tensor; vector exp replaced by a polynomial.
// CHECK-LABEL: func.func private @__attnc_flash_forward
// CHECK-SAME: (%{{.*}}: memref<1x4x40x16xbf16>, %{{.*}}: memref<1x2x2x16x32xf32>, %{{.*}}: memref<1x2x40x32xbf16>, %{{.*}}: memref<1x4x40x32xbf16>, %{{.*}}: memref<1x4x40xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-SAME: attnc.parallel_tasks
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<8x32xf32>
// CHECK: scf.for
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK: vector.reduction <maxnumf>
// CHECK-NOT: math.exp {{.*}} : vector<16xf32>
// CHECK: vector.reduction <add>, {{.*}} fastmath<reassoc>
// CHECK: arith.truncf {{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK-LABEL: func.func @forward
// CHECK: bufferization.to_buffer %{{.*}} read_only
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x2x2x16x32xf32>
// CHECK: call @__attnc_flash_forward({{.*}}, %c0{{.*}}, %c20)
// CHECK: bufferization.to_tensor {{.*}} restrict writable
// CHECK-NOT: attn.attention
// ROWS4: memref.alloca() {alignment = 64 : i64} : memref<4x32xf32>
// BADROWS: attn-lower-cpu: rows must be in [1, 12]
func.func @forward(%q: tensor<1x4x40x16xbf16>, %k: tensor<1x2x40x16xbf16>, %v: tensor<1x2x40x32xbf16>) -> (tensor<1x4x40x32xbf16>, tensor<1x4x40xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal window 9 : tensor<1x4x40x16xbf16>, tensor<1x2x40x16xbf16>, tensor<1x2x40x32xbf16> -> tensor<1x4x40x32xbf16>, tensor<1x4x40xf32>
  return %o, %lse : tensor<1x4x40x32xbf16>, tensor<1x4x40xf32>
}

// -----

// The backward: two outlined passes, dK/dV per key tile then dQ per query
// tile; K and V transposed, Delta per row.
// CHECK-LABEL: func.func private @__attnc_flash_backward_kv
// CHECK-SAME: attnc.parallel_tasks
// CHECK-LABEL: func.func private @__attnc_flash_backward_q
// CHECK-SAME: attnc.parallel_tasks
// CHECK-LABEL: func.func @backward
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x2x1x16x32xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x2x1x32x32xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x2x5xf32>
// CHECK: call @__attnc_flash_backward_kv
// CHECK: call @__attnc_flash_backward_q
// CHECK-NOT: attn.attention_grad
func.func @backward(%q: tensor<2x2x5x16xf32>, %k: tensor<2x2x7x16xf32>, %v: tensor<2x2x7x32xf32>, %o: tensor<2x2x5x32xf32>, %lse: tensor<2x2x5xf32>, %do: tensor<2x2x5x32xf32>) -> (tensor<2x2x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>) {
  %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do : tensor<2x2x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x2x5x32xf32>, tensor<2x2x5xf32>, tensor<2x2x5x32xf32> -> tensor<2x2x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
  return %dq, %dk, %dv : tensor<2x2x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
}

// -----

// Not covered (a score_mod region, Dv not a multiple of 16): left for
// attn-lower-to-linalg.
// CHECK-LABEL: func.func @unfused
// CHECK-COUNT-2: attn.attention
func.func @unfused(%q: tensor<1x1x4x16xf32>, %v: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>) {
  %o, %l = attn.attention %q, %q, %q : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32> -> tensor<1x1x4x16xf32>, tensor<1x1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    attn.yield %s : f32
  }
  %o2, %l2 = attn.attention %q, %q, %v : tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32>
  return %o, %o2 : tensor<1x1x4x16xf32>, tensor<1x1x4x8xf32>
}
