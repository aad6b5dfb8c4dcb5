// attnc bench (see Bench.h).
#include "tools/attnc/Bench.h"

#include "codegen/Spec.h"
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "passes/MaskAnalysis.h"
#include "passes/Passes.h"
#include "tools/attnc/HostBuffer.h"
#include "tools/attnc/LoadedSpec.h"

#include "attnc/runtime.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <immintrin.h>
#include <map>
#include <numeric>
#include <optional>
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

/// The value --fill gives input `name`, if any.
std::optional<int64_t> fillOf(const BenchOptions &options,
                              const std::string &name) {
  for (const auto &[input, value] : options.fills)
    if (input == name)
      return value;
  return std::nullopt;
}

/// FLOPs of one forward call by the project's convention: 4 * pairs * D for
/// attention (2 * pairs * (D + Dv) when they differ), counting only the
/// pairs the named masks keep (a mask_mod region keeps them all), plus
/// 2 * M * N * K for projections and the output projection. Counted on
/// the spec as the kernels compute it (after attn-fuse: benchSpec), with
/// mask_mod regions that are causal or window masks made named ones, so
/// that one attention written two ways counts the same.
/// `keysOf(lengths)` gives the keys every batch has when --fill sets an
/// attention's lengths argument (the pairs are counted up to them).
double forwardFlops(
    mlir::func::FuncOp func,
    const std::function<std::optional<int64_t>(mlir::Value)> &keysOf) {
  double flops = 0;
  // A cache's rows sit at the end of its keys (all Skv of them counted).
  auto visiblePairs = [](int64_t sq, int64_t skv, bool causal,
                         std::optional<int64_t> window, bool cache) {
    double pairs = 0;
    for (int64_t i = 0; i < sq; ++i) {
      int64_t hi = skv, lo = 0, pos = cache ? skv - sq + i : i;
      if (causal || window)
        hi = std::min(hi, pos + 1);
      if (window)
        lo = std::max<int64_t>(0, pos - *window + 1);
      pairs += double(std::max<int64_t>(0, hi - lo));
    }
    return pairs;
  };
  func.walk([&](mlir::Operation *op) {
    if (auto a = mlir::dyn_cast<attn::AttentionOp>(op)) {
      promoteMaskMod(a);
      auto q = shapeOf(a.getQuery()), v = shapeOf(a.getValue());
      int64_t keys = attn::keyCountOf(a);
      if (a.getLengths())
        if (std::optional<int64_t> n = keysOf(a.getLengths()))
          keys = std::clamp<int64_t>(*n, 0, attn::keyCountOf(a));
      flops += double(q[0] * q[1]) *
               visiblePairs(q[2], keys, a.getCausal(), a.getWindow(),
                            a.getCache()) *
               2 *
               double(q[3] + v[3]);
    } else if (auto s = mlir::dyn_cast<attn::ScoresOp>(op)) {
      auto q = shapeOf(s.getQuery()), k = shapeOf(s.getKey());
      flops += 2.0 * q[0] * q[1] * q[2] * k[2] * q[3];
    } else if (auto a = mlir::dyn_cast<attn::ApplyOp>(op)) {
      auto p = shapeOf(a.getProbs()), v = shapeOf(a.getValue());
      flops += 2.0 * p[0] * p[1] * p[2] * p[3] * v[3];
    } else if (auto p = mlir::dyn_cast<attn::ProjectionOp>(op)) {
      auto x = shapeOf(p.getInput()), w = shapeOf(p.getWeight());
      flops += 2.0 * x[0] * x[1] * x[2] * w[1];
    } else if (auto m = mlir::dyn_cast<attn::MergeOp>(op)) {
      auto w = shapeOf(m.getWeight());
      auto y = shapeOf(m.getResult());
      flops += 2.0 * y[0] * y[1] * w[0] * w[1];
    }
  });
  return flops;
}

/// Whether `func` holds an attention of bf16 Q (after fusion).
bool hasBf16Attention(mlir::func::FuncOp func) {
  bool bf16 = false;
  func.walk([&](attn::AttentionOp op) {
    bf16 |= elementTypeOf(op.getQuery()).isBF16();
  });
  return bf16;
}

/// One thread's throughput (FLOP/s) over `seconds`: `round` (16
/// independent accumulator chains, `flopsPerRound` in all) run in batches
/// of 1000 until the time is up. Inlined, with `round`, into a function
/// that sets the target, so that its vector operations are that target's.
template <typename Round>
[[gnu::always_inline]] inline double
timeRounds(double seconds, double flopsPerRound, Round round) {
  int64_t rounds = 0;
  auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int r = 0; r < 1000; ++r)
      round();
    rounds += 1000;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return double(rounds) * flopsPerRound / elapsed;
}

/// 16 chains of Lanes-float FMAs (`acc * a + b`: one vector FMA of that
/// width in the caller's target).
template <int Lanes>
[[gnu::always_inline]] inline double fmaRate(double seconds) {
  typedef float Vector __attribute__((vector_size(4 * Lanes)));
  Vector acc[16];
  for (int i = 0; i < 16; ++i)
    acc[i] = Vector{} + float(i);
  const Vector a = Vector{} + 0.999999f, b = Vector{} + 1e-7f;
  double rate = timeRounds(
      seconds, 16 * Lanes * 2, [&]() __attribute__((always_inline)) {
        for (int i = 0; i < 16; ++i)
          acc[i] = acc[i] * a + b;
      });
  float sink = 0;
  for (int i = 0; i < 16; ++i)
    for (int lane = 0; lane < Lanes; ++lane)
      sink += acc[i][lane];
  volatile float keep = sink;
  (void)keep;
  return rate;
}

__attribute__((target("avx512f"))) double fmaRateAvx512(double seconds) {
  return fmaRate<16>(seconds);
}

__attribute__((target("avx2,fma"))) double fmaRateAvx2(double seconds) {
  return fmaRate<8>(seconds);
}

/// One thread's AVX-512 BF16 throughput (FLOP/s): 16 chains of vdpbf16ps,
/// each adding 32 bf16 products (64 FLOP) into 16 f32 lanes, the
/// instruction of the forwards' dot_bf16 products.
__attribute__((target("avx512f,avx512bf16"))) double
dotRateAvx512Bf16(double seconds) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i)
    acc[i] = _mm512_set1_ps(float(i));
  const __m512bh a =
      _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  double rate = timeRounds(
      seconds, 16 * 64, [&]() __attribute__((target("avx512f,avx512bf16"))) {
        for (int i = 0; i < 16; ++i)
          acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
      });
  float sink = 0;
  for (int i = 0; i < 16; ++i)
    sink += _mm512_reduce_add_ps(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return rate;
}

/// The f32 FMA rate, or with `bf16Dot` the AVX-512 BF16 one (0 where the
/// CPU lacks it), summed over `threads` threads, in GFLOP/s.
double probePeakGflops(int threads, bool bf16Dot) {
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (bf16Dot ? !__builtin_cpu_supports("avx512bf16") : !avx512 && !avx2)
    return 0;
  std::vector<double> rates(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      rates[t] = bf16Dot  ? dotRateAvx512Bf16(0.3)
                 : avx512 ? fmaRateAvx512(0.3)
                          : fmaRateAvx2(0.3);
    });
  for (std::thread &thread : pool)
    thread.join();
  double total = 0;
  for (double r : rates)
    total += r;
  return total / 1e9;
}

/// The machine's f32 FMA peak (or with `bf16Dot` its AVX-512 BF16 peak, 0
/// without) on `threads` threads, in GFLOP/s: the best of three probes,
/// since a shared VM's neighbours only ever slow one down.
double measurePeakGflops(int threads, bool bf16Dot) {
  double best = 0;
  for (int probe = 0; probe < 3; ++probe)
    best = std::max(best, probePeakGflops(threads, bf16Dot));
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

/// The threads the kernels will run on: `requested` when given, which the
/// runtime's pool then reads from ATTNC_NUM_THREADS when it starts; else
/// ATTNC_NUM_THREADS; else one per core.
int resolveThreads(int requested) {
  if (requested > 0) {
    setenv("ATTNC_NUM_THREADS", std::to_string(requested).c_str(), 1);
    return requested;
  }
  const char *env = getenv("ATTNC_NUM_THREADS");
  int n = env ? atoi(env) : 0;
  return n >= 1 ? n : int(sysconf(_SC_NPROCESSORS_ONLN));
}

/// The arguments of one entry point: random inputs and touched outputs, as
/// the kernel's bytes only.
struct Arguments {
  std::vector<Buffer> buffers;
  std::vector<void *> pointers;
};

/// `bounds`: what the entries of an integer input must satisfy, by name (a
/// cache's lengths: its capacity; varlen's offsets: sorted, up to Skv).
Arguments makeArguments(const jit::EntryPoint &entry, std::mt19937_64 &rng,
                        const BenchOptions &options,
                        const std::map<std::string, InputBound> &bounds) {
  int64_t largest = largestDimension(entry);
  Arguments arguments;
  arguments.buffers.reserve(entry.args.size());
  for (const jit::TensorSpec &arg : entry.args) {
    arguments.buffers.emplace_back(arg);
    Buffer &buffer = arguments.buffers.back();
    if (std::optional<int64_t> value = fillOf(options, arg.name);
        value && !arg.isOutput) {
      std::fill(buffer.values.data.begin(), buffer.values.data.end(),
                double(*value));
      buffer.pack();
    } else if (llvm::is_contained(options.shuffled, arg.name) &&
               !arg.isOutput) {
      std::vector<double> &values = buffer.values.data;
      std::iota(values.begin(), values.end(), 0.0);
      std::shuffle(values.begin(), values.end(), rng);
      buffer.pack();
    } else if (!arg.isOutput) {
      auto bound = bounds.find(arg.name);
      if (bound == bounds.end())
        fillRandomInput(buffer, rng, largest);
      else
        fillRandomInput(buffer, rng, std::min(largest, bound->second.max),
                        bound->second.sorted);
    }
    // Only the kernel's bytes are needed: drop the float64 copy.
    std::vector<double>().swap(buffer.values.data);
    // Touch the outputs now, so that the kernel's first call does not
    // count their pages as its own.
    if (arg.isOutput)
      std::fill(buffer.bytes.begin(), buffer.bytes.end(), 0);
  }
  for (Buffer &buffer : arguments.buffers)
    arguments.pointers.push_back(buffer.bytes.data());
  return arguments;
}

/// What attnc bench measured of a spec's first kernel.
struct Measurements {
  std::string spec, kernel;
  int threads = 0, reps = 0;
  double compileMs = 0, flops = 0, peakGflops = 0, peakRssMb = 0;
  /// For a spec with a bf16 attention on a CPU with AVX-512 BF16: that
  /// peak, which its dot_bf16 forward is measured against too (0: none).
  double bf16DotPeakGflops = 0;
  Timing forward; // @f
  bool haveBackward = false;
  Timing fwd, bwd; // <f>_fwd and <f>_bwd, when haveBackward

  double forwardGflops() const {
    return flops / (forward.medianMs * 1e-3) / 1e9;
  }
  double bothMs() const { return fwd.medianMs + bwd.medianMs; }
  /// A backward costs 2.5 forwards by the FLOP convention.
  double bothGflops() const { return 3.5 * flops / (bothMs() * 1e-3) / 1e9; }
  double bothExtraMb() const { return std::max(fwd.extraMb, bwd.extraMb); }
};

/// Times @f and, with a backward, <f>_fwd and <f>_bwd, each on its own
/// random arguments. Returns the statuses the calls returned, ORed.
int32_t timeKernels(const jit::Module &module, const BenchOptions &options,
                    const std::map<std::string, InputBound> &bounds,
                    Measurements &m) {
  int reps = options.reps;
  std::mt19937_64 rng(1);
  int32_t status = 0;
  auto time = [&](const std::string &name, Arguments &arguments) {
    return timeCalls(reps, [&] {
      status |= module.callUnchecked(name, arguments.pointers).status;
    });
  };
  // An entry point of a dynamic batch takes its size after the tensors.
  auto argumentsOf = [&](const std::string &name) {
    const jit::EntryPoint &entry = *module.find(name);
    Arguments arguments =
        makeArguments(entry.atBatch(options.batch), rng, options, bounds);
    if (entry.batched())
      arguments.pointers.push_back(
          reinterpret_cast<void *>(intptr_t(options.batch)));
    return arguments;
  };
  Arguments f = argumentsOf(m.kernel);
  m.forward = time(m.kernel, f);
  if (m.haveBackward) {
    Arguments fwd = argumentsOf(m.kernel + "_fwd");
    Arguments bwd = argumentsOf(m.kernel + "_bwd");
    m.fwd = time(m.kernel + "_fwd", fwd);
    m.bwd = time(m.kernel + "_bwd", bwd);
  }
  return status;
}

/// gflops / of as JSON with `digits` decimals: 0 where `of` is 0 (no such
/// peak), null where the spec's ops have no FLOP count (forwardFlops:
/// statistics and distillations, whose work is not attention's).
std::string jsonRate(const Measurements &m, double gflops, double of,
                     int digits) {
  if (m.flops == 0)
    return "null";
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format(digits == 2 ? "%.2f" : "%.4f",
                                                 of > 0 ? gflops / of : 0.0);
  return text;
}

void printJson(const Measurements &m, llvm::raw_ostream &outs) {
  const double peak = m.peakGflops;
  outs << "{\"spec\": \"" << m.spec << "\", \"kernel\": \"" << m.kernel
       << "\", \"threads\": " << m.threads
       << ", \"forward_flops\": " << llvm::format("%.0f", m.flops)
       << ", \"compile_ms\": " << llvm::format("%.1f", m.compileMs)
       << ", \"peak_gflops\": " << llvm::format("%.1f", peak)
       << ", \"bf16_dot_peak_gflops\": "
       << llvm::format("%.1f", m.bf16DotPeakGflops)
       << ", \"forward\": {\"median_ms\": "
       << llvm::format("%.3f", m.forward.medianMs)
       << ", \"gflops\": " << jsonRate(m, m.forwardGflops(), 1.0, 2)
       << ", \"fraction\": " << jsonRate(m, m.forwardGflops(), peak, 4)
       << ", \"fraction_of_bf16_dot_peak\": "
       << jsonRate(m, m.forwardGflops(), m.bf16DotPeakGflops, 4)
       << ", \"peak_rss_mb\": " << llvm::format("%.1f", m.peakRssMb)
       << ", \"extra_mb\": " << llvm::format("%.1f", m.forward.extraMb) << "}";
  if (m.haveBackward)
    outs << ", \"forward_backward\": {\"median_ms\": "
         << llvm::format("%.3f", m.bothMs())
         << ", \"gflops\": " << jsonRate(m, m.bothGflops(), 1.0, 2)
         << ", \"fraction\": " << jsonRate(m, m.bothGflops(), peak, 4)
         << ", \"peak_rss_mb\": " << llvm::format("%.1f", m.peakRssMb)
         << ", \"extra_mb\": " << llvm::format("%.1f", m.bothExtraMb()) << "}";
  outs << "}\n";
}

void printText(const Measurements &m, llvm::raw_ostream &outs) {
  const double peak = m.peakGflops;
  outs << "@" << m.kernel << " on " << m.threads << " thread(s), median of "
       << m.reps << " (compiled in " << llvm::format("%.0f", m.compileMs)
       << " ms)\n"
       << "  measured FMA peak  " << llvm::format("%.1f", peak) << " GFLOP/s\n";
  if (m.bf16DotPeakGflops > 0)
    outs << "  measured BF16 dot peak  "
         << llvm::format("%.1f", m.bf16DotPeakGflops)
         << " GFLOP/s (vdpbf16ps: bf16 forwards' dot_bf16 products)\n";
  // The rate and its share of the peak, or a note where the spec's ops have
  // no FLOP count (forwardFlops).
  auto rate = [&](double gflops) {
    if (m.flops == 0)
      outs << "  (no FLOP count for these ops)";
    else
      outs << "  " << llvm::format("%8.2f", gflops) << " GFLOP/s  "
           << llvm::format("%5.1f", peak > 0 ? 100 * gflops / peak : 0.0)
           << "% of peak";
  };
  outs << "  forward            " << llvm::format("%9.3f", m.forward.medianMs)
       << " ms";
  rate(m.forwardGflops());
  if (m.bf16DotPeakGflops > 0 && m.flops > 0)
    outs << " ("
         << llvm::format("%.1f", 100 * m.forwardGflops() / m.bf16DotPeakGflops)
         << "% of the BF16 dot peak)";
  outs << "  +" << llvm::format("%.1f", m.forward.extraMb)
       << " MB beyond inputs and outputs\n";
  if (m.haveBackward) {
    outs << "  forward+backward   " << llvm::format("%9.3f", m.bothMs())
         << " ms";
    rate(m.bothGflops());
    outs << "  +" << llvm::format("%.1f", m.bothExtraMb()) << " MB\n";
  }
  outs << "  peak RSS           " << llvm::format("%.1f", m.peakRssMb)
       << " MB\n";
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
  Measurements m;
  m.spec = path;
  m.reps = options.reps;
  m.threads = resolveThreads(options.threads);

  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    errs << "attnc: error: cannot read '" << path
         << "': " << file.getError().message() << "\n";
    return 1;
  }
  LoadedSpec loaded(std::move(*file), errs);
  mlir::FailureOr<Spec> spec = loaded.parseAtBatch(options.batch, errs);
  if (mlir::failed(spec))
    return 1;
  m.kernel = spec->kernels.front().name;
  // The graph form fused as the kernels' pipeline fuses it.
  mlir::PassManager graph(&loaded.getContext());
  buildGraphPipeline(graph, /*fuse=*/true, /*backward=*/false);
  if (mlir::failed(graph.run(*spec->module)))
    return 1;
  const KernelSignature &signature = spec->kernels.front();
  m.flops = forwardFlops(
      spec->module->lookupSymbol<mlir::func::FuncOp>(m.kernel),
      [&](mlir::Value lengths) -> std::optional<int64_t> {
        auto arg = mlir::dyn_cast<mlir::BlockArgument>(lengths);
        if (!arg || arg.getArgNumber() >= signature.args.size())
          return std::nullopt;
        return fillOf(options, signature.args[arg.getArgNumber()].name);
      });

  jit::Options jitOptions;
  jitOptions.backward = options.backward;
  std::string error;
  auto start = Clock::now();
  auto module = jit::Module::compileFile(path, jitOptions, &error);
  m.compileMs =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!module) {
    errs << error;
    return 1;
  }

  m.peakGflops = measurePeakGflops(m.threads, /*bf16Dot=*/false);
  if (hasBf16Attention(
          spec->module->lookupSymbol<mlir::func::FuncOp>(m.kernel)))
    m.bf16DotPeakGflops = measurePeakGflops(m.threads, /*bf16Dot=*/true);
  m.haveBackward = options.backward && module->find(m.kernel + "_bwd");
  const jit::EntryPoint &entry = *module->find(m.kernel);
  std::vector<std::pair<std::string, std::string>> given;
  for (const auto &[name, value] : options.fills)
    given.emplace_back(name, std::to_string(value));
  for (const std::string &name : options.shuffled)
    given.emplace_back(name, "shuffled");
  for (const auto &[name, value] : given) {
    // (A named copy: a lambda may not capture a structured binding in C++17.)
    const std::string &wanted = name;
    auto arg = llvm::find_if(entry.args, [&](const jit::TensorSpec &a) {
      return a.name == wanted && !a.isOutput;
    });
    if (arg == entry.args.end() || isFloat(arg->dtype)) {
      errs << "attnc: error: --fill " << name << "=" << value << ": @"
           << m.kernel << " has no integer input '" << name << "'\n";
      return 1;
    }
  }
  std::map<std::string, InputBound> bounds;
  for (auto [n, bound] : integerInputBounds(
           spec->module->lookupSymbol<mlir::func::FuncOp>(m.kernel)))
    bounds[signature.args[n].name] = bound;
  if (int32_t status = timeKernels(*module, options, bounds, m)) {
    errs << "attnc: error: a kernel returned status " << status << "\n";
    return 1;
  }
  m.peakRssMb = peakRssMb();
  if (options.json)
    printJson(m, outs);
  else
    printText(m, outs);
  return 0;
}

} // namespace attnc
