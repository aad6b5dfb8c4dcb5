// attn-append into a contiguous KV cache with a dynamic batch: each entry
// appends to and attends to its own rows.
func.func @step(%q: tensor<?x4x1x32xf32>, %knew: tensor<?x2x1x32xf32>, %vnew: tensor<?x2x1x32xf32>,
                %k: tensor<?x2x40x32xf32>, %v: tensor<?x2x40x32xf32>,
                %len: tensor<?xi32>) -> tensor<?x4x1x32xf32> {
  %k1 = attn.append %knew, %k lengths(%len : tensor<?xi32>) : tensor<?x2x1x32xf32> into tensor<?x2x40x32xf32>
  %v1 = attn.append %vnew, %v lengths(%len : tensor<?xi32>) : tensor<?x2x1x32xf32> into tensor<?x2x40x32xf32>
  %o, %lse = attn.attention %q, %k1, %v1 causal cache lengths(%len : tensor<?xi32>)
      : tensor<?x4x1x32xf32>, tensor<?x2x40x32xf32>, tensor<?x2x40x32xf32> -> tensor<?x4x1x32xf32>, tensor<?x4x1xf32>
  return %o : tensor<?x4x1x32xf32>
}
