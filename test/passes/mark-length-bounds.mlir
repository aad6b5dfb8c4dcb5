// RUN: attnc-opt %s -split-input-file -attn-mark-length-bounds | FileCheck %s

// attn-mark-length-bounds: the lengths of a cache carry its capacity (the
// least of two caches'), and so does an argument passed on to one (@f
// calling @f_fwd); other lengths stay unmarked.
// CHECK-LABEL: func.func @step_fwd(
// CHECK-SAME: %{{.*}}: tensor<2xi32> {attn.max_value = 24 : i64}, %{{.*}}: tensor<2xi32>)
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %{{.*}}: tensor<2xi32> {attn.max_value = 24 : i64}, %{{.*}}: tensor<2xi32>)
func.func @step_fwd(%q: tensor<2x2x1x8xf32>, %k: tensor<2x1x40x8xf32>, %k2: tensor<2x1x24x8xf32>,
                    %len: tensor<2xi32>, %pad: tensor<2xi32>) -> (tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>) {
  %o, %l = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>)
      : tensor<2x2x1x8xf32>, tensor<2x1x40x8xf32>, tensor<2x1x40x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  %o2, %l2 = attn.attention %q, %k2, %k2 window 4 cache lengths(%len : tensor<2xi32>)
      : tensor<2x2x1x8xf32>, tensor<2x1x24x8xf32>, tensor<2x1x24x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  %o3, %l3 = attn.attention %q, %k, %k causal lengths(%pad : tensor<2xi32>)
      : tensor<2x2x1x8xf32>, tensor<2x1x40x8xf32>, tensor<2x1x40x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return %o, %o2, %o3 : tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>
}
func.func @step(%q: tensor<2x2x1x8xf32>, %k: tensor<2x1x40x8xf32>, %k2: tensor<2x1x24x8xf32>,
                %len: tensor<2xi32>, %pad: tensor<2xi32>) -> tensor<2x2x1x8xf32> {
  %o:3 = func.call @step_fwd(%q, %k, %k2, %len, %pad) : (tensor<2x2x1x8xf32>, tensor<2x1x40x8xf32>, tensor<2x1x24x8xf32>, tensor<2xi32>, tensor<2xi32>) -> (tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>, tensor<2x2x1x8xf32>)
  return %o#0 : tensor<2x2x1x8xf32>
}


// -----

// A paged cache: its lengths carry its capacity (3 pages of 16 tokens),
// its block table the last page of the pool (5 pages).
// CHECK-LABEL: func.func @paged(
// CHECK-SAME: %{{.*}}: tensor<2xi32> {attn.max_value = 48 : i64}, %{{.*}}: tensor<2x3xi32> {attn.max_value = 4 : i64})
func.func @paged(%q: tensor<2x2x1x8xf32>, %k: tensor<5x1x16x8xf32>, %len: tensor<2xi32>, %t: tensor<2x3xi32>) -> tensor<2x2x1x8xf32> {
  %o, %l = attn.attention %q, %k, %k causal cache lengths(%len : tensor<2xi32>) pages(%t : tensor<2x3xi32>)
      : tensor<2x2x1x8xf32>, tensor<5x1x16x8xf32>, tensor<5x1x16x8xf32> -> tensor<2x2x1x8xf32>, tensor<2x2x1xf32>
  return %o : tensor<2x2x1x8xf32>
}

// -----

// varlen's offsets: sorted (attn.nondecreasing) and up to Skv, also where
// @f passes them on to @f_fwd.
// CHECK-LABEL: func.func @packed_fwd(
// CHECK-SAME: %{{.*}}: tensor<3xi32> {attn.max_value = 9 : i64, attn.nondecreasing})
// CHECK-LABEL: func.func @packed(
// CHECK-SAME: %{{.*}}: tensor<3xi32> {attn.max_value = 9 : i64, attn.nondecreasing})
func.func @packed_fwd(%q: tensor<1x2x9x8xf32>, %cu: tensor<3xi32>) -> tensor<1x2x9x8xf32> {
  %o, %l = attn.attention %q, %q, %q varlen(%cu : tensor<3xi32>)
      : tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32>, tensor<1x2x9x8xf32> -> tensor<1x2x9x8xf32>, tensor<1x2x9xf32>
  return %o : tensor<1x2x9x8xf32>
}
func.func @packed(%q: tensor<1x2x9x8xf32>, %cu: tensor<3xi32>) -> tensor<1x2x9x8xf32> {
  %o = func.call @packed_fwd(%q, %cu) : (tensor<1x2x9x8xf32>, tensor<3xi32>) -> tensor<1x2x9x8xf32>
  return %o : tensor<1x2x9x8xf32>
}
