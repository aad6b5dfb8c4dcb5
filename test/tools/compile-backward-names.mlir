// Derived parameter names (saved<k>, d_<name>) never collide with the spec's.
// RUN: rm -rf %t && mkdir -p %t
// RUN: attnc compile %s -o %t/clash.o --emit-header %t/clash.h
// RUN: FileCheck %s < %t/clash.h
// RUN: %cc -std=c99 -Wall -Werror -fsyntax-only -x c %t/clash.h

// CHECK: int32_t clash_fwd(const float *q, const float *d_q, const float *saved0, float *o, float *saved0_1);
// CHECK: int32_t clash_bwd(const float *q, const float *d_q, const float *saved0, const float *o, const float *saved0_1, const float *d_o, float *d_q_1, float *d_d_q, float *d_saved0);
func.func @clash(%q: tensor<1x1x4x8xf32>, %d_q: tensor<1x1x4x8xf32>, %saved0: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %o, %lse = attn.attention %q, %d_q, %saved0 : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32>
  return %o : tensor<1x1x4x8xf32>
}
