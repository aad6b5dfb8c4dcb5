// A rank-0 result on a GPU target: attn.distill's mean, and a returned
// scalar tensor argument (one-element copies become kernels too).
func.func @scalars(%qs: tensor<1x2x24x16xf32>, %ks: tensor<1x2x30x16xf32>, %vs: tensor<1x2x30x16xf32>,
                   %qt: tensor<1x2x24x16xf32>, %kt: tensor<1x1x30x16xf32>, %vt: tensor<1x1x30x16xf32>,
                   %x: tensor<f32>)
    -> (tensor<1x2x24x16xf32>, tensor<f32>, tensor<f32>) {
  %os, %ls = attn.attention %qs, %ks, %vs causal
      : tensor<1x2x24x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x30x16xf32> -> tensor<1x2x24x16xf32>, tensor<1x2x24xf32>
  %ot, %lt = attn.attention %qt, %kt, %vt causal
      : tensor<1x2x24x16xf32>, tensor<1x1x30x16xf32>, tensor<1x1x30x16xf32> -> tensor<1x2x24x16xf32>, tensor<1x2x24xf32>
  %m = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
      : tensor<1x2x24x16xf32>, tensor<1x2x30x16xf32>, tensor<1x2x24xf32>
        teacher tensor<1x2x24x16xf32>, tensor<1x1x30x16xf32>, tensor<1x2x24xf32> -> tensor<f32>
  return %os, %m, %x : tensor<1x2x24x16xf32>, tensor<f32>, tensor<f32>
}
