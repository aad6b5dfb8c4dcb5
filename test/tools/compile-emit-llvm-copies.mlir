// RUN: attnc compile %s --emit=llvm --triple=x86_64-unknown-linux-gnu --cpu=skylake-avx512 -O1 | FileCheck %s

// The kernels' element-by-element copies (the packed query rows; K's
// transposes into key tiles are shuffles of 16 x 16 blocks) reach LLVM
// with loop metadata that keeps its loop vectorizer away: it made them
// gathers and scatters, 4 times the code and an eighth of the JIT's work,
// for no measured speed.

// CHECK: define internal void @__attnc_flash_forward_packed(
// CHECK: br {{.*}}, !llvm.loop ![[LOOP:[0-9]+]]
// CHECK-NOT: masked.scatter
// CHECK: define
// CHECK: ![[LOOP]] = distinct !{![[LOOP]], {{.*}}![[NOVEC:[0-9]+]]
// CHECK: ![[NOVEC]] = !{!"llvm.loop.vectorize.enable", i1 false}

func.func @flash(%q: tensor<1x2x40x32xf32>, %k: tensor<1x2x40x32xf32>, %v: tensor<1x2x40x32xf32>) -> tensor<1x2x40x32xf32> {
  %o, %lse = attn.attention %q, %k, %v : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>, tensor<1x2x40xf32>
  return %o : tensor<1x2x40x32xf32>
}
