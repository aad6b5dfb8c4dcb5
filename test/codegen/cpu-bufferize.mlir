// RUN: attnc-opt %s -attnc-cpu-bufferize | FileCheck %s

// The bufferizing half of the CPU pipeline: attn -> linalg -> buffers with
// results as out-parameters, then the C entry point of attn-export-abi.
// (Dv = 8 keeps this attention on the unfused path: the flash kernels take
// head dimensions that are multiples of 16, see lower-cpu.mlir.)
// (The module attribute only loads the LLVM dialect; see
// export-abi-llvm-dialect.mlir.)

// The implementation: private, internal linkage, every buffer noalias, the
// two results as trailing out-parameters written in place.
// CHECK-LABEL: func.func private @__attnc_impl_gqa
// CHECK-SAME: (%[[Q:[^:]*]]: memref<1x4x8x16xbf16> {llvm.noalias},
// CHECK-SAME: %[[K:[^:]*]]: memref<1x2x8x16xbf16> {llvm.noalias},
// CHECK-SAME: %[[V:[^:]*]]: memref<1x2x8x8xbf16> {llvm.noalias},
// CHECK-SAME: %[[LEN:[^:]*]]: memref<1xi32> {llvm.noalias},
// CHECK-SAME: %[[O:[^:]*]]: memref<1x4x8x8xbf16> {llvm.noalias},
// CHECK-SAME: %[[LSE:[^:]*]]: memref<1x4x8xf32> {llvm.noalias})
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-NOT: tensor.
// CHECK: %[[S:.*]] = memref.alloc() {{.*}}: memref<1x4x8x8xf32>
// CHECK: linalg.generic {{.*}} ins(%[[Q]], %[[K]] : memref<1x4x8x16xbf16>, memref<1x2x8x16xbf16>) outs(%[[S]] : memref<1x4x8x8xf32>)
// CHECK: outs(%[[LSE]] : memref<1x4x8xf32>)
// CHECK: outs(%[[O]] : memref<1x4x8x8xbf16>)
// CHECK: memref.dealloc %[[S]]
// CHECK: return
// CHECK-NEXT: }

// The entry point: same buffers, i32 status, a null check per pointer.
// CHECK-LABEL: func.func @gqa
// CHECK-SAME: (%[[EQ:[^:]*]]: memref<1x4x8x16xbf16> {llvm.noalias},
// CHECK-SAME: %[[ELSE:[^:]*]]: memref<1x4x8xf32> {llvm.noalias}) -> i32 {
// CHECK: memref.extract_aligned_pointer_as_index %[[EQ]] : memref<1x4x8x16xbf16> -> index
// CHECK-COUNT-4: memref.extract_aligned_pointer_as_index
// CHECK: %[[PL:.*]] = memref.extract_aligned_pointer_as_index %[[ELSE]] : memref<1x4x8xf32> -> index
// CHECK: %[[NL:.*]] = arith.cmpi eq, %[[PL]], %{{.*}} : index
// CHECK: %[[ANY:.*]] = arith.ori %{{.*}}, %[[NL]] : i1
// CHECK: scf.if %[[ANY]]
// CHECK: } else {
// CHECK-NEXT: func.call @__attnc_impl_gqa(%[[EQ]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ELSE]])
// CHECK: return %{{.*}} : i32
// A private function is bufferized but not exported.
// CHECK-LABEL: func.func private @helper(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<internal>} {
// CHECK-NOT: func.func @helper
// CHECK-NOT: __attnc_impl_helper
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @gqa(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x8x16xbf16>, %v: tensor<1x2x8x8xbf16>, %len: tensor<1xi32>)
      -> (tensor<1x4x8x8xbf16>, tensor<1x4x8xf32>) {
    %o, %lse = attn.attention %q, %k, %v causal lengths(%len : tensor<1xi32>)
        : tensor<1x4x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x8xbf16> -> tensor<1x4x8x8xbf16>, tensor<1x4x8xf32>
    return %o, %lse : tensor<1x4x8x8xbf16>, tensor<1x4x8xf32>
  }
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
