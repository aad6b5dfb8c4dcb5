// RUN: attnc-opt %s -split-input-file -attn-lower-cpu -verify-diagnostics

// Malformed tile plans are located errors, not crashes.
func.func @rows(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan rows must be in [1, 16], got 17}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 17, query_block = 17, key_block = 32>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @key_block(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan key_block must be a multiple of 32 in [32, 256], got 48}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 48>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @query_block(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{tile plan query_block must be 1 to 16 times rows (8), got 12}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 12, key_block = 32>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @shape(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{'attn.tile_plan' must be a tile plan (#attn.cpu_plan<...> or #attn.gpu_plan<...>), got 8 : i64}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = 8} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @gemm(%x: tensor<1x8x32xf32>, %w: tensor<32x32xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{tile plan rows must be in [1, 16], got 0}}
  %y = attn.projection %x, %w {attn.tile_plan = #attn.cpu_plan<rows = 0, query_block = 0, key_block = 32>} : tensor<1x8x32xf32>, tensor<32x32xf32> -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

// The lowering takes every decision from the plan: an op without one is an
// error, not a silent fallback.
func.func @no_plan(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{attn-lower-cpu needs a CPU tile plan (#attn.cpu_plan, from attn-plan-tiles); the op has none}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @gpu_plan(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{attn-lower-cpu needs a CPU tile plan (#attn.cpu_plan, from attn-plan-tiles), got #attn.gpu_plan<query_block = 64, key_block = 64, workgroup_size = 128, subgroups = 4>}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.gpu_plan<query_block = 64, key_block = 64, workgroup_size = 128, subgroups = 4>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @amx_rows(%q: tensor<1x2x40x32xbf16>) -> (tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{an AMX tile plan must have rows = 16 (or 32 on attn.attention and attn.attention_grad) and a key_block, got rows = 8, key_block = 32}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 32, amx = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>
}

// -----

func.func @missing_blocks(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{the tile plan of 'attn.attention' must give query_block and key_block, got #attn.cpu_plan<rows = 8>}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

func.func @amx_stats_rows(%q: tensor<1x2x40x32xbf16>, %l: tensor<1x2x40xf32>) -> tensor<1x2x40xf32> {
  // expected-error @+1 {{an AMX tile plan of 'attn.attention_stats' needs rows = 16, got 32}}
  %h = attn.attention_stats %q, %q, %l {attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 32, key_block = 32, amx = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40xf32> -> entropy tensor<1x2x40xf32>
  return %h : tensor<1x2x40xf32>
}

// -----

func.func @amx_backward_dv(%q: tensor<1x2x40x32xbf16>, %v: tensor<1x2x40x16xbf16>, %lse: tensor<1x2x40xf32>) -> tensor<1x2x40x32xbf16> {
  // expected-error @+1 {{an AMX tile plan needs bf16 Q, K and V whose head dimensions are multiples of 32, got 'tensor<1x2x40x16xbf16>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %v, %v, %lse, %v {attn.tile_plan = #attn.cpu_plan<rows = 32, query_block = 32, key_block = 32, amx = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x16xbf16>, tensor<1x2x40x16xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x16xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x16xbf16>
  return %dq : tensor<1x2x40x32xbf16>
}

// -----

func.func @splits_projection(%x: tensor<2x16x64xf32>, %w: tensor<64x96xf32>) -> tensor<2x3x16x32xf32> {
  // expected-error @+1 {{only attn.attention_grad (dQ copies) and attn.attention (key ranges) take tile plan splits}}
  %p = attn.projection %x, %w {attn.tile_plan = #attn.cpu_plan<rows = 8, splits = 2>} : tensor<2x16x64xf32>, tensor<64x96xf32> -> tensor<2x3x16x32xf32>
  return %p : tensor<2x3x16x32xf32>
}

// -----

func.func @amx_backward(%q: tensor<1x2x40x32xbf16>, %lse: tensor<1x2x40xf32>) -> tensor<1x2x40x32xbf16> {
  // expected-error @+1 {{an AMX tile plan of 'attn.attention_grad' needs rows = 32, got 16}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 32, amx = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x32xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>
  return %dq : tensor<1x2x40x32xbf16>
}

// -----

func.func @gpu_plan_gemm(%x: tensor<1x8x32xf32>, %w: tensor<32x32xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{a GPU tile plan is only valid on attn.attention(_grad)}}
  %y = attn.projection %x, %w {attn.tile_plan = #attn.gpu_plan<query_block = 64, key_block = 64, workgroup_size = 128, subgroups = 4>} : tensor<1x8x32xf32>, tensor<32x32xf32> -> tensor<1x2x8x16xf32>
  return %y : tensor<1x2x8x16xf32>
}

// -----

func.func @amx_stats_grad(%q: tensor<1x2x8x16xf32>, %lse: tensor<1x2x8xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{only attn.attention, attn.attention_grad and attn.attention_stats take an AMX tile plan}}
  %dq, %dk, %dl = attn.attention_stats_grad %q, %q, %lse entropy_grad(%lse : tensor<1x2x8xf32>) {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 32, amx = true>} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
  return %dq : tensor<1x2x8x16xf32>
}

// -----

func.func @plan_on_scores(%q: tensor<1x2x8x16xf32>) -> tensor<1x2x8x8xf32> {
  // expected-error @+1 {{'attn.tile_plan' is only valid on attn.attention(_grad), attn.attention_stats(_grad), attn.distill(_grad), projections and merges}}
  %s = attn.scores %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8>} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  return %s : tensor<1x2x8x8xf32>
}

// -----

func.func @gpu_workgroup(%q: tensor<1x2x40x16xf32>) -> (tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{GPU tile plan workgroup_size (100) must be a multiple of subgroups (8)}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.gpu_plan<query_block = 64, key_block = 64, workgroup_size = 100, subgroups = 8>} : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>
}

// -----

// The attributes the passes exchange are checked too.
// expected-error @+1 {{'attn.uses_amx' must be a unit attribute of a module}}
func.func @misplaced() attributes {attn.uses_amx} {
  return
}

// -----

// expected-error @+1 {{'attn.saved_bytes' must be a non-negative i64 of a function}}
func.func @bytes() attributes {attn.saved_bytes = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{unknown attn attribute 'attn.frobnicate'}}
func.func @unknown() attributes {attn.frobnicate} {
  return
}

// -----

func.func @dot_amx(%q: tensor<1x2x40x32xbf16>) -> (tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{a dot_bf16 tile plan must not be an AMX one and must have rows <= 14 and a key_block, got rows = 16, key_block = 32}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 32, amx = true, dot_bf16 = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>
}

// -----

func.func @dot_f32(%q: tensor<1x2x40x32xf32>) -> (tensor<1x2x40x32xf32>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{a dot_bf16 tile plan needs bf16 Q, K whose head dimensions are multiples of 16, got 'tensor<1x2x40x32xf32>'}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 32, dot_bf16 = true>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
}

// -----

func.func @amx_head_dim(%q: tensor<1x2x40x16xbf16>) -> (tensor<1x2x40x16xbf16>, tensor<1x2x40xf32>) {
  // expected-error @+1 {{an AMX tile plan needs bf16 Q, K whose head dimensions are multiples of 32, got 'tensor<1x2x40x16xbf16>'}}
  %o, %lse = attn.attention %q, %q, %q {attn.tile_plan = #attn.cpu_plan<rows = 16, query_block = 16, key_block = 32, amx = true>} : tensor<1x2x40x16xbf16>, tensor<1x2x40x16xbf16>, tensor<1x2x40x16xbf16> -> tensor<1x2x40x16xbf16>, tensor<1x2x40xf32>
  return %o, %lse : tensor<1x2x40x16xbf16>, tensor<1x2x40xf32>
}

// -----

func.func @dot_stats(%q: tensor<1x2x40x32xbf16>, %l: tensor<1x2x40xf32>) -> tensor<1x2x40xf32> {
  // expected-error @+1 {{only attn.attention and attn.attention_grad take a dot_bf16 tile plan}}
  %h = attn.attention_stats %q, %q, %l {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 32, dot_bf16 = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40xf32> -> entropy tensor<1x2x40xf32>
  return %h : tensor<1x2x40xf32>
}

// -----

func.func @dot_backward_odd_rows(%q: tensor<1x2x40x32xbf16>, %lse: tensor<1x2x40xf32>) -> tensor<1x2x40x32xbf16> {
  // expected-error @+1 {{a dot_bf16 tile plan of attn.attention_grad needs an even number of rows, got 7}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %q, %q, %lse, %q {attn.tile_plan = #attn.cpu_plan<rows = 7, query_block = 7, key_block = 32, dot_bf16 = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x32xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>
  return %dq : tensor<1x2x40x32xbf16>
}

// -----

func.func @dot_backward_value(%q: tensor<1x2x40x32xbf16>, %v: tensor<1x2x40x24xbf16>, %lse: tensor<1x2x40xf32>) -> tensor<1x2x40x32xbf16> {
  // expected-error @+1 {{a dot_bf16 tile plan needs bf16 Q, K and V whose head dimensions are multiples of 16, got 'tensor<1x2x40x24xbf16>'}}
  %dq, %dk, %dv = attn.attention_grad %q, %q, %v, %v, %lse, %v {attn.tile_plan = #attn.cpu_plan<rows = 8, query_block = 8, key_block = 32, dot_bf16 = true>} : tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x24xbf16>, tensor<1x2x40x24xbf16>, tensor<1x2x40xf32>, tensor<1x2x40x24xbf16> -> tensor<1x2x40x32xbf16>, tensor<1x2x40x32xbf16>, tensor<1x2x40x24xbf16>
  return %dq : tensor<1x2x40x32xbf16>
}
