// A forward whose scratch (K and V copied once per call, 64 MB: its 128
// query rows take several tasks per head, and with the head similarity
// every task reads the copies rather than packing its own blocks)
// outgrows a tight address-space limit, and a small one that starts the
// thread pool.
func.func @big(%q: tensor<1x2x128x64xf32>, %k: tensor<1x2x65536x64xf32>, %v: tensor<1x2x65536x64xf32>) -> (tensor<1x2x128x64xf32>, tensor<1x2x2xf32>) {
  %o, %l = attn.attention %q, %k, %v : tensor<1x2x128x64xf32>, tensor<1x2x65536x64xf32>, tensor<1x2x65536x64xf32> -> tensor<1x2x128x64xf32>, tensor<1x2x128xf32>
  %s = attn.attention_stats %q, %k, %l : tensor<1x2x128x64xf32>, tensor<1x2x65536x64xf32>, tensor<1x2x128xf32> -> similarity tensor<1x2x2xf32>
  return %o, %s : tensor<1x2x128x64xf32>, tensor<1x2x2xf32>
}

// The same forward without the similarity packs each key block per task
// (its copies would pass 16 MiB): it runs within the same limit.
func.func @packed(%q: tensor<1x2x128x64xf32>, %k: tensor<1x2x65536x64xf32>, %v: tensor<1x2x65536x64xf32>) -> tensor<1x2x128x64xf32> {
  %o, %l = attn.attention %q, %k, %v : tensor<1x2x128x64xf32>, tensor<1x2x65536x64xf32>, tensor<1x2x65536x64xf32> -> tensor<1x2x128x64xf32>, tensor<1x2x128xf32>
  return %o : tensor<1x2x128x64xf32>
}

func.func @small(%q: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  %o, %l = attn.attention %q, %q, %q : tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32> -> tensor<1x2x64x64xf32>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x64xf32>
}
