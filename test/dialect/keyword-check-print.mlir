// RUN: attnc-opt %s | FileCheck %s --strict-whitespace
// RUN: attnc-opt %s | attnc-opt | FileCheck %s --strict-whitespace

// The keyword checks of attn.attention and attn.mask (custom<...KeywordCheck>
// in their syntax) parse nothing on valid input and print nothing: the
// printed form keeps one blank before the attributes and the ':'.

// CHECK-LABEL: func.func @valid
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal window 2 {note = 1 : i32} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x4x8xf32>
// CHECK: attn.mask %{{.*}} causal zero_fill : tensor<1x2x4x4xf32>
// CHECK: attn.mask %{{.*}} window 3 {note = 2 : i32} : tensor<1x2x4x4xf32>
func.func @valid(%q: tensor<1x2x4x8xf32>, %s: tensor<1x2x4x4xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %o, %lse = attn.attention %q, %q, %q scale 0.5 causal window 2 {note = 1 : i32}
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %o2, %lse2 = attn.attention %q, %q, %q
      : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
        -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %m = attn.mask %s causal zero_fill : tensor<1x2x4x4xf32>
  %m2 = attn.mask %s window 3 {note = 2 : i32} : tensor<1x2x4x4xf32>
  return %o, %o2, %m, %m2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}
