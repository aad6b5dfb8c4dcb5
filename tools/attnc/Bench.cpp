// attnc bench (see Bench.h).
#include "tools/attnc/Bench.h"

#include "codegen/Spec.h"
#include "dialect/AttnOps.h"
#include "tools/attnc/HostBuffer.h"
#include "tools/attnc/LoadedSpec.h"

#include "attnc/runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <immintrin.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace attnc {
namespace {

using Clock = std::chrono::steady_clock;

double peakRssMb() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

/// FLOPs of one forward call by the project's convention: 4 * pairs * D for
/// attention (2 * pairs * (D + Dv) when they differ), counting only the
/// pairs named masks keep (a mask_mod region keeps them all), plus
/// 2 * M * N * K for projections and the output projection.
double forwardFlops(mlir::func::FuncOp func) {
  double flops = 0;
  auto shape = [](mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
  };
  auto visiblePairs = [](int64_t sq, int64_t skv, bool causal,
                         std::optional<int64_t> window) {
    double pairs = 0;
    for (int64_t i = 0; i < sq; ++i) {
      int64_t hi = skv, lo = 0;
      if (causal || window)
        hi = std::min(hi, i + 1);
      if (window)
        lo = std::max<int64_t>(0, i - *window + 1);
      pairs += double(std::max<int64_t>(0, hi - lo));
    }
    return pairs;
  };
  func.walk([&](mlir::Operation *op) {
    if (auto a = mlir::dyn_cast<attn::AttentionOp>(op)) {
      auto q = shape(a.getQuery()), k = shape(a.getKey()),
           v = shape(a.getValue());
      flops += double(q[0] * q[1]) *
               visiblePairs(q[2], k[2], a.getCausal(), a.getWindow()) * 2 *
               double(q[3] + v[3]);
    } else if (auto s = mlir::dyn_cast<attn::ScoresOp>(op)) {
      auto q = shape(s.getQuery()), k = shape(s.getKey());
      flops += 2.0 * q[0] * q[1] * q[2] * k[2] * q[3];
    } else if (auto a = mlir::dyn_cast<attn::ApplyOp>(op)) {
      auto p = shape(a.getProbs()), v = shape(a.getValue());
      flops += 2.0 * p[0] * p[1] * p[2] * p[3] * v[3];
    } else if (auto p = mlir::dyn_cast<attn::ProjectionOp>(op)) {
      auto x = shape(p.getInput()), w = shape(p.getWeight());
      flops += 2.0 * x[0] * x[1] * x[2] * w[1];
    } else if (auto m = mlir::dyn_cast<attn::MergeOp>(op)) {
      auto w = shape(m.getWeight());
      auto y = shape(m.getResult());
      flops += 2.0 * y[0] * y[1] * w[0] * w[1];
    }
  });
  return flops;
}

/// One thread's FMA throughput (FLOP/s) over `seconds`: 16 independent
/// accumulator chains, as wide as the CPU allows.
__attribute__((target("avx512f"))) double fmaRateAvx512(double seconds) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i)
    acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  int64_t iterations = 0;
  auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int r = 0; r < 1000; ++r)
      for (int i = 0; i < 16; ++i)
        acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    iterations += 1000;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  float sink = 0;
  for (int i = 0; i < 16; ++i)
    sink += _mm512_reduce_add_ps(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return double(iterations) * 16 * 16 * 2 / elapsed;
}

__attribute__((target("avx2,fma"))) double fmaRateAvx2(double seconds) {
  __m256 acc[16];
  for (int i = 0; i < 16; ++i)
    acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  int64_t iterations = 0;
  auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int r = 0; r < 1000; ++r)
      for (int i = 0; i < 16; ++i)
        acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    iterations += 1000;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  float lanes[8], sink = 0;
  for (int i = 0; i < 16; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float x : lanes)
      sink += x;
  }
  volatile float keep = sink;
  (void)keep;
  return double(iterations) * 16 * 8 * 2 / elapsed;
}

/// The machine's f32 FMA peak on `threads` threads, in GFLOP/s: the best of
/// three probes, since a shared VM's neighbours only ever slow one down.
double measurePeakGflops(int threads);

double probePeakGflops(int threads) {
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2)
    return 0;
  std::vector<double> rates(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      rates[t] = avx512 ? fmaRateAvx512(0.3) : fmaRateAvx2(0.3);
    });
  for (std::thread &thread : pool)
    thread.join();
  double total = 0;
  for (double r : rates)
    total += r;
  return total / 1e9;
}

double measurePeakGflops(int threads) {
  double best = 0;
  for (int probe = 0; probe < 3; ++probe)
    best = std::max(best, probePeakGflops(threads));
  return best;
}

struct Timing {
  double medianMs = 0;
  double extraMb = 0;
};

/// The resident set now, in MB.
double currentRssMb() {
  long pages = 0, resident = 0;
  if (FILE *f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    fclose(f);
  }
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

/// Median time of `call` over `reps` runs after two warm-up runs (fresh
/// memory is slow to touch in these VMs), and the memory the first call
/// added at its peak (sampled every millisecond: what the kernel allocates
/// beyond its inputs and outputs; the runtime's cached scratch blocks of
/// earlier calls are freed first, so that this call allocates its own).
template <typename Fn> Timing timeCalls(int reps, Fn call) {
  attnc_workspace_release();
  double before = currentRssMb();
  std::atomic<bool> running{true};
  std::atomic<double> peak{before};
  std::thread sampler([&] {
    while (running.load()) {
      double now = currentRssMb();
      if (now > peak.load())
        peak.store(now);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  call();
  running.store(false);
  sampler.join();
  double extra = std::max(0.0, peak.load() - before);
  call();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    call();
    ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count());
  }
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.medianMs = ms[ms.size() / 2];
  t.extraMb = extra;
  return t;
}

} // namespace

int benchSpec(const std::string &path, const BenchOptions &options,
              llvm::raw_ostream &outs, llvm::raw_ostream &errs) {
  if (options.reps < 1) {
    errs << "attnc: error: --reps must be >= 1\n";
    return 1;
  }
  if (options.threads < 0) {
    errs << "attnc: error: --threads must be >= 1\n";
    return 1;
  }
  // The runtime's pool reads ATTNC_NUM_THREADS when it starts.
  if (options.threads > 0)
    setenv("ATTNC_NUM_THREADS", std::to_string(options.threads).c_str(), 1);
  int threads = options.threads > 0 ? options.threads
                                    : [] {
                                        const char *env =
                                            getenv("ATTNC_NUM_THREADS");
                                        int n = env ? atoi(env) : 0;
                                        return n >= 1 ? n
                                                      : int(sysconf(
                                                            _SC_NPROCESSORS_ONLN));
                                      }();

  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    errs << "attnc: error: cannot read '" << path
         << "': " << file.getError().message() << "\n";
    return 1;
  }
  LoadedSpec loaded(std::move(*file), errs);
  mlir::FailureOr<Spec> spec = loaded.parse();
  if (mlir::failed(spec))
    return 1;
  const KernelSignature &kernel = spec->kernels.front();
  auto func = spec->module->lookupSymbol<mlir::func::FuncOp>(kernel.name);
  double flops = forwardFlops(func);

  jit::Options jitOptions;
  jitOptions.backward = options.backward;
  std::string error;
  auto start = Clock::now();
  auto module = jit::Module::compileFile(path, jitOptions, &error);
  double compileMs =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!module) {
    errs << error;
    return 1;
  }

  std::mt19937_64 rng(1);
  auto makeBuffers = [&](const jit::EntryPoint &entry,
                         std::vector<Buffer> &buffers,
                         std::vector<void *> &pointers) {
    int64_t largest = 1;
    for (const jit::TensorSpec &arg : entry.args)
      for (int64_t d : arg.shape)
        largest = std::max(largest, d);
    buffers.clear();
    buffers.reserve(entry.args.size());
    for (const jit::TensorSpec &arg : entry.args) {
      buffers.emplace_back(arg);
      if (!arg.isOutput)
        fillRandomInput(buffers.back(), rng, largest);
      // Only the kernel's bytes are needed: drop the float64 copy.
      std::vector<double>().swap(buffers.back().values.data);
      // Touch the outputs now, so that the kernel's first call does not
      // count their pages as its own.
      if (arg.isOutput)
        std::fill(buffers.back().bytes.begin(), buffers.back().bytes.end(), 0);
    }
    pointers.clear();
    for (Buffer &buffer : buffers)
      pointers.push_back(buffer.bytes.data());
  };

  double peak = measurePeakGflops(threads);
  std::vector<Buffer> fBuffers, fwdBuffers, bwdBuffers;
  std::vector<void *> fPointers, fwdPointers, bwdPointers;
  makeBuffers(*module->find(kernel.name), fBuffers, fPointers);
  int32_t status = 0;
  Timing forward = timeCalls(options.reps, [&] {
    status |= module->callUnchecked(kernel.name, fPointers).status;
  });

  bool haveBackward = options.backward && module->find(kernel.name + "_bwd");
  Timing fwd, bwd;
  if (haveBackward) {
    makeBuffers(*module->find(kernel.name + "_fwd"), fwdBuffers, fwdPointers);
    makeBuffers(*module->find(kernel.name + "_bwd"), bwdBuffers, bwdPointers);
    fwd = timeCalls(options.reps, [&] {
      status |= module->callUnchecked(kernel.name + "_fwd", fwdPointers).status;
    });
    bwd = timeCalls(options.reps, [&] {
      status |= module->callUnchecked(kernel.name + "_bwd", bwdPointers).status;
    });
  }
  if (status != 0) {
    errs << "attnc: error: a kernel returned status " << status << "\n";
    return 1;
  }

  double fwdGflops = flops / (forward.medianMs * 1e-3) / 1e9;
  double bothMs = fwd.medianMs + bwd.medianMs;
  double bothGflops = 3.5 * flops / (bothMs * 1e-3) / 1e9;
  double rss = peakRssMb();
  if (options.json) {
    outs << "{\"spec\": \"" << path << "\", \"kernel\": \"" << kernel.name
         << "\", \"threads\": " << threads << ", \"compile_ms\": "
         << llvm::format("%.1f", compileMs)
         << ", \"peak_gflops\": " << llvm::format("%.1f", peak)
         << ", \"forward\": {\"median_ms\": "
         << llvm::format("%.3f", forward.medianMs)
         << ", \"gflops\": " << llvm::format("%.2f", fwdGflops)
         << ", \"fraction\": "
         << llvm::format("%.4f", peak > 0 ? fwdGflops / peak : 0.0)
         << ", \"peak_rss_mb\": " << llvm::format("%.1f", rss)
         << ", \"extra_mb\": " << llvm::format("%.1f", forward.extraMb) << "}";
    if (haveBackward)
      outs << ", \"forward_backward\": {\"median_ms\": "
           << llvm::format("%.3f", bothMs)
           << ", \"gflops\": " << llvm::format("%.2f", bothGflops)
           << ", \"fraction\": "
           << llvm::format("%.4f", peak > 0 ? bothGflops / peak : 0.0)
           << ", \"peak_rss_mb\": " << llvm::format("%.1f", rss)
           << ", \"extra_mb\": "
           << llvm::format("%.1f", std::max(fwd.extraMb, bwd.extraMb)) << "}";
    outs << "}\n";
    return 0;
  }
  outs << "@" << kernel.name << " on " << threads << " thread(s), median of "
       << options.reps << " (compiled in " << llvm::format("%.0f", compileMs)
       << " ms)\n"
       << "  measured FMA peak  " << llvm::format("%.1f", peak)
       << " GFLOP/s\n"
       << "  forward            " << llvm::format("%9.3f", forward.medianMs)
       << " ms  " << llvm::format("%8.2f", fwdGflops) << " GFLOP/s  "
       << llvm::format("%5.1f", peak > 0 ? 100 * fwdGflops / peak : 0.0)
       << "% of peak  +" << llvm::format("%.1f", forward.extraMb)
       << " MB beyond inputs and outputs\n";
  if (haveBackward)
    outs << "  forward+backward   " << llvm::format("%9.3f", bothMs)
         << " ms  " << llvm::format("%8.2f", bothGflops) << " GFLOP/s  "
         << llvm::format("%5.1f", peak > 0 ? 100 * bothGflops / peak : 0.0)
         << "% of peak  +"
         << llvm::format("%.1f", std::max(fwd.extraMb, bwd.extraMb))
         << " MB\n";
  outs << "  peak RSS           " << llvm::format("%.1f", rss) << " MB\n";
  return 0;
}

} // namespace attnc
