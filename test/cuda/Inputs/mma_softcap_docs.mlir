// The tensor-core kernels' per-element rule: bf16, GQA (4 query heads over
// 2 KV heads), a causal sliding window, soft-capping (a score_mod whose
// derivative the backward applies) and a document mask_mod over an integer
// capture (zero gradient); 150 rows: a partial last query and key block.
func.func @mma_softcap_docs(%q: tensor<2x4x150x64xbf16>, %k: tensor<2x2x150x64xbf16>,
                            %v: tensor<2x2x150x64xbf16>, %doc: tensor<150xi32>)
    -> tensor<2x4x150x64xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal window 90 mask_captures(%doc : tensor<150xi32>)
      : tensor<2x4x150x64xbf16>, tensor<2x2x150x64xbf16>, tensor<2x2x150x64xbf16>
        -> tensor<2x4x150x64xbf16>, tensor<2x4x150xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 20.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<150xi32>):
    %di = tensor.extract %ids[%i] : tensor<150xi32>
    %dj = tensor.extract %ids[%j] : tensor<150xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %o : tensor<2x4x150x64xbf16>
}
