// Full multi-head self-attention layer: Y = causal_attention(X Wq, X Wk, X Wv) Wo.
// B=2, S=64, E=128, H=4 heads of D=32.
func.func @mha_causal(%x: tensor<2x64x128xf32>, %wq: tensor<128x128xf32>,
                      %wk: tensor<128x128xf32>, %wv: tensor<128x128xf32>,
                      %wo: tensor<128x128xf32>) -> tensor<2x64x128xf32> {
  %q = attn.projection %x, %wq : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x4x64x32xf32>
  %k = attn.projection %x, %wk : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x4x64x32xf32>
  %v = attn.projection %x, %wv : tensor<2x64x128xf32>, tensor<128x128xf32> -> tensor<2x4x64x32xf32>
  %s = attn.scores %q, %k : tensor<2x4x64x32xf32>, tensor<2x4x64x32xf32> -> tensor<2x4x64x64xf32>
  %t = attn.scale %s : tensor<2x4x64x64xf32>
  %m = attn.mask %t causal : tensor<2x4x64x64xf32>
  %p = attn.softmax %m : tensor<2x4x64x64xf32>
  %o = attn.apply %p, %v : tensor<2x4x64x64xf32>, tensor<2x4x64x32xf32> -> tensor<2x4x64x32xf32>
  %y = attn.merge %o, %wo : tensor<2x4x64x32xf32>, tensor<128x128xf32> -> tensor<2x64x128xf32>
  return %y : tensor<2x64x128xf32>
}
