// A forward whose scratch (K and V repacked once per call, 64 MB: its
// 128 query rows take several tasks per head) outgrows a tight
// address-space limit, and a small one that starts the thread pool.
func.func @big(%q: tensor<1x2x128x64xf32>, %k: tensor<1x2x65536x64xf32>, %v: tensor<1x2x65536x64xf32>) -> tensor<1x2x128x64xf32> {
  %o, %l = attn.attention %q, %k, %v : tensor<1x2x128x64xf32>, tensor<1x2x65536x64xf32>, tensor<1x2x65536x64xf32> -> tensor<1x2x128x64xf32>, tensor<1x2x128xf32>
  return %o : tensor<1x2x128x64xf32>
}

func.func @small(%q: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  %o, %l = attn.attention %q, %q, %q : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32> -> tensor<1x2x64x64xf32>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x64xf32>
}
