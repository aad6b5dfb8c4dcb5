// Packed sequences (varlen) on the tensor-core kernels: bf16, GQA, causal,
// the offsets (3 sequences) an argument.
func.func @packed(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x100x64xbf16>, %v: tensor<2x2x100x64xbf16>, %cu: tensor<4xi32>) -> tensor<2x4x100x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal varlen(%cu : tensor<4xi32>)
      : tensor<2x4x100x64xbf16>, tensor<2x2x100x64xbf16>, tensor<2x2x100x64xbf16>
        -> tensor<2x4x100x64xbf16>, tensor<2x4x100xf32>
  return %o : tensor<2x4x100x64xbf16>
}
