//===- ReferenceTest.cpp - Tests for the float64 reference oracle ---------===//

#include "tools/reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

using namespace attnc::ref;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

size_t qSize(const AttentionShape &s) { return s.B * s.H * s.Sq * s.D; }
size_t kSize(const AttentionShape &s) { return s.B * s.Hkv * s.Skv * s.D; }
size_t vSize(const AttentionShape &s) { return s.B * s.Hkv * s.Skv * s.Dv; }
size_t oSize(const AttentionShape &s) { return s.B * s.H * s.Sq * s.Dv; }
size_t lseSize(const AttentionShape &s) { return s.B * s.H * s.Sq; }

struct Inputs {
  std::vector<double> q, k, v;
};

Inputs randomInputs(const AttentionShape &s, uint64_t seed) {
  Inputs in{std::vector<double>(qSize(s)), std::vector<double>(kSize(s)),
            std::vector<double>(vSize(s))};
  fillRandom(in.q.data(), in.q.size(), seed);
  fillRandom(in.k.data(), in.k.size(), seed + 1);
  fillRandom(in.v.data(), in.v.size(), seed + 2);
  return in;
}

/// Scalar loss sum(O * G) whose gradient w.r.t. O is G, so the backward's
/// dO input is exactly G.
double lossOf(const AttentionShape &s, double scale, const MaskSpec &mask,
              const ScoreMod &mod, const Inputs &in,
              const std::vector<double> &g) {
  std::vector<double> o(oSize(s));
  attentionForward(s, scale, mask, mod, in.q.data(), in.k.data(),
                   in.v.data(), o.data(), nullptr);
  double loss = 0.0;
  for (size_t i = 0; i < o.size(); ++i)
    loss += o[i] * g[i];
  return loss;
}

/// Central finite difference of `loss` w.r.t. every element of `x`.
std::vector<double> numericGrad(std::vector<double> &x,
                                const std::function<double()> &loss) {
  // eps balances truncation (O(eps^2)) against cancellation (O(1e-16/eps)).
  const double eps = 1e-5;
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double plus = loss();
    x[i] = saved - eps;
    const double minus = loss();
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * eps);
  }
  return grad;
}

void checkBackwardAgainstFiniteDifferences(const AttentionShape &s,
                                           double scale, const MaskSpec &mask,
                                           const ScoreMod &mod,
                                           uint64_t seed) {
  Inputs in = randomInputs(s, seed);
  std::vector<double> g(oSize(s));
  fillRandom(g.data(), g.size(), seed + 3);

  std::vector<double> dQ(qSize(s), 7.0), dK(kSize(s), 7.0), dV(vSize(s), 7.0);
  attentionBackward(s, scale, mask, mod, in.q.data(), in.k.data(),
                    in.v.data(), g.data(), dQ.data(), dK.data(), dV.data());

  auto loss = [&] { return lossOf(s, scale, mask, mod, in, g); };
  std::vector<double> nQ = numericGrad(in.q, loss);
  std::vector<double> nK = numericGrad(in.k, loss);
  std::vector<double> nV = numericGrad(in.v, loss);
  EXPECT_LT(maxRelativeError(dQ.data(), nQ.data(), nQ.size()), 1e-7);
  EXPECT_LT(maxRelativeError(dK.data(), nK.data(), nK.size()), 1e-7);
  EXPECT_LT(maxRelativeError(dV.data(), nV.data(), nV.size()), 1e-7);
}

} // namespace

//===----------------------------------------------------------------------===//
// Masks
//===----------------------------------------------------------------------===//

TEST(ReferenceMask, DefaultMasksNothing) {
  MaskSpec mask;
  EXPECT_TRUE(isVisible(mask, 0, 0, 0, 5));
  EXPECT_TRUE(isVisible(mask, 1, 2, 3, 0));
}

TEST(ReferenceMask, CausalIsTopLeftAligned) {
  MaskSpec mask;
  mask.causal = true;
  EXPECT_TRUE(isVisible(mask, 0, 0, 2, 2));
  EXPECT_TRUE(isVisible(mask, 0, 0, 2, 0));
  EXPECT_FALSE(isVisible(mask, 0, 0, 2, 3));
  // Row 0 sees only key 0 regardless of how long the key sequence is.
  EXPECT_TRUE(isVisible(mask, 0, 0, 0, 0));
  EXPECT_FALSE(isVisible(mask, 0, 0, 0, 1));
}

TEST(ReferenceMask, WindowImpliesCausal) {
  MaskSpec mask;
  mask.window = 2;
  EXPECT_TRUE(isVisible(mask, 0, 0, 3, 3));
  EXPECT_TRUE(isVisible(mask, 0, 0, 3, 2));
  EXPECT_FALSE(isVisible(mask, 0, 0, 3, 1));
  EXPECT_FALSE(isVisible(mask, 0, 0, 3, 4));
}

TEST(ReferenceMask, LengthsAndMaskModAreAnded) {
  const int64_t lengths[] = {2, 4};
  MaskSpec mask;
  mask.lengths = lengths;
  mask.maskMod = [](int64_t, int64_t h, int64_t, int64_t j) {
    return h == 0 || j % 2 == 0;
  };
  EXPECT_TRUE(isVisible(mask, 0, 0, 0, 1));
  EXPECT_FALSE(isVisible(mask, 0, 0, 0, 2));
  EXPECT_TRUE(isVisible(mask, 1, 0, 0, 3));
  EXPECT_FALSE(isVisible(mask, 1, 1, 0, 3));
  EXPECT_TRUE(isVisible(mask, 1, 1, 0, 2));
  EXPECT_FALSE(isVisible(mask, 1, 1, 0, 4));
}

//===----------------------------------------------------------------------===//
// Forward: hand-computed cases
//===----------------------------------------------------------------------===//

TEST(ReferenceForward, HandComputedSingleRow) {
  // Scores [0, log 3] give P = [1/4, 3/4].
  AttentionShape s{1, 1, 1, 1, 2, 1, 1};
  const double q[] = {1.0};
  const double k[] = {0.0, std::log(3.0)};
  const double v[] = {1.0, 5.0};
  double o[1], lse[1];
  attentionForward(s, 1.0, MaskSpec(), ScoreMod(), q, k, v, o, lse);
  EXPECT_NEAR(o[0], 0.25 * 1.0 + 0.75 * 5.0, 1e-15);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-15);
}

TEST(ReferenceForward, HandComputedScaleAndCausal) {
  // D = 2, scale 0.5. Row 0 sees only key 0; row 1 sees both keys.
  AttentionShape s{1, 1, 1, 2, 2, 2, 2};
  const double q[] = {1, 0, 1, 1};
  const double k[] = {2, 0, 0, 2};
  const double v[] = {1, 2, 3, 4};
  double o[4], lse[2];
  MaskSpec mask;
  mask.causal = true;
  attentionForward(s, 0.5, mask, ScoreMod(), q, k, v, o, lse);
  // Row 0: score 0.5 * 2 = 1, single key.
  EXPECT_DOUBLE_EQ(o[0], 1.0);
  EXPECT_DOUBLE_EQ(o[1], 2.0);
  EXPECT_NEAR(lse[0], 1.0, 1e-15);
  // Row 1: scores [1, 1] -> uniform.
  EXPECT_NEAR(o[2], 2.0, 1e-15);
  EXPECT_NEAR(o[3], 3.0, 1e-15);
  EXPECT_NEAR(lse[1], 1.0 + std::log(2.0), 1e-15);
}

TEST(ReferenceForward, DefaultScale) {
  EXPECT_DOUBLE_EQ(defaultScale(4), 0.5);
  EXPECT_DOUBLE_EQ(defaultScale(64), 0.125);
}

TEST(ReferenceForward, LargeScoresAreStable) {
  // Scores of +-1000 overflow a naive exp; the max-subtracted form is exact.
  AttentionShape s{1, 1, 1, 1, 3, 1, 1};
  const double q[] = {1000.0};
  const double k[] = {1.0, 1.0, -1.0};
  const double v[] = {2.0, 4.0, 100.0};
  double o[1], lse[1];
  attentionForward(s, 1.0, MaskSpec(), ScoreMod(), q, k, v, o, lse);
  EXPECT_NEAR(o[0], 3.0, 1e-12);
  EXPECT_NEAR(lse[0], 1000.0 + std::log(2.0), 1e-12);
}

TEST(ReferenceForward, FullyMaskedRowsGiveZeroAndNegInf) {
  AttentionShape s{2, 2, 1, 3, 4, 3, 2};
  Inputs in = randomInputs(s, 11);
  const int64_t lengths[] = {0, 4};
  MaskSpec mask;
  mask.lengths = lengths;
  // Also fully mask row 1 of head 1 in batch 1 through maskMod.
  mask.maskMod = [](int64_t b, int64_t h, int64_t i, int64_t) {
    return !(b == 1 && h == 1 && i == 1);
  };
  std::vector<double> o(oSize(s), 42.0), lse(lseSize(s), 42.0);
  attentionForward(s, defaultScale(s.D), mask, ScoreMod(), in.q.data(),
                   in.k.data(), in.v.data(), o.data(), lse.data());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t row = (b * s.H + h) * s.Sq + i;
        const bool masked = b == 0 || (h == 1 && i == 1);
        for (int64_t d = 0; d < s.Dv; ++d) {
          EXPECT_FALSE(std::isnan(o[row * s.Dv + d]));
          if (masked) {
            EXPECT_EQ(o[row * s.Dv + d], 0.0);
          }
        }
        if (masked) {
          EXPECT_EQ(lse[row], -kInf);
        } else {
          EXPECT_TRUE(std::isfinite(lse[row]));
        }
      }

  std::vector<double> g(oSize(s), 1.0);
  std::vector<double> dQ(qSize(s)), dK(kSize(s)), dV(vSize(s));
  attentionBackward(s, defaultScale(s.D), mask, ScoreMod(), in.q.data(),
                    in.k.data(), in.v.data(), g.data(), dQ.data(), dK.data(),
                    dV.data());
  for (double x : dQ)
    EXPECT_FALSE(std::isnan(x));
  for (double x : dK)
    EXPECT_FALSE(std::isnan(x));
  for (double x : dV)
    EXPECT_FALSE(std::isnan(x));
  // Batch 0 sees nothing, so its gradients vanish exactly.
  for (size_t i = 0; i < qSize(s) / 2; ++i)
    EXPECT_EQ(dQ[i], 0.0);
  for (size_t i = 0; i < kSize(s) / 2; ++i)
    EXPECT_EQ(dK[i], 0.0);
}

TEST(ReferenceForward, ScoreModNegInfEverywhereIsMasked) {
  AttentionShape s{1, 1, 1, 2, 3, 2, 2};
  Inputs in = randomInputs(s, 5);
  ScoreMod mod;
  mod.apply = [](double x, int64_t, int64_t, int64_t i, int64_t) {
    return i == 0 ? -kInf : x;
  };
  mod.dScore = [](double, int64_t, int64_t, int64_t i, int64_t) {
    return i == 0 ? 0.0 : 1.0;
  };
  std::vector<double> o(oSize(s)), lse(lseSize(s));
  attentionForward(s, 1.0, MaskSpec(), mod, in.q.data(), in.k.data(),
                   in.v.data(), o.data(), lse.data());
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(o[1], 0.0);
  EXPECT_EQ(lse[0], -kInf);
  EXPECT_TRUE(std::isfinite(lse[1]));
}

TEST(ReferenceForward, GqaMatchesExplicitlyRepeatedKv) {
  AttentionShape gqa{2, 4, 2, 3, 5, 4, 3};
  AttentionShape mha = gqa;
  mha.Hkv = 4;
  Inputs in = randomInputs(gqa, 21);
  // Query head h reads kv head h / 2, so repeat each kv head twice.
  Inputs rep{in.q, std::vector<double>(kSize(mha)),
             std::vector<double>(vSize(mha))};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h) {
      const int64_t src = b * 2 + h / 2, dst = b * 4 + h;
      std::memcpy(&rep.k[dst * 5 * 4], &in.k[src * 5 * 4],
                  5 * 4 * sizeof(double));
      std::memcpy(&rep.v[dst * 5 * 3], &in.v[src * 5 * 3],
                  5 * 3 * sizeof(double));
    }
  MaskSpec mask;
  mask.causal = true;
  std::vector<double> o1(oSize(gqa)), o2(oSize(gqa)), l1(lseSize(gqa)),
      l2(lseSize(gqa));
  attentionForward(gqa, 0.3, mask, ScoreMod(), in.q.data(), in.k.data(),
                   in.v.data(), o1.data(), l1.data());
  attentionForward(mha, 0.3, mask, ScoreMod(), rep.q.data(), rep.k.data(),
                   rep.v.data(), o2.data(), l2.data());
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(l1, l2);

  // GQA dK/dV must be the sum over the two query heads sharing a kv head.
  std::vector<double> g(oSize(gqa));
  fillRandom(g.data(), g.size(), 99);
  std::vector<double> dQ1(qSize(gqa)), dK1(kSize(gqa)), dV1(vSize(gqa));
  std::vector<double> dQ2(qSize(mha)), dK2(kSize(mha)), dV2(vSize(mha));
  attentionBackward(gqa, 0.3, mask, ScoreMod(), in.q.data(), in.k.data(),
                    in.v.data(), g.data(), dQ1.data(), dK1.data(),
                    dV1.data());
  attentionBackward(mha, 0.3, mask, ScoreMod(), rep.q.data(), rep.k.data(),
                    rep.v.data(), g.data(), dQ2.data(), dK2.data(),
                    dV2.data());
  EXPECT_EQ(dQ1, dQ2);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t hkv = 0; hkv < 2; ++hkv)
      for (int64_t x = 0; x < 5 * 4; ++x)
        EXPECT_NEAR(dK1[(b * 2 + hkv) * 20 + x],
                    dK2[(b * 4 + 2 * hkv) * 20 + x] +
                        dK2[(b * 4 + 2 * hkv + 1) * 20 + x],
                    1e-14);
}

TEST(ReferenceForward, ScoreModBiasMatchesHandComputed) {
  // A +log 3 bias on key 1 turns equal scores into P = [1/4, 3/4].
  AttentionShape s{1, 1, 1, 1, 2, 1, 1};
  const double q[] = {1.0}, k[] = {0.5, 0.5}, v[] = {1.0, 5.0};
  ScoreMod mod;
  mod.apply = [](double x, int64_t, int64_t, int64_t, int64_t j) {
    return x + (j == 1 ? std::log(3.0) : 0.0);
  };
  double o[1], lse[1];
  attentionForward(s, 1.0, MaskSpec(), mod, q, k, v, o, lse);
  EXPECT_NEAR(o[0], 4.0, 1e-15);
  EXPECT_NEAR(lse[0], 0.5 + std::log(4.0), 1e-15);
}

TEST(ReferenceForward, RejectsBadGqaShape) {
  AttentionShape s{1, 3, 2, 1, 1, 1, 1};
  double x[4] = {};
  EXPECT_THROW(attentionForward(s, 1.0, MaskSpec(), ScoreMod(), x, x, x, x,
                                x),
               std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// Backward against central finite differences
//===----------------------------------------------------------------------===//

TEST(ReferenceBackward, PlainMatchesFiniteDifferences) {
  AttentionShape s{1, 2, 2, 3, 4, 3, 2};
  checkBackwardAgainstFiniteDifferences(s, defaultScale(s.D), MaskSpec(),
                                        ScoreMod(), 100);
}

TEST(ReferenceBackward, CausalGqaRectangularMatchesFiniteDifferences) {
  AttentionShape s{2, 4, 2, 5, 3, 2, 3};
  MaskSpec mask;
  mask.causal = true;
  checkBackwardAgainstFiniteDifferences(s, 0.7, mask, ScoreMod(), 200);
}

TEST(ReferenceBackward, WindowLengthsMaskModMatchesFiniteDifferences) {
  AttentionShape s{2, 2, 1, 6, 6, 3, 2};
  const int64_t lengths[] = {4, 0};
  MaskSpec mask;
  mask.window = 3;
  mask.lengths = lengths;
  mask.maskMod = [](int64_t, int64_t h, int64_t i, int64_t j) {
    return !(h == 1 && i == 2) && (i + j) % 5 != 4;
  };
  checkBackwardAgainstFiniteDifferences(s, 0.5, mask, ScoreMod(), 300);
}

TEST(ReferenceBackward, SoftcapScoreModMatchesFiniteDifferences) {
  AttentionShape s{1, 2, 1, 4, 5, 3, 3};
  const double cap = 0.8;
  ScoreMod mod;
  mod.apply = [cap](double x, int64_t, int64_t, int64_t, int64_t) {
    return cap * std::tanh(x / cap);
  };
  mod.dScore = [cap](double x, int64_t, int64_t, int64_t, int64_t) {
    const double t = std::tanh(x / cap);
    return 1.0 - t * t;
  };
  MaskSpec mask;
  mask.causal = true;
  checkBackwardAgainstFiniteDifferences(s, 1.3, mask, mod, 400);
}

TEST(ReferenceBackward, CapturedBiasGradientMatchesFiniteDifferences) {
  // S' = S + bias[h][i - j + Skv - 1] (relative position bias); the bias is a
  // captured tensor whose gradient arrives through accumulateCaptureGrad.
  AttentionShape s{2, 2, 2, 3, 4, 2, 2};
  const int64_t nRel = s.Sq + s.Skv - 1;
  std::vector<double> bias(s.H * nRel);
  fillRandom(bias.data(), bias.size(), 77);
  std::vector<double> dBias(bias.size(), 0.0);
  auto index = [&](int64_t h, int64_t i, int64_t j) {
    return h * nRel + i - j + s.Skv - 1;
  };
  ScoreMod mod;
  mod.apply = [&](double x, int64_t, int64_t h, int64_t i, int64_t j) {
    return x + bias[index(h, i, j)];
  };
  mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
  mod.accumulateCaptureGrad = [&](double, int64_t, int64_t h, int64_t i,
                                  int64_t j, double dSPrime) {
    dBias[index(h, i, j)] += dSPrime;
  };
  MaskSpec mask;
  mask.causal = true;
  checkBackwardAgainstFiniteDifferences(s, 0.9, mask, mod, 500);

  // The helper above ran the backward once, filling dBias.
  Inputs in = randomInputs(s, 500);
  std::vector<double> g(oSize(s));
  fillRandom(g.data(), g.size(), 503);
  std::vector<double> nBias = numericGrad(
      bias, [&] { return lossOf(s, 0.9, mask, mod, in, g); });
  EXPECT_LT(maxRelativeError(dBias.data(), nBias.data(), nBias.size()), 1e-7);
}

TEST(ReferenceBackward, CallbacksRunOncePerVisibleInOrder) {
  AttentionShape s{2, 2, 1, 3, 3, 2, 2};
  Inputs in = randomInputs(s, 600);
  std::vector<double> g(oSize(s), 1.0);
  const int64_t lengths[] = {2, 3};
  MaskSpec mask;
  mask.causal = true;
  mask.lengths = lengths;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  std::vector<Key> dScoreCalls, captureCalls, expected;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Sq; ++i)
        for (int64_t j = 0; j < s.Skv; ++j)
          if (isVisible(mask, b, h, i, j))
            expected.emplace_back(b, h, i, j);
  ScoreMod mod;
  mod.apply = [](double x, int64_t, int64_t, int64_t, int64_t) { return x; };
  mod.dScore = [&](double, int64_t b, int64_t h, int64_t i, int64_t j) {
    dScoreCalls.emplace_back(b, h, i, j);
    return 1.0;
  };
  mod.accumulateCaptureGrad = [&](double, int64_t b, int64_t h, int64_t i,
                                  int64_t j, double) {
    captureCalls.emplace_back(b, h, i, j);
  };
  std::vector<double> dQ(qSize(s)), dK(kSize(s)), dV(vSize(s));
  attentionBackward(s, 1.0, mask, mod, in.q.data(), in.k.data(), in.v.data(),
                    g.data(), dQ.data(), dK.data(), dV.data());
  EXPECT_EQ(dScoreCalls, expected);
  EXPECT_EQ(captureCalls, expected);
}

//===----------------------------------------------------------------------===//
// The graph-form pieces: scores, mask, softmax, apply
//===----------------------------------------------------------------------===//

TEST(ReferencePieces, HandComputedScoresAndApplyWithGqa) {
  // Two query heads share one kv head.
  const AttentionShape s{1, 2, 1, 1, 2, 2, 1};
  const double q[] = {1, 2, 3, -1}, k[] = {1, 0, 0, 1}, v[] = {2, 4};
  double scores[4];
  computeScores(s, q, k, scores);
  EXPECT_EQ(std::vector<double>(scores, scores + 4),
            (std::vector<double>{1, 2, 3, -1}));
  const double p[] = {0.25, 0.75, 1, 0};
  double o[2];
  applyProbabilities(s, p, v, o);
  EXPECT_DOUBLE_EQ(o[0], 0.25 * 2 + 0.75 * 4);
  EXPECT_DOUBLE_EQ(o[1], 2.0);
}

TEST(ReferencePieces, MaskScoresFillsHiddenEntries) {
  MaskSpec mask;
  mask.causal = true;
  double scores[] = {1, 2, 3, 4};
  maskScores(1, 1, 2, 2, mask, -kInf, scores);
  EXPECT_EQ(std::vector<double>(scores, scores + 4),
            (std::vector<double>{1, -kInf, 3, 4}));
  const int64_t lengths[] = {1};
  MaskSpec byLength;
  byLength.lengths = lengths;
  maskScores(1, 1, 2, 2, byLength, 0.0, scores);
  EXPECT_EQ(std::vector<double>(scores, scores + 4),
            (std::vector<double>{1, 0, 3, 0}));
}

TEST(ReferencePieces, SoftmaxRowsHandComputedAndFullyMaskedRow) {
  double scores[] = {0, std::log(3.0), 5, -kInf, -kInf, -kInf};
  softmaxRows(3, 2, scores);
  EXPECT_DOUBLE_EQ(scores[0], 0.25);
  EXPECT_DOUBLE_EQ(scores[1], 0.75);
  EXPECT_EQ(scores[2], 1.0);
  EXPECT_EQ(scores[3], 0.0);
  // Every key masked: P = 0, not NaN.
  EXPECT_EQ(scores[4], 0.0);
  EXPECT_EQ(scores[5], 0.0);
}

TEST(ReferencePieces, ComposedMatchAttentionForward) {
  // GQA, causal on a rectangle, and a batch whose length empties its rows.
  const AttentionShape s{2, 4, 2, 3, 5, 3, 2};
  const int64_t lengths[] = {4, 0};
  MaskSpec mask;
  mask.causal = true;
  mask.lengths = lengths;
  const double scale = 0.7;
  Inputs in = randomInputs(s, 1100);
  std::vector<double> expected(oSize(s));
  attentionForward(s, scale, mask, ScoreMod(), in.q.data(), in.k.data(),
                   in.v.data(), expected.data(), nullptr);
  std::vector<double> scores(s.B * s.H * s.Sq * s.Skv), o(oSize(s), 7.0);
  computeScores(s, in.q.data(), in.k.data(), scores.data());
  for (double &x : scores)
    x *= scale;
  maskScores(s.B, s.H, s.Sq, s.Skv, mask, -kInf, scores.data());
  softmaxRows(s.B * s.H * s.Sq, s.Skv, scores.data());
  applyProbabilities(s, scores.data(), in.v.data(), o.data());
  EXPECT_LT(maxRelativeError(o.data(), expected.data(), o.size()), 1e-14);
  for (size_t i = o.size() / 2; i < o.size(); ++i)
    EXPECT_EQ(o[i], 0.0);
}

//===----------------------------------------------------------------------===//
// Projection and merge
//===----------------------------------------------------------------------===//

TEST(ReferenceProjection, HandComputed) {
  // B=1, S=1, E=2, H=2, D=1: out[h] = x . w[:, h].
  const double x[] = {1.0, 2.0};
  const double w[] = {3.0, 4.0,  // e = 0
                      5.0, 6.0}; // e = 1
  double out[2];
  projection(1, 1, 2, 2, 1, x, w, out);
  EXPECT_DOUBLE_EQ(out[0], 13.0);
  EXPECT_DOUBLE_EQ(out[1], 16.0);
}

TEST(ReferenceProjection, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, S = 3, E = 4, H = 2, D = 3;
  std::vector<double> x(B * S * E), w(E * H * D), g(B * H * S * D);
  fillRandom(x.data(), x.size(), 700);
  fillRandom(w.data(), w.size(), 701);
  fillRandom(g.data(), g.size(), 702);
  auto loss = [&] {
    std::vector<double> out(g.size());
    projection(B, S, E, H, D, x.data(), w.data(), out.data());
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i)
      l += out[i] * g[i];
    return l;
  };
  // dX accumulates, so seed it with a known offset.
  std::vector<double> dX(x.size(), 1.0), dW(w.size(), 7.0);
  projectionBackward(B, S, E, H, D, x.data(), w.data(), g.data(), dX.data(),
                     dW.data());
  std::vector<double> nX = numericGrad(x, loss), nW = numericGrad(w, loss);
  for (double &v : nX)
    v += 1.0;
  EXPECT_LT(maxRelativeError(dX.data(), nX.data(), nX.size()), 1e-8);
  EXPECT_LT(maxRelativeError(dW.data(), nW.data(), nW.size()), 1e-8);
}

TEST(ReferenceMerge, HandComputed) {
  // B=1, H=2, S=1, Dv=1, E=2: y = [o0, o1] * wo.
  const double o[] = {1.0, 2.0};
  const double wo[] = {3.0, 4.0,  // h = 0
                       5.0, 6.0}; // h = 1
  double y[2];
  merge(1, 2, 1, 1, 2, o, wo, y);
  EXPECT_DOUBLE_EQ(y[0], 13.0);
  EXPECT_DOUBLE_EQ(y[1], 16.0);
}

TEST(ReferenceMerge, BackwardMatchesFiniteDifferences) {
  const int64_t B = 2, H = 2, S = 3, Dv = 2, E = 5;
  std::vector<double> o(B * H * S * Dv), wo(H * Dv * E), g(B * S * E);
  fillRandom(o.data(), o.size(), 800);
  fillRandom(wo.data(), wo.size(), 801);
  fillRandom(g.data(), g.size(), 802);
  auto loss = [&] {
    std::vector<double> y(g.size());
    merge(B, H, S, Dv, E, o.data(), wo.data(), y.data());
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * g[i];
    return l;
  };
  std::vector<double> dO(o.size(), 7.0), dWo(wo.size(), 7.0);
  mergeBackward(B, H, S, Dv, E, o.data(), wo.data(), g.data(), dO.data(),
                dWo.data());
  std::vector<double> nO = numericGrad(o, loss), nWo = numericGrad(wo, loss);
  EXPECT_LT(maxRelativeError(dO.data(), nO.data(), nO.size()), 1e-8);
  EXPECT_LT(maxRelativeError(dWo.data(), nWo.data(), nWo.size()), 1e-8);
}

TEST(ReferenceEndToEnd, FullLayerBackwardMatchesFiniteDifferences) {
  // X -> (Q, K, V projections) -> attention -> merge, checking dX, which
  // exercises the accumulating dX of projectionBackward.
  const int64_t B = 1, S = 3, E = 4, H = 2, Hkv = 1, D = 2, Dv = 2;
  AttentionShape shape{B, H, Hkv, S, S, D, Dv};
  std::vector<double> x(B * S * E), wq(E * H * D), wk(E * Hkv * D),
      wv(E * Hkv * Dv), wo(H * Dv * E), g(B * S * E);
  fillRandom(x.data(), x.size(), 900);
  fillRandom(wq.data(), wq.size(), 901);
  fillRandom(wk.data(), wk.size(), 902);
  fillRandom(wv.data(), wv.size(), 903);
  fillRandom(wo.data(), wo.size(), 904);
  fillRandom(g.data(), g.size(), 905);
  MaskSpec mask;
  mask.causal = true;
  const double scale = defaultScale(D);
  std::vector<double> q(qSize(shape)), k(kSize(shape)), v(vSize(shape)),
      o(oSize(shape)), y(g.size());
  auto forward = [&] {
    projection(B, S, E, H, D, x.data(), wq.data(), q.data());
    projection(B, S, E, Hkv, D, x.data(), wk.data(), k.data());
    projection(B, S, E, Hkv, Dv, x.data(), wv.data(), v.data());
    attentionForward(shape, scale, mask, ScoreMod(), q.data(), k.data(),
                     v.data(), o.data(), nullptr);
    merge(B, H, S, Dv, E, o.data(), wo.data(), y.data());
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * g[i];
    return l;
  };
  forward();
  std::vector<double> dO(o.size()), dWo(wo.size()), dQ(q.size()),
      dK(k.size()), dV(v.size()), dX(x.size(), 0.0), dWq(wq.size()),
      dWk(wk.size()), dWv(wv.size());
  mergeBackward(B, H, S, Dv, E, o.data(), wo.data(), g.data(), dO.data(),
                dWo.data());
  attentionBackward(shape, scale, mask, ScoreMod(), q.data(), k.data(),
                    v.data(), dO.data(), dQ.data(), dK.data(), dV.data());
  projectionBackward(B, S, E, H, D, x.data(), wq.data(), dQ.data(), dX.data(),
                     dWq.data());
  projectionBackward(B, S, E, Hkv, D, x.data(), wk.data(), dK.data(),
                     dX.data(), dWk.data());
  projectionBackward(B, S, E, Hkv, Dv, x.data(), wv.data(), dV.data(),
                     dX.data(), dWv.data());
  std::vector<double> nX = numericGrad(x, forward);
  std::vector<double> nWq = numericGrad(wq, forward);
  EXPECT_LT(maxRelativeError(dX.data(), nX.data(), nX.size()), 1e-7);
  EXPECT_LT(maxRelativeError(dWq.data(), nWq.data(), nWq.size()), 1e-7);
}
