// RUN: attnc-opt %s -split-input-file -attn-lower-cpu -verify-diagnostics

// Malformed tile plans are located errors, not crashes.
func.func @rows(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan rows must be in [1, 16], got 17}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = {rows = 17 : i64, query_block = 17 : i64, key_block = 32 : i64}} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @key_block(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan key_block must be a multiple of 32 in [32, 256], got 48}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = {rows = 8 : i64, query_block = 8 : i64, key_block = 48 : i64}} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @query_block(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan query_block must be 1 to 16 times rows (8), got 12}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = {rows = 8 : i64, query_block = 12 : i64, key_block = 32 : i64}} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @shape(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{'attn.tile_plan' must be {rows = R, query_block = Q, key_block = K}, got 8 : i64}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = 8} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @gemm(%x: tensor<1x8x32xf32>, %w: tensor<32x32xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{tile plan rows must be in [1, 16], got 0}}
  %y = attn.projection %x, %w {attn.tile_plan = {rows = 0 : i64, query_block = 0 : i64, key_block = 32 : i64}} : tensor<1x8x32xf32>, tensor<32x32xf32> -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}
