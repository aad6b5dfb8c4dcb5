// RUN: attnc-opt %s -attnc-cpu-pipeline | FileCheck %s \
// RUN:   --implicit-check-not=func.func --implicit-check-not=func.call \
// RUN:   --implicit-check-not=memref. --implicit-check-not=linalg. \
// RUN:   --implicit-check-not=scf. --implicit-check-not=cf. \
// RUN:   --implicit-check-not=arith. --implicit-check-not=math. \
// RUN:   --implicit-check-not=attn. --implicit-check-not=unrealized_conversion_cast \
// RUN:   --implicit-check-not=llvm.fpext --implicit-check-not=llvm.fptrunc

// The whole CPU pipeline: only LLVM dialect is left, entry points take bare
// pointers (no memref descriptors) and return an i32 status, and bf16
// conversions are integer ops (no fpext/fptrunc, so no libgcc helpers).

// CHECK-LABEL: llvm.func internal @__attnc_impl_softcap
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-NOT: -> i32
// CHECK-SAME: {
// CHECK: llvm.bitcast %{{.*}} : bf16 to i16
// CHECK: llvm.intr.tanh
// CHECK: llvm.intr.exp
// CHECK: llvm.bitcast %{{.*}} : i16 to bf16
// CHECK: llvm.return
// CHECK-NEXT: }

// CHECK-LABEL: llvm.func @softcap
// CHECK-SAME: (%[[A0:.*]]: !llvm.ptr {llvm.noalias}, %[[A1:.*]]: !llvm.ptr {llvm.noalias}, %[[A2:.*]]: !llvm.ptr {llvm.noalias}, %[[A3:.*]]: !llvm.ptr {llvm.noalias}, %[[A4:.*]]: !llvm.ptr {llvm.noalias}) -> i32 {
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.constant(0 : index) : i64
// CHECK-DAG: %[[P0:.*]] = llvm.ptrtoint %[[A0]] : !llvm.ptr to i64
// CHECK-DAG: llvm.icmp "eq" %[[P0]], %[[NULL]] : i64
// CHECK-DAG: %[[P4:.*]] = llvm.ptrtoint %[[A4]] : !llvm.ptr to i64
// CHECK-DAG: llvm.icmp "eq" %[[P4]], %[[NULL]] : i64
// CHECK: llvm.cond_br
// CHECK: llvm.call @__attnc_impl_softcap(%[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[A4]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.return %{{.*}} : i32
// CHECK-NEXT: }

// The private helper is lowered but not exported.
// CHECK-LABEL: llvm.func internal @__attnc_impl_plain
// CHECK: llvm.call @square(
// CHECK-LABEL: llvm.func @plain
// CHECK-SAME: (%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}) -> i32
// CHECK: llvm.call @__attnc_impl_plain(
// CHECK: llvm.return %{{.*}} : i32
// CHECK-LABEL: @square
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.fmul
// CHECK-NOT: llvm.func @__attnc_impl_square

func.func @softcap(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x1x6x8xbf16>, %v: tensor<1x1x6x8xbf16>, %len: tensor<1xi64>)
    -> tensor<1x2x4x8xbf16> {
  %o, %lse = attn.attention %q, %k, %v lengths(%len : tensor<1xi64>)
      : tensor<1x2x4x8xbf16>, tensor<1x1x6x8xbf16>, tensor<1x1x6x8xbf16> -> tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
      score_mod {
  ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x4x8xbf16>
}

func.func @plain(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = func.call @square(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func private @square(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %y = linalg.mul ins(%x, %x : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
