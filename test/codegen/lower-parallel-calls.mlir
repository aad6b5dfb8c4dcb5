// RUN: attnc-opt %s -attn-lower-parallel-calls | FileCheck %s
// RUN: attnc-opt %s -attn-lower-parallel-calls=threads=3 | FileCheck %s --check-prefix=THREADS

// A call of a task function (marked attn.parallel_tasks) becomes
// attnc_parallel_for(n, @f_packed, ctx) with the pointers packed in ctx;
// @f_packed unpacks them and calls @f on its [begin, end).
// CHECK: llvm.func @attnc_parallel_for(i64, !llvm.ptr, !llvm.ptr)
// CHECK-LABEL: llvm.func internal @tasks_packed(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: i64, %[[E:[^:]*]]: i64)
// CHECK: %[[S0:.*]] = llvm.getelementptr %[[CTX]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %[[CTX]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @tasks(%[[P0]], %[[P1]], %[[B]], %[[E]])
// CHECK-LABEL: llvm.func @kernel
// CHECK: %[[ARR:.*]] = llvm.alloca %{{.*}} x !llvm.array<2 x ptr>
// CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK: %[[FN:.*]] = llvm.mlir.addressof @tasks_packed
// CHECK: llvm.call @attnc_parallel_for(%{{.*}}, %[[FN]], %[[ARR]])
// CHECK-NOT: llvm.call @tasks(

// With a thread count, the limited entry of the runtime, given it.
// THREADS: llvm.func @attnc_parallel_for_threads(i64, !llvm.ptr, !llvm.ptr, i32)
// THREADS: %[[T:.*]] = llvm.mlir.constant(3 : i32) : i32
// THREADS: llvm.call @attnc_parallel_for_threads(%{{.*}}, %{{.*}}, %{{.*}}, %[[T]])
llvm.func @tasks(%a: !llvm.ptr, %b: !llvm.ptr, %begin: i64, %end: i64) attributes {attn.parallel_tasks} {
  llvm.return
}
llvm.func @kernel(%a: !llvm.ptr, %b: !llvm.ptr) {
  %0 = llvm.mlir.constant(0 : i64) : i64
  %n = llvm.mlir.constant(96 : i64) : i64
  llvm.call @tasks(%a, %b, %0, %n) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
  llvm.return
}
