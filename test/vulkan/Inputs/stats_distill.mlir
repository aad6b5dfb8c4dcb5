// attn.attention_stats and attn.distill (per row) on a GPU target: the
// unfused lowering, forward and every gradient (the entropies' and both
// distillation sides').
func.func @stats_distill(%qs: tensor<1x4x40x16xf32>, %ks: tensor<1x2x48x16xf32>, %vs: tensor<1x2x48x16xf32>,
                         %qt: tensor<1x4x40x32xf32>, %kt: tensor<1x4x48x32xf32>, %vt: tensor<1x4x48x32xf32>)
    -> (tensor<1x4x40x16xf32>, tensor<1x4x40xf32>, tensor<1x4xf32>, tensor<1x4x8x6xf32>,
        tensor<1x4x4xf32>, tensor<1x4x40xf32>) {
  %os, %ls = attn.attention %qs, %ks, %vs causal
      : tensor<1x4x40x16xf32>, tensor<1x2x48x16xf32>, tensor<1x2x48x16xf32>
        -> tensor<1x4x40x16xf32>, tensor<1x4x40xf32>
  %ot, %lt = attn.attention %qt, %kt, %vt causal
      : tensor<1x4x40x32xf32>, tensor<1x4x48x32xf32>, tensor<1x4x48x32xf32>
        -> tensor<1x4x40x32xf32>, tensor<1x4x40xf32>
  %h, %m, %p, %s = attn.attention_stats %qs, %ks, %ls causal
      : tensor<1x4x40x16xf32>, tensor<1x2x48x16xf32>, tensor<1x4x40xf32>
        -> entropy tensor<1x4x40xf32> mean_entropy tensor<1x4xf32> pooled tensor<1x4x8x6xf32>
           similarity tensor<1x4x4xf32>
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<1x4x40x16xf32>, tensor<1x2x48x16xf32>, tensor<1x4x40xf32>
        teacher tensor<1x4x40x32xf32>, tensor<1x4x48x32xf32>, tensor<1x4x40xf32> -> tensor<1x4x40xf32>
  return %os, %h, %m, %p, %s, %kl : tensor<1x4x40x16xf32>, tensor<1x4x40xf32>, tensor<1x4xf32>,
      tensor<1x4x8x6xf32>, tensor<1x4x4xf32>, tensor<1x4x40xf32>
}
