// RUN: attnc-opt %s -split-input-file -attn-export-abi | FileCheck %s

// attn-export-abi on bufferized functions: each public function @f becomes
// the private, internal, never inlined @__attnc_impl_f, and a new public @f
// returns an i32 status: 1 (ATTNC_STATUS_NULL_ARGUMENT) without calling
// anything when a buffer pointer is null, else 0 after calling the
// implementation, or 3 (ATTNC_STATUS_OUT_OF_MEMORY) when an allocation of
// the implementation fails and the runtime jumps back to the setjmp of the
// entry's kernel frame (runtime.h's attnc_kernel_enter).
//
// The module attribute only loads the LLVM dialect, which the pass needs
// for #llvm.linkage but does not declare as a dependent dialect (see
// export-abi-llvm-dialect.mlir).

// CHECK-LABEL: func.func private @attnc_kernel_enter(!llvm.ptr)
// CHECK-LABEL: func.func private @attnc_kernel_leave(!llvm.ptr)
// CHECK-LABEL: llvm.func @_setjmp(!llvm.ptr) -> i32 attributes {passthrough = ["returns_twice"]}
// CHECK-LABEL: func.func private @__attnc_impl_kernel
// CHECK-SAME: (%{{.*}}: memref<4xf32> {llvm.noalias}, %{{.*}}: memref<2x3xi32> {llvm.noalias})
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-NEXT: memref.subview
// CHECK-NEXT: memref.copy
// CHECK-NEXT: return
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[A:.*]]: memref<4xf32> {llvm.noalias}, %[[B:.*]]: memref<2x3xi32> {llvm.noalias}) -> i32
// CHECK: %[[FRAME:.*]] = llvm.alloca %{{.*}} x i8 {alignment = 16 : i64}
// CHECK: call @attnc_kernel_enter(%[[FRAME]])
// CHECK: %[[JUMP:.*]] = llvm.call @_setjmp(%[[FRAME]])
// CHECK: %[[JUMPED:.*]] = llvm.icmp "ne" %[[JUMP]]
// CHECK: %[[RESULT:.*]] = scf.if %[[JUMPED]] -> (i32) {
// CHECK-NEXT: %[[OOM:.*]] = arith.constant 3 : i32
// CHECK-NEXT: scf.yield %[[OOM]] : i32
// CHECK-NEXT: } else {
// CHECK-DAG: %[[FALSE:.*]] = arith.constant false
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[PA:.*]] = memref.extract_aligned_pointer_as_index %[[A]] : memref<4xf32> -> index
// CHECK: %[[NA:.*]] = arith.cmpi eq, %[[PA]], %[[C0]] : index
// CHECK: %[[OA:.*]] = arith.ori %[[FALSE]], %[[NA]] : i1
// CHECK: %[[PB:.*]] = memref.extract_aligned_pointer_as_index %[[B]] : memref<2x3xi32> -> index
// CHECK: %[[NB:.*]] = arith.cmpi eq, %[[PB]], %[[C0]] : index
// CHECK: %[[ANY:.*]] = arith.ori %[[OA]], %[[NB]] : i1
// CHECK: %[[STATUS:.*]] = scf.if %[[ANY]] -> (i32) {
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: scf.yield %[[ONE]] : i32
// CHECK-NEXT: } else {
// CHECK-NEXT: func.call @__attnc_impl_kernel(%[[A]], %[[B]]) : (memref<4xf32>, memref<2x3xi32>) -> ()
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: scf.yield %[[ZERO]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield %[[STATUS]] : i32
// CHECK-NEXT: }
// CHECK-NEXT: call @attnc_kernel_leave(%[[FRAME]])
// CHECK-NEXT: return %[[RESULT]] : i32
// Private functions and declarations are not kernels.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%{{.*}}: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<internal>} {
// CHECK-LABEL: func.func private @external(memref<4xf32>)
// CHECK-NOT: __attnc_impl_helper
// CHECK-NOT: __attnc_impl_external
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @kernel(%a: memref<4xf32>, %b: memref<2x3xi32>) {
    %view = memref.subview %b[0, 0] [1, 3] [1, 1] : memref<2x3xi32> to memref<3xi32, strided<[1]>>
    memref.copy %view, %view : memref<3xi32, strided<[1]>> to memref<3xi32, strided<[1]>>
    return
  }
  func.func private @helper(%a: memref<4xf32>) {
    return
  }
  func.func private @external(%a: memref<4xf32>)
}

// -----

// Two kernels, one calling the other: the call keeps calling the
// implementation (void, out-parameters), not the new i32 entry point.
// CHECK-LABEL: func.func private @__attnc_impl_inner(%{{.*}}: memref<4xf32> {llvm.noalias})
// CHECK-LABEL: func.func @inner(%{{.*}}: memref<4xf32> {llvm.noalias}) -> i32
// CHECK: func.call @__attnc_impl_inner(
// CHECK-LABEL: func.func private @__attnc_impl_outer
// CHECK-SAME: (%[[X:.*]]: memref<4xf32> {llvm.noalias}, %{{.*}}: memref<f16> {llvm.noalias})
// CHECK-NEXT: call @__attnc_impl_inner(%[[X]]) : (memref<4xf32>) -> ()
// CHECK-LABEL: func.func @outer(%{{.*}}: memref<4xf32> {llvm.noalias}, %{{.*}}: memref<f16> {llvm.noalias}) -> i32
// CHECK-COUNT-2: memref.extract_aligned_pointer_as_index
// CHECK-NOT: memref.extract_aligned_pointer_as_index
// CHECK: func.call @__attnc_impl_outer(
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @inner(%a: memref<4xf32>) {
    return
  }
  func.func @outer(%a: memref<4xf32>, %b: memref<f16>) {
    func.call @inner(%a) : (memref<4xf32>) -> ()
    return
  }
}

// -----

// A kernel without buffers cannot see a null pointer.
// CHECK-LABEL: func.func private @__attnc_impl_nothing()
// CHECK-LABEL: func.func @nothing() -> i32
// CHECK-NOT: memref.extract_aligned_pointer_as_index
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: scf.if %[[FALSE]] -> (i32)
// CHECK: func.call @__attnc_impl_nothing() : () -> ()
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @nothing() {
    return
  }
}

// -----

// A module whose kernels use AMX tiles (marked by attn-lower-cpu): the
// entry asks the runtime for the tile state first and returns 5
// (ATTNC_STATUS_NO_AMX) without calling the kernel when it is refused.
// CHECK-LABEL: func.func private @attnc_amx_init() -> i32
// CHECK-LABEL: func.func @amx_kernel
// CHECK: %[[R:.*]] = func.call @attnc_amx_init() : () -> i32
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[R]], %[[Z]] : i32
// CHECK-NEXT: %[[S:.*]] = scf.if %[[OK]] -> (i32) {
// CHECK-NEXT: func.call @__attnc_impl_amx_kernel
// CHECK: } else {
// CHECK-NEXT: arith.constant 5 : i32
module attributes {attn.uses_amx, attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @amx_kernel(%a: memref<4xf32>) {
    return
  }
}

// -----

// A KV cache's lengths (marked by attn-mark-length-bounds with the cache's
// capacity): the entry returns 2 (ATTNC_STATUS_BAD_SIZE) without calling
// the kernel when one is negative or past the capacity; the mark leaves
// the implementation.
// CHECK-LABEL: func.func private @__attnc_impl_cache_step
// CHECK-SAME: (%{{.*}}: memref<2xi32> {llvm.noalias}, %{{.*}}: memref<4xf32> {llvm.noalias})
// CHECK-LABEL: func.func @cache_step
// CHECK: %[[BAD:.*]]:2 = scf.for {{.*}} -> (i1, i64) {
// CHECK: %[[X:.*]] = memref.load
// CHECK: %[[X64:.*]] = arith.extsi %[[X]] : i32 to i64
// CHECK: arith.cmpi slt, %[[X64]]
// CHECK: %[[CAP:.*]] = arith.constant 40 : i64
// CHECK: arith.cmpi sgt, %[[X64]], %[[CAP]]
// CHECK: scf.if %[[BAD]]#0 -> (i32) {
// CHECK-NEXT: arith.constant 2 : i32
// CHECK: } else {
// CHECK: func.call @__attnc_impl_cache_step
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @cache_step(%len: memref<2xi32> {attn.max_value = 40 : i64}, %o: memref<4xf32>) {
    return
  }
}

// -----

// A paged cache's block table (marked with its last page): every entry of
// the [B, M] table is checked, as one dimension.
// CHECK-LABEL: func.func @paged_step
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1{{\]\]}} : memref<2x3xi32> into memref<6xi32>
// CHECK: scf.for {{.*}} -> (i1, i64) {
// CHECK: memref.load %[[FLAT]]
// CHECK: %[[LAST:.*]] = arith.constant 4 : i64
// CHECK: arith.cmpi sgt, %{{.*}}, %[[LAST]]
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @paged_step(%t: memref<2x3xi32> {attn.max_value = 4 : i64}, %o: memref<4xf32>) {
    return
  }
}

// -----

// A kernel of one batch entry (a spec's dynamic batch): the entry point
// takes attn.batch_slices for attn-batch-entries, and @__attnc_check_f
// returns what the entry point checks before writing anything, NULL_ARGUMENT
// (1) over BAD_SIZE (2) over OK, so that every entry can be checked first.
// CHECK-LABEL: func.func @batched
// CHECK-SAME: attributes {attn.batch_slices = array<i64: 16, 4, 0>}
// CHECK: func.call @__attnc_impl_batched
// CHECK-LABEL: func.func private @__attnc_check_batched
// CHECK-SAME: (%[[A:.*]]: memref<1x4xf32>, %[[LEN:.*]]: memref<1xi32>, %[[W:.*]]: memref<4xf32>) -> i32
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>}
// CHECK: %[[OK:.*]] = arith.constant 0 : i32
// CHECK: memref.load %[[LEN]]
// CHECK: %[[CAP:.*]] = arith.constant 8 : i64
// CHECK: %[[BADSIZE:.*]] = arith.constant 2 : i32
// CHECK: %[[S1:.*]] = arith.select %{{.*}}, %[[BADSIZE]], %[[OK]] : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: memref.extract_aligned_pointer_as_index %[[LEN]]
// CHECK: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: %[[NULL:.*]] = arith.constant 1 : i32
// CHECK: %[[S2:.*]] = arith.select %{{.*}}, %[[NULL]], %[[S1]] : i32
// CHECK: return %[[S2]] : i32
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @batched(%a: memref<1x4xf32>, %len: memref<1xi32> {attn.max_value = 8 : i64},
                     %w: memref<4xf32>) attributes {attn.batch_slices = array<i64: 16, 4, 0>} {
    return
  }
}

// -----

// An output summed over a dynamic batch's entries (attn.batch_sums: the
// bytes of its f32 accumulator): @__attnc_sum_f_k adds an entry's values to
// the accumulator in f32, @__attnc_store_f_k rounds it into the output.
// CHECK-LABEL: func.func @summed
// CHECK-SAME: attn.batch_sums = array<i64: 0, 24>
// CHECK-LABEL: func.func private @__attnc_sum_summed_1
// CHECK-SAME: (%[[PART:.*]]: memref<2x3xbf16>, %[[ACC:.*]]: memref<6xf32>)
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %[[PART]] {{\[\[}}0, 1{{\]\]}}
// CHECK: scf.for %[[E:.*]] =
// CHECK: %[[X:.*]] = memref.load %[[FLAT]][%[[E]]] : memref<6xbf16>
// CHECK: %[[XF:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK: %[[A:.*]] = memref.load %[[ACC]][%[[E]]] : memref<6xf32>
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[XF]] : f32
// CHECK: memref.store %[[S]], %[[ACC]][%[[E]]]
// CHECK-LABEL: func.func private @__attnc_store_summed_1
// CHECK-SAME: (%[[ACC2:.*]]: memref<6xf32>, %[[OUT:.*]]: memref<2x3xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @summed(%a: memref<1x4xf32>, %w: memref<2x3xbf16>)
      attributes {attn.batch_slices = array<i64: 16, 0>, attn.batch_sums = array<i64: 0, 24>,
                  attn.batch_uneven} {
    return
  }
}

// -----

// varlen's offsets (attn.nondecreasing): an entry below the one before it
// (the first: below 0) or past its bound returns BAD_SIZE.
// CHECK-LABEL: func.func @packed_step
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[PREV:.*]] = %c0_i64) -> (i1, i64) {
// CHECK: %[[X:.*]] = arith.extsi
// CHECK: arith.cmpi slt, %[[X]], %[[PREV]] : i64
// CHECK: arith.cmpi sgt, %[[X]], %{{.*}} : i64
// CHECK: scf.yield %{{.*}}, %[[X]] : i1, i64
module attributes {attnc.test.load_llvm = #llvm.linkage<external>} {
  func.func @packed_step(%cu: memref<4xi32> {attn.max_value = 9 : i64, attn.nondecreasing}, %o: memref<4xf32>) {
    return
  }
}
