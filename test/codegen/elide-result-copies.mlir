// RUN: attnc-opt %s -split-input-file -attn-elide-result-copies | FileCheck %s

// A result that comes from a call: the call writes the out-param.
// CHECK-LABEL: func.func @from_call
// CHECK-SAME: (%[[Q:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>)
// CHECK: %[[SAVED:.*]] = memref.alloc() : memref<2xf32>
// CHECK-NEXT: call @fwd(%[[Q]], %[[OUT]], %[[SAVED]])
// CHECK-NOT: memref.copy
// CHECK: return
func.func private @fwd(memref<4xf32>, memref<4xf32>, memref<2xf32>)
func.func @from_call(%q: memref<4xf32>, %out: memref<4xf32>) {
  %o = memref.alloc() : memref<4xf32>
  %saved = memref.alloc() : memref<2xf32>
  call @fwd(%q, %o, %saved) : (memref<4xf32>, memref<4xf32>, memref<2xf32>) -> ()
  memref.copy %o, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// The same buffer returned twice: one out-param takes the call's writes,
// the other is a copy of it.
// CHECK-LABEL: func.func @twice
// CHECK-SAME: (%[[Q:.*]]: memref<4xf32>, %[[OUT0:.*]]: memref<4xf32>, %[[OUT1:.*]]: memref<4xf32>)
// CHECK-NEXT: call @fwd(%[[Q]], %[[OUT1]])
// CHECK-NEXT: memref.copy %[[OUT1]], %[[OUT0]]
// CHECK-NEXT: return
func.func private @fwd(memref<4xf32>, memref<4xf32>)
func.func @twice(%q: memref<4xf32>, %out0: memref<4xf32>, %out1: memref<4xf32>) {
  %o = memref.alloc() : memref<4xf32>
  call @fwd(%q, %o) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %o, %out0 : memref<4xf32> to memref<4xf32>
  memref.copy %o, %out1 : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Kept: the out-param is also read (an output that is an input too), the
// buffer is used after the copy, or it has another layout.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: memref.copy
func.func private @fwd(memref<4xf32>, memref<4xf32>)
func.func @kept(%q: memref<4xf32>, %out0: memref<4xf32>, %out1: memref<4xf32>,
                %out2: memref<4xf32, strided<[2]>>) {
  %a = memref.alloc() : memref<4xf32>
  call @fwd(%out0, %a) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %a, %out0 : memref<4xf32> to memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  call @fwd(%q, %b) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %b, %out1 : memref<4xf32> to memref<4xf32>
  call @fwd(%b, %q) : (memref<4xf32>, memref<4xf32>) -> ()
  %c = memref.alloc() : memref<4xf32>
  call @fwd(%q, %c) : (memref<4xf32>, memref<4xf32>) -> ()
  memref.copy %c, %out2 : memref<4xf32> to memref<4xf32, strided<[2]>>
  return
}
