// Links the example kernels compiled at build time by attnc and checks each
// against the float64 reference on random inputs.
#include "alibi.h"
#include "gqa_window.h"
#include "mha_causal.h"
#include "softcap_padding.h"

#include "tools/reference/Reference.h"

#include <cmath>
#include <cstdio>
#include <vector>

using namespace attnc::ref;

namespace {

std::vector<double> random(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> data(n);
  fillRandom(data.data(), n, seed, -scale, scale);
  return data;
}

std::vector<float> toFloat(const std::vector<double> &data) {
  return std::vector<float>(data.begin(), data.end());
}

/// Rounds to bf16 in place and returns the bits.
std::vector<uint16_t> toBFloat16(std::vector<double> &data) {
  std::vector<uint16_t> bits(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    bits[i] = floatToBFloat16(float(data[i]));
    data[i] = bfloat16ToFloat(bits[i]);
  }
  return bits;
}

int report(const char *name, double error, double tolerance, int status) {
  bool ok = status == 0 && error <= tolerance;
  std::printf("%-16s status %d  max relative error %.3g (tolerance %.0e)  %s\n",
              name, status, error, tolerance, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int checkMha() {
  const int64_t B = 2, S = 64, E = 128, H = 4, D = 32;
  auto x = random(B * S * E, 1), wq = random(E * E, 2, 0.2),
       wk = random(E * E, 3, 0.2), wv = random(E * E, 4, 0.2),
       wo = random(E * E, 5, 0.2);
  std::vector<float> y(B * S * E);
  auto xf = toFloat(x), wqf = toFloat(wq), wkf = toFloat(wk),
       wvf = toFloat(wv), wof = toFloat(wo);
  int status = mha_causal(xf.data(), wqf.data(), wkf.data(), wvf.data(),
                          wof.data(), y.data());

  std::vector<double> q(B * H * S * D), k(q.size()), v(q.size()), o(q.size()),
      expected(B * S * E);
  projection(B, S, E, H, D, x.data(), wq.data(), q.data());
  projection(B, S, E, H, D, x.data(), wk.data(), k.data());
  projection(B, S, E, H, D, x.data(), wv.data(), v.data());
  MaskSpec mask;
  mask.causal = true;
  attentionForward({B, H, H, S, S, D, D}, defaultScale(D), mask, {}, q.data(),
                   k.data(), v.data(), o.data(), nullptr);
  merge(B, H, S, D, E, o.data(), wo.data(), expected.data());
  return report("mha_causal", maxRelativeError(y.data(), expected.data(),
                                               expected.size()),
                1e-5, status);
}

int checkGqaWindow() {
  const int64_t B = 1, H = 8, Hkv = 2, S = 96, D = 64;
  auto q = random(B * H * S * D, 11), k = random(B * Hkv * S * D, 12),
       v = random(B * Hkv * S * D, 13);
  auto qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  std::vector<float> o(B * H * S * D), lse(B * H * S);
  int status = gqa_window(qf.data(), kf.data(), vf.data(), o.data(),
                          lse.data());
  std::vector<double> expectedO(o.size()), expectedLse(lse.size());
  MaskSpec mask;
  mask.window = 32;
  attentionForward({B, H, Hkv, S, S, D, D}, defaultScale(D), mask, {},
                   q.data(), k.data(), v.data(), expectedO.data(),
                   expectedLse.data());
  double error = std::max(
      maxRelativeError(o.data(), expectedO.data(), o.size()),
      maxRelativeError(lse.data(), expectedLse.data(), lse.size()));
  return report("gqa_window", error, 1e-5, status);
}

int checkAlibi() {
  const int64_t B = 2, H = 8, S = 80, D = 32;
  auto q = random(B * H * S * D, 21), k = random(B * H * S * D, 22),
       v = random(B * H * S * D, 23);
  std::vector<double> slopes(H);
  for (int64_t h = 0; h < H; ++h)
    slopes[h] = std::pow(2.0, -8.0 * double(h + 1) / double(H));
  auto qf = toFloat(q), kf = toFloat(k), vf = toFloat(v),
       slopesf = toFloat(slopes);
  std::vector<float> o(B * H * S * D);
  int status = alibi(qf.data(), kf.data(), vf.data(), slopesf.data(),
                     o.data());
  std::vector<double> expected(o.size());
  MaskSpec mask;
  mask.causal = true;
  ScoreMod mod;
  mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
    return s + double(float(slopes[h])) * double(j - i);
  };
  attentionForward({B, H, H, S, S, D, D}, defaultScale(D), mask, mod,
                   q.data(), k.data(), v.data(), expected.data(), nullptr);
  return report("alibi", maxRelativeError(o.data(), expected.data(),
                                          expected.size()),
                1e-5, status);
}

int checkSoftcapPadding() {
  const int64_t B = 3, H = 4, Sq = 50, Skv = 70, D = 64, Dv = 48;
  auto q = random(B * H * Sq * D, 31), k = random(B * H * Skv * D, 32),
       v = random(B * H * Skv * Dv, 33);
  auto qb = toBFloat16(q), kb = toBFloat16(k), vb = toBFloat16(v);
  // Batch 2 has no visible key: its rows must come out as exact zeros.
  int32_t lengths[B] = {70, 33, 0};
  int64_t lengths64[B] = {70, 33, 0};
  std::vector<uint16_t> o(B * H * Sq * Dv);
  int status = softcap_padding(qb.data(), kb.data(), vb.data(), lengths,
                               o.data());
  std::vector<double> expected(o.size());
  MaskSpec mask;
  mask.lengths = lengths64;
  ScoreMod mod;
  mod.apply = [](double s, int64_t, int64_t, int64_t, int64_t) {
    return 30.0 * std::tanh(s / 30.0);
  };
  attentionForward({B, H, H, Sq, Skv, D, Dv}, defaultScale(D), mask, mod,
                   q.data(), k.data(), v.data(), expected.data(), nullptr);
  std::vector<double> actual(o.size());
  for (size_t i = 0; i < o.size(); ++i)
    actual[i] = bfloat16ToFloat(o[i]);
  // bf16 keeps 8 significant bits: one rounding of the output is 2^-9.
  return report("softcap_padding",
                maxRelativeError(actual.data(), expected.data(),
                                 expected.size()),
                1e-2, status);
}

} // namespace

int main() {
  int failures = checkMha() + checkGqaWindow() + checkAlibi() +
                 checkSoftcapPadding();
  if (failures)
    std::printf("%d example(s) FAILED\n", failures);
  else
    std::printf("all examples match the float64 reference\n");
  return failures ? 1 : 0;
}
