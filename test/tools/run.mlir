// attnc run: JIT the spec, run it on random inputs, compare the forward and
// every gradient with the float64 reference (an interpreter of the spec).
// RUN: rm -rf %t && mkdir -p %t
// RUN: env ATTNC_CACHE_DIR=%t attnc run %s --check | FileCheck %s
// A second run finds the object in the disk cache.
// RUN: env ATTNC_CACHE_DIR=%t attnc run %s --check | FileCheck %s --check-prefix=CACHED
// RUN: env ATTNC_CACHE_DIR=%t attnc run %s --no-backward | FileCheck %s --check-prefix=FORWARD
// The help of run and bench says what run prints and where the cache is.
// RUN: attnc run --help | FileCheck %s --check-prefix=HELP
// RUN: attnc bench --help | FileCheck %s --check-prefix=HELP
// HELP: cached {{.*}}$ATTNC_CACHE_DIR, else $XDG_CACHE_HOME/attnc, else ~/.cache/attnc
// RUN: attnc run --help | FileCheck %s --check-prefix=RUN-HELP
// RUN-HELP: each gradient's directional finite-difference check

// Two columns: per-element errors (the outputs'; this spec's gradients have
// no float64 backward of their own: n/a) and the directional
// finite-difference check of each gradient, each explained after the table.
// CHECK: @softcap_alibi: compiled in {{[0-9]+}} ms
// CHECK-NEXT: {{^}}                         per-element  directional FD{{$}}
// CHECK-NEXT: {{^}}  forward   o            {{[0-9.]+}}e-0{{[5-9]$}}
// CHECK-NEXT: {{^}}  forward   lse          {{[0-9.]+}}e-{{(0[5-9]|1[0-9])$}}
// CHECK-NEXT: {{^}}  gradient  d_q          n/a          {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: {{^}}  gradient  d_k          n/a          {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: {{^}}  gradient  d_v          n/a          {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: {{^}}  gradient  d_slopes     n/a          {{[0-9.]+e-[0-9]+$}}
// CHECK-NEXT: {{^}}per-element: max |kernel - float64| over a tensor's elements / max |float64|
// CHECK: {{^}}directional FD: relative error of <gradient, u> against a central finite difference
// CHECK-NOT: FAILED
// CHECK: check passed
// CACHED: @softcap_alibi: compiled in {{[0-9]+}} ms (disk cache)
// CACHED: check passed
// FORWARD: forward   lse
// FORWARD-NOT: gradient  d_
// FORWARD-NOT: directional FD:

func.func @softcap_alibi(%q: tensor<1x4x12x8xf32>, %k: tensor<1x2x20x8xf32>,
                         %v: tensor<1x2x20x4xf32>, %len: tensor<1xi32>,
                         %slopes: tensor<4xf32>)
    -> (tensor<1x4x12x4xf32>, tensor<1x4x12xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal lengths(%len : tensor<1xi32>)
      score_captures(%slopes : tensor<4xf32>)
      : tensor<1x4x12x8xf32>, tensor<1x2x20x8xf32>, tensor<1x2x20x4xf32>
        -> tensor<1x4x12x4xf32>, tensor<1x4x12xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
    %m = tensor.extract %sl[%h] : tensor<4xf32>
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %bias = arith.mulf %m, %df : f32
    %x = arith.addf %s, %bias : f32
    %cap = arith.constant 10.0 : f32
    %y = arith.divf %x, %cap : f32
    %t = math.tanh %y : f32
    %r = arith.mulf %t, %cap : f32
    attn.yield %r : f32
  }
  return %o, %lse : tensor<1x4x12x4xf32>, tensor<1x4x12xf32>
}
