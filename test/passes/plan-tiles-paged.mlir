// RUN: attnc-opt %s -attn-plan-tiles="vector-bits=512 dot-bf16=true amx=true" | FileCheck %s

// A paged cache takes AMX tiles as a contiguous one does (its kernel pairs
// a key block at a time, through the table): a 64-row bf16 chunk on an AMX
// CPU, while a decoding step (below 4 rows, where AMX's 16-row tiles would
// be mostly empty) takes f32 FMAs on converted bf16, not the dot products
// (usesDotBf16: Intel's vdpbf16ps runs at half the FMAs' rate).
// CHECK-LABEL: func.func @paged_bf16
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 32, query_block = 64, key_block = 256, amx = true>}
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 2, query_block = 2, key_block = 256>}
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 32, query_block = 64, key_block = 256, amx = true>}
func.func @paged_bf16(%q: tensor<1x2x64x64xbf16>, %q1: tensor<1x2x1x64xbf16>, %k: tensor<8x1x64x64xbf16>,
                      %kc: tensor<1x1x512x64xbf16>, %len: tensor<1xi32>, %t: tensor<1x8xi32>)
    -> (tensor<1x2x64x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x64x64xbf16>) {
  %o, %l = attn.attention %q, %k, %k causal cache lengths(%len : tensor<1xi32>) pages(%t : tensor<1x8xi32>)
      : tensor<1x2x64x64xbf16>, tensor<8x1x64x64xbf16>, tensor<8x1x64x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>
  %o1, %l1 = attn.attention %q1, %kc, %kc causal cache lengths(%len : tensor<1xi32>)
      : tensor<1x2x1x64xbf16>, tensor<1x1x512x64xbf16>, tensor<1x1x512x64xbf16> -> tensor<1x2x1x64xbf16>, tensor<1x2x1xf32>
  %oc, %lc = attn.attention %q, %kc, %kc causal cache lengths(%len : tensor<1xi32>)
      : tensor<1x2x64x64xbf16>, tensor<1x1x512x64xbf16>, tensor<1x1x512x64xbf16> -> tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>
  return %o, %o1, %oc : tensor<1x2x64x64xbf16>, tensor<1x2x1x64xbf16>, tensor<1x2x64x64xbf16>
}

// CHECK-LABEL: func.func @mha_step
// CHECK: attn.attention {{.*}}#attn.cpu_plan<rows = 1, query_block = 1, key_block = 256>}
func.func @mha_step(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x512x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o, %l = attn.attention %q, %k, %k : tensor<1x2x1x64xbf16>, tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16> -> tensor<1x2x1x64xbf16>, tensor<1x2x1xf32>
  return %o : tensor<1x2x1x64xbf16>
}
