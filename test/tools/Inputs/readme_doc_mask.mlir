// Document masking: query i sees key j only if both are in the same document
// (packed sequences), and only j <= i (causal). %doc is captured by the
// mask_mod region: an i32 input of the kernel, without a gradient.
func.func @doc_mask(%q: tensor<1x4x64x32xf32>, %k: tensor<1x4x64x32xf32>,
                    %v: tensor<1x4x64x32xf32>, %doc: tensor<64xi32>)
    -> tensor<1x4x64x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal mask_captures(%doc : tensor<64xi32>)
      : tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>
        -> tensor<1x4x64x32xf32>, tensor<1x4x64xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<64xi32>):
    %di = tensor.extract %ids[%i] : tensor<64xi32>
    %dj = tensor.extract %ids[%j] : tensor<64xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %o : tensor<1x4x64x32xf32>
}
