// An f16 attention layer that also returns its f32 probabilities
// (run-edge-cases.mlir).
func.func @layer(%x: tensor<2x130x8xf16>, %wq: tensor<8x128xf16>, %wk: tensor<8x64xf16>, %wv: tensor<8x64xf16>, %wo: tensor<128x16xf16>) -> (tensor<2x130x16xf16>, tensor<2x4x130x130xf32>) {
  %q = attn.projection %x, %wq : tensor<2x130x8xf16>, tensor<8x128xf16> -> tensor<2x4x130x32xf16>
  %k = attn.projection %x, %wk : tensor<2x130x8xf16>, tensor<8x64xf16> -> tensor<2x2x130x32xf16>
  %v = attn.projection %x, %wv : tensor<2x130x8xf16>, tensor<8x64xf16> -> tensor<2x2x130x32xf16>
  %s = attn.scores %q, %k : tensor<2x4x130x32xf16>, tensor<2x2x130x32xf16> -> tensor<2x4x130x130xf32>
  %t = attn.scale %s by 1.000000e-01 : tensor<2x4x130x130xf32>
  %p = attn.softmax %t : tensor<2x4x130x130xf32>
  %o = attn.apply %p, %v : tensor<2x4x130x130xf32>, tensor<2x2x130x32xf16> -> tensor<2x4x130x32xf16>
  %y = attn.merge %o, %wo : tensor<2x4x130x32xf16>, tensor<128x16xf16> -> tensor<2x130x16xf16>
  return %y, %p : tensor<2x130x16xf16>, tensor<2x4x130x130xf32>
}
