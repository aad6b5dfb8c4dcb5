// RUN: attnc-opt %s -split-input-file -attn-lower-to-linalg | FileCheck %s
// RUN: attnc-opt %s -split-input-file -attnc-cpu-bufferize | FileCheck %s --check-prefix=BUF

// attn.append: a loop over the batch of slice copies into the cache, whose
// argument alone stays writable; bufferized, the copies write the cache
// argument in place (no allocation, no copy of the cache).

// CHECK-LABEL: func.func @contiguous
// CHECK-SAME: %[[NEW:[^:]*]]: tensor<2x2x3x16xf32> {bufferization.writable = false}
// CHECK-SAME: %[[CACHE:[^:]*]]: tensor<2x2x64x16xf32>,
// CHECK-SAME: %[[LEN:[^:]*]]: tensor<2xi32> {bufferization.writable = false}
// CHECK: %[[R:.*]] = scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[CACHE]])
// CHECK: tensor.extract %[[LEN]][%[[B]]]
// CHECK: %[[SRC:.*]] = tensor.extract_slice %[[NEW]][%[[B]], 0, %{{.*}}, 0] [1, 2, %[[N:.*]], 16] [1, 1, 1, 1]
// CHECK: %[[DST:.*]] = tensor.extract_slice %[[ACC]][%[[B]], 0, %[[P:.*]], 0] [1, 2, %[[N]], 16] [1, 1, 1, 1]
// CHECK: %[[COPY:.*]] = linalg.copy ins(%[[SRC]] : tensor<1x2x?x16xf32>) outs(%[[DST]] : tensor<1x2x?x16xf32>)
// CHECK: tensor.insert_slice %[[COPY]] into %[[ACC]][%[[B]], 0, %[[P]], 0] [1, 2, %[[N]], 16] [1, 1, 1, 1]
// CHECK: return %[[R]]

// BUF-LABEL: func.func private @__attnc_impl_contiguous
// BUF-SAME: %[[NEW:[^:]*]]: memref<2x2x3x16xf32> {llvm.noalias}, %[[CACHE:[^:]*]]: memref<2x2x64x16xf32> {llvm.noalias}
// BUF-NOT: memref.alloc
// BUF: scf.for
// BUF: %[[SRC:.*]] = memref.subview %[[NEW]]
// BUF: %[[DST:.*]] = memref.subview %[[CACHE]]
// BUF: linalg.copy ins(%[[SRC]] : {{.*}}) outs(%[[DST]] : {{.*}})
// BUF-NOT: memref.alloc
// BUF: memref.copy %[[CACHE]]
// BUF-NOT: memref.alloc
// BUF: return
func.func @contiguous(%new: tensor<2x2x3x16xf32>, %cache: tensor<2x2x64x16xf32>, %len: tensor<2xi32>)
    -> tensor<2x2x64x16xf32> {
  %c = attn.append %new, %cache lengths(%len : tensor<2xi32>) : tensor<2x2x3x16xf32> into tensor<2x2x64x16xf32>
  return %c : tensor<2x2x64x16xf32>
}

// -----

// Paged: a loop over each batch's rows, each copied to its page's row.
// CHECK-LABEL: func.func @paged
// CHECK-SAME: %[[NEW:[^:]*]]: tensor<2x2x3x16xf32> {bufferization.writable = false}
// CHECK-SAME: %[[POOL:[^:]*]]: tensor<9x2x8x16xf32>,
// CHECK-SAME: %[[TABLE:[^:]*]]: tensor<2x4xi64> {bufferization.writable = false}
// CHECK: scf.for %[[B:.*]] = {{.*}} iter_args(%{{.*}} = %[[POOL]])
// CHECK: scf.for %[[T:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: %[[ENTRY:.*]] = tensor.extract %[[TABLE]][%[[B]], %{{.*}}]
// CHECK: tensor.extract_slice %[[NEW]][%[[B]], 0, %[[T]], 0] [1, 2, 1, 16]
// CHECK: tensor.extract_slice %[[ACC]][%{{.*}}, 0, %{{.*}}, 0] [1, 2, 1, 16]
// CHECK: linalg.copy
// CHECK: tensor.insert_slice
func.func @paged(%new: tensor<2x2x3x16xf32>, %pool: tensor<9x2x8x16xf32>, %len: tensor<2xi32>,
                 %table: tensor<2x4xi64>) -> tensor<9x2x8x16xf32> {
  %c = attn.append %new, %pool lengths(%len : tensor<2xi32>) pages(%table : tensor<2x4xi64>) : tensor<2x2x3x16xf32> into tensor<9x2x8x16xf32>
  return %c : tensor<9x2x8x16xf32>
}
