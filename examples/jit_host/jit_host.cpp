// JIT-compiles two attention variants at run time (a causal one and a
// sliding-window one at another sequence length, substituted into the spec
// text by Options::sizes), calls both through the checked JIT API, and
// compares them with the float64 reference (tools/reference, the
// repository's oracle: not part of the installed package).
#include "attnc/jit.h"
#include "tools/reference/Reference.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

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

int run(int64_t seqLen, const std::string &mask,
        const attnc::ref::MaskSpec &refMask) {
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

  std::vector<double> q(4 * seqLen * 32), k(2 * seqLen * 32), v(k.size());
  attnc::ref::fillRandom(q.data(), q.size(), 1);
  attnc::ref::fillRandom(k.data(), k.size(), 2);
  attnc::ref::fillRandom(v.data(), v.size(), 3);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()),
      vf(v.begin(), v.end()), o(q.size());
  attnc::jit::Result result = module->forward(
      {{qf.data(), {1, 4, seqLen, 32}},
       {kf.data(), {1, 2, seqLen, 32}},
       {vf.data(), {1, 2, seqLen, 32}},
       {o.data(), {1, 4, seqLen, 32}}});
  if (!result.ok()) {
    std::fprintf(stderr, "call failed: %s (status %d)\n",
                 result.error.c_str(), result.status);
    return 1;
  }
  std::vector<double> expected(o.size());
  attnc::ref::attentionForward({1, 4, 2, seqLen, seqLen, 32, 32},
                               double(float(attnc::ref::defaultScale(32))),
                               refMask, {}, q.data(), k.data(), v.data(),
                               expected.data(), nullptr);
  double err =
      attnc::ref::maxRelativeError(o.data(), expected.data(), o.size());
  std::printf("%-10s S=%-4lld compile %7.1f ms%s  max relative error %.2g  %s\n",
              mask.c_str(), (long long)seqLen, ms,
              module->fromDiskCache() ? " (disk cache)" : "", err,
              err <= 1e-5 ? "ok" : "FAILED");
  return err <= 1e-5 ? 0 : 1;
}

} // namespace

int main() {
  attnc::ref::MaskSpec causal, window;
  causal.causal = true;
  window.window = 16;
  int failures = run(64, "causal", causal) + run(96, "window 16", window);
  return failures ? 1 : 0;
}
