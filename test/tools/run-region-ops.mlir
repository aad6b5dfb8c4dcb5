// attnc run's float64 reference evaluates every op a region may hold:
// integer ops at their width through their folders (unsigned division and
// remainder, shifts, truncation), scf.if and scf.for, and floats computed
// from indices alone, which the backward takes as constants (they needed
// a gradient rule, e.g. math.floor, and arith.remui could not be
// evaluated by the reference at all).
// RUN: attnc run %s --check | FileCheck %s

// CHECK: @unsigned_and_shifts: compiled
// CHECK: forward   o            {{[0-9.]+e-(0[6-9]|1[0-9])}}
// CHECK: gradient  d_q          {{(n/a|[0-9.]+e[-+][0-9]+) +}}{{[0-9.]+e-(0[5-9]|1[0-9])}}
func.func @unsigned_and_shifts(%q: tensor<1x2x20x16xf32>, %k: tensor<1x2x24x16xf32>, %v: tensor<1x2x24x16xf32>) -> tensor<1x2x20x16xf32> {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x2x20x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32> -> tensor<1x2x20x16xf32>, tensor<1x2x20xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c3 = arith.constant 3 : index
    %d = arith.subi %i, %j : index
    %q3 = arith.divui %d, %c3 : index
    %w = arith.index_cast %q3 : index to i64
    %lo = arith.trunci %w : i64 to i8
    %x = arith.uitofp %lo : i8 to f32
    %y = math.floor %x : f32
    %m = arith.remui %j, %c3 : index
    %sh = arith.shli %m, %h : index
    %t = arith.index_castui %sh : index to i32
    %z = arith.uitofp %t : i32 to f32
    %tenth = arith.constant 0.01 : f32
    %yz = arith.addf %y, %z : f32
    %bias = arith.mulf %yz, %tenth : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x20x16xf32>
}

// CHECK: @control_flow: compiled
// CHECK: forward   o            {{[0-9.]+e-(0[6-9]|1[0-9])}}
// CHECK: check passed
func.func @control_flow(%q: tensor<1x2x20x16xf32>, %k: tensor<1x2x24x16xf32>, %v: tensor<1x2x24x16xf32>) -> tensor<1x2x20x16xf32> {
  %o, %lse = attn.attention %q, %k, %v
      : tensor<1x2x20x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32> -> tensor<1x2x20x16xf32>, tensor<1x2x20xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    %m = arith.remui %j, %c7 : index
    %mi = arith.index_cast %m : index to i32
    %x = arith.sitofp %mi : i32 to f32
    %even = arith.cmpi eq, %m, %c0 : index
    %y = scf.if %even -> f32 {
      %half = arith.constant 0.5 : f32
      %z = arith.mulf %x, %half : f32
      scf.yield %z : f32
    } else {
      %acc0 = arith.constant 0.0 : f32
      %sum = scf.for %it = %c0 to %m step %c1 iter_args(%acc = %acc0) -> f32 {
        %n = arith.addf %acc, %x : f32
        scf.yield %n : f32
      }
      scf.yield %sum : f32
    }
    %tenth = arith.constant 0.1 : f32
    %bias = arith.mulf %y, %tenth : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }
  return %o : tensor<1x2x20x16xf32>
}

// Math without an LLVM intrinsic (asinh; erf on f16) on the flash kernel's
// lanes: libm calls lane by lane, lowered before the vectors are (they
// failed with "missing LLVMTranslationDialectInterface for vector.extract").
// RUN: attnc run %S/Inputs/asinh_flash.mlir --check --no-backward | FileCheck %s --check-prefix=LIBM
// RUN: attnc run %S/Inputs/erf_f16_flash.mlir --check --no-backward | FileCheck %s --check-prefix=LIBM
// LIBM: forward   o
// LIBM: check passed
