// Causal attention with its entropies (differentiable: an entropy
// regulariser) and a 16 x 16 heatmap per head (forward only).
func.func @stats(%q: tensor<1x4x128x32xf32>, %k: tensor<1x4x128x32xf32>, %v: tensor<1x4x128x32xf32>)
    -> (tensor<1x4x128x32xf32>, tensor<1x4xf32>, tensor<1x4x16x16xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>
        -> tensor<1x4x128x32xf32>, tensor<1x4x128xf32>
  %h, %map = attn.attention_stats %q, %k, %lse causal
      : tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>, tensor<1x4x128xf32>
        -> mean_entropy tensor<1x4xf32> pooled tensor<1x4x16x16xf32>
  return %o, %h, %map : tensor<1x4x128x32xf32>, tensor<1x4xf32>, tensor<1x4x16x16xf32>
}
