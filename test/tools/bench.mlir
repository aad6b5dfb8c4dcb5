// attnc bench: one JSON object with the timing of both modes.
// RUN: attnc bench %s --threads 1 --reps 2 --json | FileCheck %s
// RUN: attnc bench %s --threads 1 --reps 1 --no-backward | FileCheck %s --check-prefix=TEXT
// RUN: not attnc bench %s --reps 0 2>&1 | FileCheck %s --check-prefix=REPS

// CHECK: {"spec": "{{.*}}bench.mlir", "kernel": "attn", "threads": 1, "forward_flops": 532480, "compile_ms": {{[0-9.]+}}, "peak_gflops": {{[0-9.]+}}, "bf16_dot_peak_gflops": 0.0, "forward": {"median_ms": {{[0-9.]+}}, "gflops": {{[0-9.]+}}, "fraction": {{[0-9.]+}}, "fraction_of_bf16_dot_peak": 0.0000, "peak_rss_mb": {{[0-9.]+}}, "extra_mb": {{[0-9.]+}}}, "forward_backward": {"median_ms": {{[0-9.]+}}, "gflops": {{[0-9.]+}}, "fraction": {{[0-9.]+}}, "peak_rss_mb": {{[0-9.]+}}, "extra_mb": {{[0-9.]+}}}}
// TEXT: @attn on 1 thread(s), median of 1
// TEXT: forward {{.*}} GFLOP/s {{.*}}% of peak
// TEXT-NOT: forward+backward
// REPS: attnc: error: --reps must be >= 1

// FLOPs are counted on the spec as the kernel computes it: the same causal
// attention written as a graph, or with its mask as a mask_mod region,
// counts the visible pairs only, as the fused op with a named mask does
// (2 heads x 2080 pairs x 4 x 32; the graph form was credited with all
// 4096 pairs).
// RUN: attnc bench %S/Inputs/bench_graph_causal.mlir --threads 1 --reps 1 --no-backward --json | FileCheck %s --check-prefix=SAME-FLOPS
// RUN: attnc bench %S/Inputs/bench_region_causal.mlir --threads 1 --reps 1 --no-backward --json | FileCheck %s --check-prefix=SAME-FLOPS
// SAME-FLOPS: "forward_flops": 532480,

// --fill gives an integer input one value; a cache's lengths bound the
// pairs counted: 2 x 8 heads, rows at positions 84..99 of 100 keys (85 +
// ... + 100 = 1480 pairs) x 2 x (64 + 64).
// RUN: attnc bench %S/Inputs/readme_cache.mlir --threads 1 --reps 1 --no-backward --json --fill len=100 | FileCheck %s --check-prefix=FILL
// FILL: "forward_flops": 6062080,
// RUN: not attnc bench %S/Inputs/readme_cache.mlir --reps 1 --fill lens=100 2>&1 | FileCheck %s --check-prefix=FILL-NAME
// FILL-NAME: attnc: error: --fill lens=100: @chunk has no integer input 'lens'
// RUN: not attnc bench %S/Inputs/readme_cache.mlir --reps 1 --fill len=x 2>&1 | FileCheck %s --check-prefix=FILL-VALUE
// FILL-VALUE: --fill 'len=x': expected NAME=N or NAME=shuffled

func.func @attn(%q: tensor<1x2x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x2x64x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32> -> tensor<1x2x64x32xf32>, tensor<1x2x64xf32>
  return %o : tensor<1x2x64x32xf32>
}

// Statistics have no FLOP count by the attention convention: the rates
// say so (null in JSON) rather than 0 GFLOP/s and 0% of the peak.
// RUN: attnc bench %S/run-stats-given-lse.mlir --threads 1 --reps 1 | FileCheck %s --check-prefix=NO-FLOPS
// RUN: attnc bench %S/run-stats-given-lse.mlir --threads 1 --reps 1 --json | FileCheck %s --check-prefix=NO-FLOPS-JSON
// NO-FLOPS: forward {{[0-9.]+}} ms (no FLOP count for these ops) +{{[0-9.]+}} MB beyond inputs and outputs
// NO-FLOPS: forward+backward {{[0-9.]+}} ms (no FLOP count for these ops) +{{[0-9.]+}} MB
// NO-FLOPS-JSON: "forward_flops": 0,
// NO-FLOPS-JSON-SAME: "forward": {"median_ms": {{[0-9.]+}}, "gflops": null, "fraction": null, "fraction_of_bf16_dot_peak": null,
// NO-FLOPS-JSON-SAME: "forward_backward": {"median_ms": {{[0-9.]+}}, "gflops": null, "fraction": null,
