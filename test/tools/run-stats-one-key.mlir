// RUN: attnc run %s --check | FileCheck %s
// RUN: %if vulkan %{ attnc run %s --target=vulkan --check | FileCheck %s %}

// Every row sees one key: the entropies and the KL are 0 in exact
// arithmetic, and the kernels give rounding noise (1e-8). Judged against
// their own zeros that read 1e22 and the check FAILED correct kernels;
// entropies and KL divergences are judged against at least 0.1 nats.
// (Head dimension 7: the CPU's unfused attention.)
// CHECK: forward   h            {{[0-9.]+e-0[5-9]|0.00e\+00}}
// CHECK: forward   kl           {{[0-9.]+e-0[5-9]|0.00e\+00}}
// CHECK: check passed
func.func @f(%q: tensor<1x2x3x7xf32>, %k: tensor<1x2x1x7xf32>, %v: tensor<1x2x1x7xf32>,
             %qt: tensor<1x2x3x16xf32>, %kt: tensor<1x1x1x16xf32>, %vt: tensor<1x1x1x16xf32>)
    -> (tensor<1x2x3x7xf32>, tensor<1x2x3xf32>, tensor<f32>) {
  %o, %lse = attn.attention %q, %k, %v window 5
      : tensor<1x2x3x7xf32>, tensor<1x2x1x7xf32>, tensor<1x2x1x7xf32> -> tensor<1x2x3x7xf32>, tensor<1x2x3xf32>
  %h = attn.attention_stats %q, %k, %lse window 5
      : tensor<1x2x3x7xf32>, tensor<1x2x1x7xf32>, tensor<1x2x3xf32> -> entropy tensor<1x2x3xf32>
  %ot, %lt = attn.attention %qt, %kt, %vt window 5
      : tensor<1x2x3x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32> -> tensor<1x2x3x16xf32>, tensor<1x2x3xf32>
  %kl = attn.distill %q, %k, %lse teacher %qt, %kt, %lt window 5
      : tensor<1x2x3x7xf32>, tensor<1x2x1x7xf32>, tensor<1x2x3xf32>
        teacher tensor<1x2x3x16xf32>, tensor<1x1x1x16xf32>, tensor<1x2x3xf32> -> tensor<f32>
  return %o, %h, %kl : tensor<1x2x3x7xf32>, tensor<1x2x3xf32>, tensor<f32>
}
