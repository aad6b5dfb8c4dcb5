// A mask_mod reading a float capture: its gradient is a zero constant,
// which on a GPU target must be written into the device buffer.
func.func @float_mask_capture(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>, %thr: tensor<1xf32>) -> tensor<1x1x4x8xf32> {
  %o, %lse = attn.attention %q, %k, %v mask_captures(%thr : tensor<1xf32>) : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32> mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<1xf32>):
    %x = tensor.extract %t[%h] : tensor<1xf32>
    %z = arith.constant -2.0 : f32
    %m = arith.cmpf ogt, %x, %z : f32
    attn.yield %m : i1
  }
  return %o : tensor<1x1x4x8xf32>
}
