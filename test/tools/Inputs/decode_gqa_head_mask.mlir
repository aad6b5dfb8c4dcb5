// An f32 GQA decode-like step (Sq = 3, 4 query heads per KV head, grouped
// in one task) whose mask_mod depends on the query head and the key.
func.func @heads(%q: tensor<4x8x3x32xf32>, %k: tensor<4x2x130x32xf32>,
                 %v: tensor<4x2x130x16xf32>) -> tensor<4x8x3x16xf32> {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<4x8x3x32xf32>, tensor<4x2x130x32xf32>, tensor<4x2x130x16xf32>
        -> tensor<4x8x3x16xf32>, tensor<4x8x3xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c3 = arith.constant 3 : index
    %jm = arith.remui %j, %c3 : index
    %hm = arith.remui %h, %c3 : index
    %keep = arith.cmpi ne, %jm, %hm : index
    attn.yield %keep : i1
  }
  return %o : tensor<4x8x3x16xf32>
}
