// An f16 layer whose f32 probabilities come out of f16 projections that
// round differently from the reference's where a value lies on an f16
// rounding boundary (run-edge-cases.mlir, --seed=2 on AVX-512).
func.func @layer(%x: tensor<1x64x32xf16>, %wq: tensor<32x64xf16>, %wk: tensor<32x64xf16>, %wv: tensor<32x64xf16>, %wo: tensor<64x32xf16>)
    -> (tensor<1x64x32xf16>, tensor<1x2x64x64xf32>) {
  %q = attn.projection %x, %wq : tensor<1x64x32xf16>, tensor<32x64xf16> -> tensor<1x2x64x32xf16>
  %k = attn.projection %x, %wk : tensor<1x64x32xf16>, tensor<32x64xf16> -> tensor<1x2x64x32xf16>
  %v = attn.projection %x, %wv : tensor<1x64x32xf16>, tensor<32x64xf16> -> tensor<1x2x64x32xf16>
  %s = attn.scores %q, %k : tensor<1x2x64x32xf16>, tensor<1x2x64x32xf16> -> tensor<1x2x64x64xf32>
  %p = attn.softmax %s : tensor<1x2x64x64xf32>
  %o = attn.apply %p, %v : tensor<1x2x64x64xf32>, tensor<1x2x64x32xf16> -> tensor<1x2x64x32xf16>
  %y = attn.merge %o, %wo : tensor<1x2x64x32xf16>, tensor<64x32xf16> -> tensor<1x64x32xf16>
  return %y, %p : tensor<1x64x32xf16>, tensor<1x2x64x64xf32>
}
