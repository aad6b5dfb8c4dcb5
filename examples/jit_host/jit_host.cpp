// JIT-compiles two attention variants at run time (a causal one and a
// sliding-window one at another sequence length, substituted into the spec
// text by Options::sizes), calls both through the checked JIT API, and
// compares them with a plain float64 attention written below. It needs only
// the installed package's <attnc/jit.h> and attnc::attnc_jit: the
// package-consumer test builds and runs it from an install prefix.
#include <attnc/jit.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 32;

/// O of softmax(Q K^T / sqrt(D) + mask) V in float64, [H, S, D] row-major, B=1,
/// query head h reading KV head h / (H / Hkv) (GQA). Key j is visible to
/// query i when j <= i and, with a window w > 0, i - j < w.
std::vector<double> reference(const std::vector<float> &q,
                              const std::vector<float> &k,
                              const std::vector<float> &v, int64_t seqLen,
                              int64_t window) {
  std::vector<double> o(q.size()), p(seqLen);
  const double scale = double(float(1.0 / std::sqrt(double(kDim))));
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t kvHead = h / (kHeads / kKvHeads);
    for (int64_t i = 0; i < seqLen; ++i) {
      const float *qi = &q[(h * seqLen + i) * kDim];
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = -INFINITY;
        if (window > 0 && i - j >= window)
          continue;
        const float *kj = &k[(kvHead * seqLen + j) * kDim];
        double s = 0;
        for (int64_t d = 0; d < kDim; ++d)
          s += double(qi[d]) * kj[d];
        p[j] = s * scale;
        max = std::max(max, p[j]);
      }
      for (int64_t j = 0; j <= i; ++j)
        sum += p[j] = std::exp(p[j] - max);
      double *oi = &o[(h * seqLen + i) * kDim];
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t d = 0; d < kDim; ++d)
          oi[d] += p[j] / sum * v[(kvHead * seqLen + j) * kDim + d];
    }
  }
  return o;
}

/// The spec of one variant, B=1, H=4, Hkv=2, D=32, with `mask` as
/// attn.attention options (e.g. "causal" or "window 16"). The sequence length
/// is the placeholder ${S}: Options::sizes gives it a value at compile time.
std::string variant(const std::string &mask) {
  const std::string q = "tensor<1x4x${S}x32xf32>",
                    kv = "tensor<1x2x${S}x32xf32>",
                    lse = "tensor<1x4x${S}xf32>";
  return "func.func @attention(%q: " + q + ", %k: " + kv + ", %v: " + kv +
         ") -> " + q + " {\n  %o, %lse = attn.attention %q, %k, %v " + mask +
         " : " + q + ", " + kv + ", " + kv + " -> " + q + ", " + lse +
         "\n  return %o : " + q + "\n}\n";
}

/// Compiles and calls the variant with attn.attention options `mask`
/// ("causal" or "window W"; `window` is W, or 0), and checks it.
int run(int64_t seqLen, const std::string &mask, int64_t window) {
  auto start = std::chrono::steady_clock::now();
  attnc::jit::Options options;
  options.sizes = {{"S", seqLen}};
  std::string error;
  auto module = attnc::jit::Module::compile(variant(mask), options, &error);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  if (!module) {
    std::fprintf(stderr, "compile failed:\n%s\n", error.c_str());
    return 1;
  }

  std::mt19937 rng(seqLen);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(kHeads * seqLen * kDim), k(kKvHeads * seqLen * kDim),
      v(k.size()), o(q.size());
  for (std::vector<float> *t : {&q, &k, &v})
    for (float &x : *t)
      x = uniform(rng);
  attnc::jit::Result result =
      module->forward({{q.data(), {1, kHeads, seqLen, kDim}},
                       {k.data(), {1, kKvHeads, seqLen, kDim}},
                       {v.data(), {1, kKvHeads, seqLen, kDim}},
                       {o.data(), {1, kHeads, seqLen, kDim}}});
  if (!result.ok()) {
    std::fprintf(stderr, "call failed: %s (status %d)\n",
                 result.error.c_str(), result.status);
    return 1;
  }
  // max |o - expected| / max |expected|: a normwise relative error.
  std::vector<double> expected = reference(q, k, v, seqLen, window);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    diff = std::max(diff, std::fabs(o[i] - expected[i]));
    norm = std::max(norm, std::fabs(expected[i]));
  }
  double err = std::isfinite(diff) ? diff / norm : INFINITY;
  std::printf("%-10s S=%-4lld compile %7.1f ms%s  max relative error %.2g  %s\n",
              mask.c_str(), (long long)seqLen, ms,
              module->fromDiskCache() ? " (disk cache)" : "", err,
              err <= 1e-5 ? "ok" : "FAILED");
  return err <= 1e-5 ? 0 : 1;
}

} // namespace

int main() {
  int failures = run(64, "causal", 0) + run(96, "window 16", 16);
  return failures ? 1 : 0;
}
