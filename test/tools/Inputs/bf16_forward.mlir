// A bf16 forward of 64 query rows: AMX tiles or AVX-512 BF16 dot products
// where the target has them (compile-cpu.test).
func.func @forward(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x1x80x64xbf16>, %v: tensor<1x1x80x48xbf16>) -> tensor<1x2x64x48xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x64x64xbf16>, tensor<1x1x80x64xbf16>, tensor<1x1x80x48xbf16> -> tensor<1x2x64x48xbf16>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x48xbf16>
}
