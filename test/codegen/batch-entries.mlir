// RUN: attnc-opt %s -split-input-file -attn-batch-entries -verify-diagnostics | FileCheck %s

// attn-batch-entries: an entry point of one batch entry (attn.batch_slices:
// 64 bytes of %a per entry, %w shared) becomes @__attnc_slice_f, and @f
// takes the batch after the buffers: BAD_SIZE (2) for a negative one, then
// @__attnc_check_f on every entry's slices, then @__attnc_slice_f on each,
// the first status that is not 0 returned.

// CHECK-LABEL: llvm.func internal @__attnc_slice_f
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}) -> i32 {
// CHECK-LABEL: llvm.func @f
// CHECK-SAME: (%[[A:.*]]: !llvm.ptr {llvm.noalias}, %[[W:.*]]: !llvm.ptr {llvm.noalias}, %[[N:.*]]: i64) -> i32 {
// CHECK-NOT: attn.batch_slices
// CHECK: %[[NEG:.*]] = llvm.icmp "slt" %[[N]], %{{.*}} : i64
// CHECK: %[[BAD:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.cond_br %[[NEG]], ^[[DONE:.*]](%[[BAD]] : i32), ^[[CHECKS:.*]]
// CHECK: ^[[DONE]](%[[STATUS:.*]]: i32):
// CHECK-NEXT: llvm.return %[[STATUS]] : i32
// CHECK: ^[[CHECKS]]:
// CHECK: llvm.icmp "slt" %[[B:.*]], %[[N]] : i64
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK-NEXT: %[[OFF:.*]] = llvm.mul %[[B]], %[[BYTES]] : i64
// CHECK-NEXT: %[[SLICE:.*]] = llvm.getelementptr %[[A]][%[[OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: llvm.call @__attnc_check_f(%[[SLICE]], %[[W]])
// CHECK: llvm.getelementptr %[[A]]
// CHECK-NEXT: llvm.call @__attnc_slice_f(%{{.*}}, %[[W]])
// CHECK: llvm.br ^[[DONE]](%{{.*}} : i32)
module {
  llvm.func internal @__attnc_check_f(%a: !llvm.ptr, %w: !llvm.ptr) -> i32 {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
  llvm.func @f(%a: !llvm.ptr {llvm.noalias}, %w: !llvm.ptr {llvm.noalias}) -> i32
      attributes {attn.batch_slices = array<i64: 64, 0>} {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
}

// -----

// An entry point without its check, or with a size per pointer missing.
module {
  // expected-error @+1 {{'attn.batch_slices' needs an entry point (ptr...) -> i32 with one size per pointer, and its @__attnc_check_g}}
  llvm.func @g(%a: !llvm.ptr) -> i32 attributes {attn.batch_slices = array<i64: 64>} {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
}

// -----

module {
  llvm.func internal @__attnc_check_h(%a: !llvm.ptr, %w: !llvm.ptr) -> i32 {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
  // expected-error @+1 {{one size per pointer}}
  llvm.func @h(%a: !llvm.ptr, %w: !llvm.ptr) -> i32 attributes {attn.batch_slices = array<i64: 64>} {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
}

// -----

// An output summed over the entries (attn.batch_sums, 24 bytes of f32):
// entries in turn only, each writing it into a calloc'd buffer of its own
// that @__attnc_sum_f_1 adds to a calloc'd accumulator, which
// @__attnc_store_f_1 stores into the caller's %w after the last entry; the
// buffers are freed on every way out (OUT_OF_MEMORY, 3, when calloc fails).
// CHECK-LABEL: llvm.func @s
// CHECK-SAME: (%[[A:.*]]: !llvm.ptr, %[[W:.*]]: !llvm.ptr, %[[N:.*]]: i64) -> i32
// CHECK-NOT: attnc_num_threads
// CHECK: %[[PART:.*]] = llvm.call @calloc(
// CHECK: %[[ACC:.*]] = llvm.call @calloc(
// CHECK: llvm.mlir.constant(3 : i32)
// CHECK: llvm.call @free(%[[PART]])
// CHECK: llvm.call @free(%[[ACC]])
// CHECK: llvm.call @__attnc_slice_s(%{{.*}}, %[[PART]])
// CHECK: llvm.call @__attnc_sum_s_1(%[[PART]], %[[ACC]])
// CHECK: llvm.call @__attnc_store_s_1(%[[ACC]], %[[W]])
module {
  llvm.func internal @__attnc_check_s(%a: !llvm.ptr, %w: !llvm.ptr) -> i32 {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
  llvm.func internal @__attnc_sum_s_1(%part: !llvm.ptr, %acc: !llvm.ptr) {
    llvm.return
  }
  llvm.func internal @__attnc_store_s_1(%acc: !llvm.ptr, %out: !llvm.ptr) {
    llvm.return
  }
  llvm.func @s(%a: !llvm.ptr, %w: !llvm.ptr) -> i32
      attributes {attn.batch_slices = array<i64: 16, 0>, attn.batch_sums = array<i64: 0, 24>} {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
}
