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
