// RUN: rm -rf %t && split-file --leading-lines %s %t
// RUN: attnc compile %t/layer.mlir --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 -o %t/layer.o --emit-header %t/layer.h
// RUN: llvm-nm %t/layer.o | FileCheck %s --check-prefix=NM
// RUN: FileCheck %s --check-prefix=HEADER < %t/layer.h
// The header with the derived entry points is valid C.
// RUN: %cc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c %t/layer.h
//
// --no-backward: only the spec's own entry point.
// RUN: attnc compile %t/layer.mlir --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 --no-backward -o %t/forward.o --emit-header %t/forward.h
// RUN: llvm-nm %t/forward.o | FileCheck %s --check-prefix=NM-FORWARD
// RUN: FileCheck %s --check-prefix=HEADER-FORWARD < %t/forward.h
//
// A score_mod op without a gradient rule is a located error (and no output)
// unless --no-backward; inside an inlined helper, the error also names the
// call site.
// RUN: not attnc compile %t/sin.mlir --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 -o %t/sin.o --emit-header %t/sin.h 2>&1 | FileCheck %s --check-prefix=SIN
// RUN: not test -e %t/sin.o
// RUN: not test -e %t/sin.h
// RUN: attnc compile %t/sin.mlir --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 --no-backward -o %t/sin.o
// RUN: llvm-nm %t/sin.o | FileCheck %s --check-prefix=NM-SIN
// RUN: not attnc compile %t/cos-helper.mlir --triple=x86_64-unknown-linux-gnu --cpu=x86-64 -O0 -o %t/cos.o 2>&1 | FileCheck %s --check-prefix=COS

// attnc compile inlines (the call of @project) and derives @layer_fwd and
// @layer_bwd: the object defines all three and the header declares them.
// @layer_fwd adds the saved values saved<k> as outputs (the projected Q, then
// attention's O and LSE, which @layer does not return; the header says which
// is which, with the line of its op); @layer_bwd takes the
// inputs, the result y, the saved values and d_y, and writes d_<input> for
// every float input (none for the integer lengths).

// NM-DAG: {{^[0-9a-f]+}} T layer{{$}}
// NM-DAG: {{^[0-9a-f]+}} T layer_fwd{{$}}
// NM-DAG: {{^[0-9a-f]+}} T layer_bwd{{$}}
// NM-NOT: T project

// HEADER: #ifndef ATTNC_KERNEL_LAYER_LAYER_H
// HEADER: int32_t layer(const float *x, const float *wq, const float *wo, const int32_t *len, const float *slopes, float *y);
// HEADER: /* layer_fwd: every pointer
// HEADER-NEXT:  *   x: [1,4,16] f32, input
// HEADER-NEXT:  *   wq: [16,16] f32, input
// HEADER-NEXT:  *   wo: [16,16] f32, input
// HEADER-NEXT:  *   len: [1] i32, input
// HEADER-NEXT:  *   slopes: [2] f32, input
// HEADER-NEXT:  *   y: [1,4,16] f32, output
// HEADER-NEXT:  *   saved0: [1,2,4,8] f32, output: the result of projection #0 (layer.mlir:{{[0-9]+}}), the Q of attention #0{{$}}
// HEADER-NEXT:  *   saved1: [1,2,4,8] f32, output: the output O of attention #0 (layer.mlir:{{[0-9]+}}){{$}}
// HEADER-NEXT:  *   saved2: [1,2,4] f32, output: the LSE (log-sum-exp of each query row's scores) of attention #0 (layer.mlir:{{[0-9]+}}){{$}}
// HEADER: int32_t layer_fwd(const float *x, const float *wq, const float *wo, const int32_t *len, const float *slopes, float *y, float *saved0, float *saved1, float *saved2);
// HEADER: /* layer_bwd: every pointer
// HEADER-NEXT:  *   x: [1,4,16] f32, input
// HEADER-NEXT:  *   wq: [16,16] f32, input
// HEADER-NEXT:  *   wo: [16,16] f32, input
// HEADER-NEXT:  *   len: [1] i32, input
// HEADER-NEXT:  *   slopes: [2] f32, input
// HEADER-NEXT:  *   y: [1,4,16] f32, input
// HEADER-NEXT:  *   saved0: [1,2,4,8] f32, input: the result of projection #0 (layer.mlir:{{[0-9]+}}), the Q of attention #0{{$}}
// HEADER-NEXT:  *   saved1: [1,2,4,8] f32, input: the output O of attention #0 (layer.mlir:{{[0-9]+}}){{$}}
// HEADER-NEXT:  *   saved2: [1,2,4] f32, input: the LSE (log-sum-exp of each query row's scores) of attention #0 (layer.mlir:{{[0-9]+}}){{$}}
// HEADER-NEXT:  *   d_y: [1,4,16] f32, input
// HEADER-NEXT:  *   d_x: [1,4,16] f32, output
// HEADER-NEXT:  *   d_wq: [16,16] f32, output
// HEADER-NEXT:  *   d_wo: [16,16] f32, output
// HEADER-NEXT:  *   d_slopes: [2] f32, output
// HEADER: int32_t layer_bwd(const float *x, const float *wq, const float *wo, const int32_t *len, const float *slopes, const float *y, const float *saved0, const float *saved1, const float *saved2, const float *d_y, float *d_x, float *d_wq, float *d_wo, float *d_slopes);
// HEADER-NOT: d_len
// HEADER: #endif /* ATTNC_KERNEL_LAYER_LAYER_H */

// NM-FORWARD: {{^[0-9a-f]+}} T layer{{$}}
// NM-FORWARD-NOT: layer_fwd
// NM-FORWARD-NOT: layer_bwd

// HEADER-FORWARD: int32_t layer(const float *x, const float *wq, const float *wo, const int32_t *len, const float *slopes, float *y);
// HEADER-FORWARD-NOT: layer_fwd
// HEADER-FORWARD-NOT: layer_bwd

// NM-SIN: {{^[0-9a-f]+}} T wavy{{$}}
// NM-SIN-NOT: wavy_fwd
// NM-SIN-NOT: wavy_bwd

//--- layer.mlir
func.func private @project(%x: tensor<1x4x16xf32>, %w: tensor<16x16xf32>) -> tensor<1x2x4x8xf32> {
  %h = attn.projection %x, %w : tensor<1x4x16xf32>, tensor<16x16xf32> -> tensor<1x2x4x8xf32>
  return %h : tensor<1x2x4x8xf32>
}

func.func @layer(%x: tensor<1x4x16xf32>, %wq: tensor<16x16xf32>, %wo: tensor<16x16xf32>, %len: tensor<1xi32>, %slopes: tensor<2xf32>) -> tensor<1x4x16xf32> {
  %q = func.call @project(%x, %wq) : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x2x4x8xf32>
  %o, %lse = attn.attention %q, %q, %q causal lengths(%len : tensor<1xi32>) score_captures(%slopes : tensor<2xf32>) : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>):
    %m = tensor.extract %sl[%h] : tensor<2xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  %y = attn.merge %o, %wo : tensor<1x2x4x8xf32>, tensor<16x16xf32> -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}

//--- sin.mlir
func.func @wavy(%q: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %o, %lse = attn.attention %q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32> score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    // SIN: sin.mlir:[[@LINE+3]]:10: error: 'math.atan' op has no gradient rule; attn-derive-backward supports addf, subf, mulf, divf, negf, exp, exp2, log, log2, tanh, sqrt, rsqrt, sin, cos, erf, powf, fpowi, absf, maximumf, minimumf, maxnumf, minnumf, select, extf/truncf, constants and casts; or compile with --no-backward (jit::Options::backward = false) for the forward only
    // SIN-NEXT: %r = math.atan %s : f32
    // SIN-NEXT: ^
    %r = math.atan %s : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x1x4x8xf32>
}

//--- cos-helper.mlir
func.func private @wave(%s: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %t = attn.score_mod %s : tensor<1x1x4x4xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
    // COS: cos-helper.mlir:[[@LINE+4]]:10: error: 'math.atan' op has no gradient rule
    // COS-NEXT: %r = math.atan %x : f32
    // COS-NEXT: ^
    // COS-NEXT: cos-helper.mlir:[[@LINE+8]]:8: note: called from
    %r = math.atan %x : f32
    attn.yield %r : f32
  }
  return %t : tensor<1x1x4x4xf32>
}
func.func @k(%q: tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32> {
  %s = attn.scores %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x4xf32>
  %t = func.call @wave(%s) : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %t : tensor<1x1x4x4xf32>
}
