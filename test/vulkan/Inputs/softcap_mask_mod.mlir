// Soft-capping and a document mask as a mask_mod region over an integer
// capture (evaluated per element; its gradient is zero).
func.func @softcap_mask_mod(%q: tensor<1x2x40x64xf32>, %k: tensor<1x2x40x64xf32>,
                            %v: tensor<1x2x40x64xf32>, %doc: tensor<40xi32>)
    -> tensor<1x2x40x64xf32> {
  %o, %lse = attn.attention %q, %k, %v mask_captures(%doc : tensor<40xi32>)
      : tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>
        -> tensor<1x2x40x64xf32>, tensor<1x2x40xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 20.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<40xi32>):
    %di = tensor.extract %ids[%i] : tensor<40xi32>
    %dj = tensor.extract %ids[%j] : tensor<40xi32>
    %same = arith.cmpi eq, %di, %dj : i32
    attn.yield %same : i1
  }
  return %o : tensor<1x2x40x64xf32>
}
