// Three bf16 parts: a causal one, one whose per-batch lengths leave rows
// empty (LSE = -inf there), one plain; only the merged O is returned, so
// the parts' LSEs get their gradient through attn.combine alone.
func.func @parts(%q: tensor<2x2x12x16xbf16>,
                 %k1: tensor<2x1x12x16xbf16>, %v1: tensor<2x1x12x16xbf16>,
                 %k2: tensor<2x1x7x16xbf16>, %v2: tensor<2x1x7x16xbf16>,
                 %k3: tensor<2x1x5x16xbf16>, %v3: tensor<2x1x5x16xbf16>,
                 %len: tensor<2xi32>) -> tensor<2x2x12x16xbf16> {
  %o1, %l1 = attn.attention %q, %k1, %v1 causal
      : tensor<2x2x12x16xbf16>, tensor<2x1x12x16xbf16>, tensor<2x1x12x16xbf16>
        -> tensor<2x2x12x16xbf16>, tensor<2x2x12xf32>
  %o2, %l2 = attn.attention %q, %k2, %v2 lengths(%len : tensor<2xi32>)
      : tensor<2x2x12x16xbf16>, tensor<2x1x7x16xbf16>, tensor<2x1x7x16xbf16>
        -> tensor<2x2x12x16xbf16>, tensor<2x2x12xf32>
  %o3, %l3 = attn.attention %q, %k3, %v3
      : tensor<2x2x12x16xbf16>, tensor<2x1x5x16xbf16>, tensor<2x1x5x16xbf16>
        -> tensor<2x2x12x16xbf16>, tensor<2x2x12xf32>
  %o, %l = attn.combine %o1, %o2, %o3 lse %l1, %l2, %l3
      : tensor<2x2x12x16xbf16>, tensor<2x2x12x16xbf16>, tensor<2x2x12x16xbf16>
        lse tensor<2x2x12xf32>, tensor<2x2x12xf32>, tensor<2x2x12xf32>
        -> tensor<2x2x12x16xbf16>, tensor<2x2x12xf32>
  return %o : tensor<2x2x12x16xbf16>
}
