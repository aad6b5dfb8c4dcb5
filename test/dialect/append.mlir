// RUN: attnc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// attn.append: round trip (contiguous and paged), then one case per
// verifier error.

// CHECK-LABEL: func.func @contiguous
// CHECK: attn.append %{{.*}}, %{{.*}} lengths(%{{.*}} : tensor<2xi32>) : tensor<2x2x3x16xbf16> into tensor<2x2x64x16xbf16>
func.func @contiguous(%new: tensor<2x2x3x16xbf16>, %cache: tensor<2x2x64x16xbf16>, %len: tensor<2xi32>) -> tensor<2x2x64x16xbf16> {
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x2x3x16xbf16> into tensor<2x2x64x16xbf16>
  return %c : tensor<2x2x64x16xbf16>
}

// CHECK-LABEL: func.func @paged
// CHECK: attn.append %{{.*}}, %{{.*}} lengths(%{{.*}} : tensor<2xi64>) pages(%{{.*}} : tensor<2x3xi64>) : tensor<2x2x1x16xf32> into tensor<9x2x8x16xf32>
func.func @paged(%new: tensor<2x2x1x16xf32>, %pool: tensor<9x2x8x16xf32>, %len: tensor<2xi64>, %table: tensor<2x3xi64>) -> tensor<9x2x8x16xf32> {
  %c = attn.append %new, %pool lengths(%len : tensor<2xi64>) pages(%table : tensor<2x3xi64>) : tensor<2x2x1x16xf32> into tensor<9x2x8x16xf32>
  return %c : tensor<9x2x8x16xf32>
}

// -----

func.func @element_type(%new: tensor<2x2x1x16xf16>, %cache: tensor<2x2x64x16xbf16>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.append' op rows and cache must have the same element type, got 'f16' and 'bf16'}}
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x2x1x16xf16> into tensor<2x2x64x16xbf16>
  return
}

// -----

func.func @heads(%new: tensor<2x4x1x16xf32>, %cache: tensor<2x2x64x16xf32>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.append' op rows and cache must have the same heads and head dimension: 'tensor<2x4x1x16xf32>' vs 'tensor<2x2x64x16xf32>'}}
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x4x1x16xf32> into tensor<2x2x64x16xf32>
  return
}

// -----

func.func @batch(%new: tensor<2x2x1x16xf32>, %cache: tensor<3x2x64x16xf32>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.append' op rows and cache batch sizes differ: 2 vs 3}}
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x2x1x16xf32> into tensor<3x2x64x16xf32>
  return
}

// -----

func.func @lengths(%new: tensor<2x2x1x16xf32>, %cache: tensor<2x2x64x16xf32>, %len: tensor<3xi32>) {
  // expected-error @+1 {{'attn.append' op lengths must have one entry per batch (2), got 'tensor<3xi32>'}}
  %c = attn.append %new, %cache lengths(%len : tensor<3xi32>) : tensor<2x2x1x16xf32> into tensor<2x2x64x16xf32>
  return
}

// -----

func.func @too_many_rows(%new: tensor<1x2x65x16xf32>, %cache: tensor<1x2x64x16xf32>, %len: tensor<1xi32>) {
  // expected-error @+1 {{'attn.append' op appends 65 rows per sequence to a cache of capacity 64}}
  %c = attn.append %new, %cache lengths(%len : tensor<1xi32>) : tensor<1x2x65x16xf32> into tensor<1x2x64x16xf32>
  return
}

// -----

func.func @table_rows(%new: tensor<2x2x1x16xf32>, %pool: tensor<9x2x8x16xf32>, %len: tensor<2xi32>, %table: tensor<3x4xi32>) {
  // expected-error @+1 {{'attn.append' op pages must have one row per batch (2), got 'tensor<3x4xi32>'}}
  %c = attn.append %new, %pool lengths(%len : tensor<2xi32>) pages(%table : tensor<3x4xi32>) : tensor<2x2x1x16xf32> into tensor<9x2x8x16xf32>
  return
}

// -----

func.func @rank(%new: tensor<2x1x16xf32>, %cache: tensor<2x2x64x16xf32>, %len: tensor<2xi32>) {
  // expected-error @+1 {{'attn.append' op rows must have rank 4, got 'tensor<2x1x16xf32>'}}
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x1x16xf32> into tensor<2x2x64x16xf32>
  return
}
