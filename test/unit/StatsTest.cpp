// attn.attention_stats (entropy, mean entropy, pooled maps, head similarity)
// and the entropy's derived gradients, compiled through the JIT, against
// the float64 reference computed from the full P.
#include "attnc/jit.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

using namespace attnc;

namespace {

using test::Buffer;
using test::call;
using test::errorOf;
using test::tensorType;

struct StatsCase {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Skv = 1, D = 16, Gq = 1, Gk = 1;
  std::string dtype = "f32";
  bool causal = false;
  int64_t window = 0;
  bool lengths = false;   // batch 0 sees no key (fully masked rows)
  bool softcap = false;   // score_mod: 5 tanh(s / 5)
  bool documents = false; // mask_mod: same document (ids captured)
  bool alibi = false;     // score_mod: s + slope[h] (j - i), slopes captured
                          // (gradientsOfAGivenLse only)
  std::string cpu = "native"; // jit::Options::cpu
  jit::Target target = jit::Target::Cpu;

  std::string describe() const {
    std::ostringstream os;
    os << "B=" << B << " H=" << H << " Hkv=" << Hkv << " Sq=" << Sq
       << " Skv=" << Skv << " D=" << D << " grid=" << Gq << "x" << Gk << " "
       << dtype << (causal ? " causal" : "") << " window=" << window
       << (lengths ? " lengths" : "") << (softcap ? " softcap" : "")
       << (documents ? " documents" : "") << (alibi ? " alibi" : "")
       << " cpu=" << cpu << (target == jit::Target::Vulkan ? " vulkan" : "");
    return os.str();
  }
};

constexpr double kSoftcap = 5.0;

/// The options (masks) and regions of a case's attn ops, and the
/// arguments they read: [%len], [%slopes], [%dq, %dk].
struct CaseParts {
  std::string options, regions, args;
};
CaseParts partsOf(const StatsCase &c) {
  std::string docQT = tensorType({c.Sq}, "i32"),
              docKT = tensorType({c.Skv}, "i32");
  std::ostringstream options, regions, args;
  if (c.causal)
    options << " causal";
  if (c.window)
    options << " window " << c.window;
  if (c.lengths) {
    options << " lengths(%len : " << tensorType({c.B}, "i32") << ")";
    args << ", %len: " << tensorType({c.B}, "i32");
  }
  if (c.alibi) {
    std::string slopesT = tensorType({c.H});
    options << " score_captures(%slopes : " << slopesT << ")";
    args << ", %slopes: " << slopesT;
    regions << " score_mod {\n"
            << "^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: "
            << slopesT << "):\n"
            << "  %slope = tensor.extract %sl[%h] : " << slopesT << "\n"
            << "  %d = arith.subi %j, %i : index\n"
            << "  %di = arith.index_cast %d : index to i64\n"
            << "  %df = arith.sitofp %di : i64 to f32\n"
            << "  %bias = arith.mulf %slope, %df : f32\n"
            << "  %r = arith.addf %s, %bias : f32\n"
            << "  attn.yield %r : f32\n}";
  }
  if (c.documents) {
    options << " mask_captures(%dq, %dk : " << docQT << ", " << docKT << ")";
    args << ", %dq: " << docQT << ", %dk: " << docKT;
  }
  if (c.softcap)
    regions << " score_mod {\n"
            << "^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):\n"
            << "  %c = arith.constant 5.0 : f32\n"
            << "  %x = arith.divf %s, %c : f32\n"
            << "  %t = math.tanh %x : f32\n"
            << "  %r = arith.mulf %t, %c : f32\n"
            << "  attn.yield %r : f32\n}";
  if (c.documents)
    regions << " mask_mod {\n"
            << "^bb0(%b: index, %h: index, %i: index, %j: index, %a: " << docQT
            << ", %e: " << docKT << "):\n"
            << "  %di = tensor.extract %a[%i] : " << docQT << "\n"
            << "  %dj = tensor.extract %e[%j] : " << docKT << "\n"
            << "  %same = arith.cmpi eq, %di, %dj : i32\n"
            << "  attn.yield %same : i1\n}";
  return {options.str(), regions.str(), args.str()};
}

/// A case's mask inputs (random lengths, batch 0 seeing no key when there
/// are several; three documents over the rows and keys), packed, and the
/// reference's masks and softcap over them.
struct CaseMasks {
  std::vector<int64_t> lengths;
  Buffer len, docQ, docK;
  ref::MaskSpec mask;
  ref::ScoreMod softcap;

  CaseMasks(const StatsCase &c, uint64_t seed)
      : lengths(c.B), len(c.B, "i32"), docQ(c.Sq, "i32"), docK(c.Skv, "i32") {
    std::mt19937_64 rng(seed);
    for (int64_t b = 0; b < c.B; ++b) {
      lengths[b] = (b == 0 && c.B > 1) ? 0 : int64_t(rng() % (c.Skv + 3));
      len.values[b] = double(lengths[b]);
    }
    for (int64_t i = 0; i < c.Sq; ++i)
      docQ.values[i] = double(i * 3 / c.Sq);
    for (int64_t j = 0; j < c.Skv; ++j)
      docK.values[j] = double(j * 3 / c.Skv);
    for (Buffer *x : {&len, &docQ, &docK})
      x->pack();
    mask.causal = c.causal;
    mask.window = c.window;
    if (c.lengths)
      mask.lengths = lengths.data();
    if (c.documents)
      mask.maskMod = [this](int64_t, int64_t, int64_t i, int64_t j) {
        return docQ.values[i] == docK.values[j];
      };
    softcap.apply = [](double s, int64_t, int64_t, int64_t, int64_t) {
      return kSoftcap * std::tanh(s / kSoftcap);
    };
    softcap.dScore = [](double s, int64_t, int64_t, int64_t, int64_t) {
      double t = std::tanh(s / kSoftcap);
      return 1 - t * t;
    };
  }
  CaseMasks(const CaseMasks &) = delete;

  /// The masks' arguments of the case's spec, in order.
  void appendInputs(const StatsCase &c, std::vector<Buffer *> &inputs) {
    if (c.lengths)
      inputs.push_back(&len);
    if (c.documents)
      inputs.insert(inputs.end(), {&docQ, &docK});
  }
};

/// @stats(q, k, v, [len], [doc_q, doc_k]) -> (O, entropy, mean entropy,
/// pooled, similarity): attn.attention and its statistics.
std::string specFor(const StatsCase &c) {
  std::string qT = tensorType({c.B, c.H, c.Sq, c.D}, c.dtype),
              kT = tensorType({c.B, c.Hkv, c.Skv, c.D}, c.dtype),
              oT = tensorType({c.B, c.H, c.Sq, c.D}, c.dtype),
              lseT = tensorType({c.B, c.H, c.Sq}),
              meanT = tensorType({c.B, c.H}),
              poolT = tensorType({c.B, c.H, c.Gq, c.Gk}),
              simT = tensorType({c.B, c.H, c.H});
  CaseParts parts = partsOf(c);
  std::ostringstream os;
  os << "func.func @stats(%q: " << qT << ", %k: " << kT << ", %v: " << kT
     << parts.args << ") -> (" << oT << ", " << lseT << ", " << meanT << ", "
     << poolT << ", " << simT << ") {\n"
     << "  %o, %lse = attn.attention %q, %k, %v" << parts.options << " : " << qT
     << ", " << kT << ", " << kT << " -> " << oT << ", " << lseT
     << parts.regions << "\n"
     << "  %h, %m, %p, %s = attn.attention_stats %q, %k, %lse" << parts.options
     << " : " << qT << ", " << kT << ", " << lseT << " -> entropy " << lseT
     << " mean_entropy " << meanT << " pooled " << poolT << " similarity "
     << simT << parts.regions << "\n"
     << "  return %o, %h, %m, %p, %s : " << oT << ", " << lseT << ", " << meanT
     << ", " << poolT << ", " << simT << "\n}\n";
  return os.str();
}

/// Runs the forward (and with `gradients` the backward) of a case and
/// compares every statistic and gradient with the reference.
void runCase(const StatsCase &c, uint64_t seed, bool gradients) {
  SCOPED_TRACE(c.describe());
  std::string spec = specFor(c);
  SCOPED_TRACE(spec);
  std::string error;
  jit::Options options = test::testOptions();
  options.cpu = c.cpu;
  options.target = c.target;
  auto module = jit::Module::compile(spec, options, &error);
  ASSERT_TRUE(module) << error;

  const int64_t rows = c.B * c.H * c.Sq;
  Buffer q(rows * c.D, c.dtype), k(c.B * c.Hkv * c.Skv * c.D, c.dtype),
      v(c.B * c.Hkv * c.Skv * c.D, c.dtype), o(rows * c.D, c.dtype),
      entropy(rows, "f32"), mean(c.B * c.H, "f32"),
      pooled(c.B * c.H * c.Gq * c.Gk, "f32"), sim(c.B * c.H * c.H, "f32"),
      lse(rows, "f32");
  ref::fillRandom(q.values.data(), q.values.size(), seed + 1, -2, 2);
  ref::fillRandom(k.values.data(), k.values.size(), seed + 2, -2, 2);
  ref::fillRandom(v.values.data(), v.values.size(), seed + 3);
  for (Buffer *x : {&q, &k, &v})
    x->pack();
  CaseMasks masks(c, seed);

  std::vector<Buffer *> inputs = {&q, &k, &v};
  masks.appendInputs(c, inputs);
  std::vector<Buffer *> results = {&o, &entropy, &mean, &pooled, &sim};
  std::vector<Buffer *> args = inputs;
  args.insert(args.end(), results.begin(), results.end());
  // With gradients, @stats_fwd also returns the saved LSE.
  if (gradients)
    args.push_back(&lse);
  jit::Result status = call(*module, gradients ? "stats_fwd" : "stats", args);
  if (test::noVulkanDevice(status))
    GTEST_SKIP() << "no Vulkan device";
  ASSERT_TRUE(status.ok()) << status.error << " status " << status.status;
  for (Buffer *r : results)
    r->unpack();

  ref::AttentionShape shape{c.B, c.H, c.Hkv, c.Sq, c.Skv, c.D, c.D};
  const ref::MaskSpec &mask = masks.mask;
  ref::ScoreMod mod = c.softcap ? masks.softcap : ref::ScoreMod{};
  double scale = 1.0 / std::sqrt(double(c.D));
  ref::AttentionStatistics expected =
      ref::attentionStatistics(shape, double(float(scale)), mask, mod,
                               q.values.data(), k.values.data(), c.Gq, c.Gk);
  // The statistics are computed in f32 from the inputs as rounded.
  const double tolerance = 2e-5;
  EXPECT_LE(errorOf(entropy.values, expected.entropy, 1e-3), tolerance)
      << "entropy";
  EXPECT_LE(errorOf(mean.values, expected.meanEntropy, 1e-3), tolerance)
      << "mean entropy";
  EXPECT_LE(errorOf(pooled.values, expected.pooled, 1e-6), tolerance)
      << "pooled";
  EXPECT_LE(errorOf(sim.values, expected.similarity, 1e-3), tolerance)
      << "similarity";
  if (!gradients)
    return;

  // Cotangents of every result (pooled's and similarity's are ignored).
  std::vector<Buffer> cot;
  for (Buffer *r : results) {
    cot.emplace_back(r->values.size(), r->dtype);
    ref::fillRandom(cot.back().values.data(), cot.back().values.size(),
                    seed + 10 + cot.size());
    cot.back().pack();
  }
  Buffer dq(q.values.size(), c.dtype), dk(k.values.size(), c.dtype),
      dv(v.values.size(), c.dtype);
  std::vector<Buffer *> bwd = inputs;
  bwd.insert(bwd.end(), results.begin(), results.end());
  bwd.push_back(&lse);
  for (Buffer &x : cot)
    bwd.push_back(&x);
  bwd.insert(bwd.end(), {&dq, &dk, &dv});
  for (Buffer *r : results)
    r->pack();
  status = call(*module, "stats_bwd", bwd);
  ASSERT_TRUE(status.ok()) << status.error << " status " << status.status;
  for (Buffer *g : {&dq, &dk, &dv})
    g->unpack();

  std::vector<double> eq(q.values.size()), ek(k.values.size()),
      ev(v.values.size()), hq(q.values.size()), hk(k.values.size());
  ref::attentionBackward(shape, double(float(scale)), mask, mod,
                         q.values.data(), k.values.data(), v.values.data(),
                         cot[0].values.data(), eq.data(), ek.data(), ev.data());
  ref::entropyBackward(shape, double(float(scale)), mask, mod, q.values.data(),
                       k.values.data(), cot[1].values.data(),
                       cot[2].values.data(), hq.data(), hk.data());
  for (size_t i = 0; i < eq.size(); ++i)
    eq[i] += hq[i];
  for (size_t i = 0; i < ek.size(); ++i)
    ek[i] += hk[i];
  const double gradTolerance = c.dtype == "f32" ? 1e-4 : 3e-2;
  EXPECT_LE(errorOf(dq.values, eq, 1.0), gradTolerance) << "d_q";
  EXPECT_LE(errorOf(dk.values, ek, 1.0), gradTolerance) << "d_k";
  EXPECT_LE(errorOf(dv.values, ev, 1.0), gradTolerance) << "d_v";
}

TEST(StatsTest, EveryStatisticMatchesTheReference) {
  StatsCase c;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Sq = 40, c.Skv = 48, c.Gq = 8, c.Gk = 6;
  c.causal = true;
  runCase(c, 1, /*gradients=*/false);
}

TEST(StatsTest, MasksScoreModsAndGrids) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 12; ++n) {
    StatsCase c;
    c.B = 1 + rng() % 2;
    c.Hkv = 1 + rng() % 2;
    c.H = c.Hkv * (1 + rng() % 3);
    c.Sq = 1 + rng() % 70;
    c.Skv = 1 + rng() % 90;
    c.D = 16 * (1 + rng() % 2);
    c.Gq = 1 + rng() % c.Sq;
    c.Gk = 1 + rng() % c.Skv;
    c.causal = rng() % 3 == 0;
    c.window = rng() % 4 == 0 ? 1 + rng() % 20 : 0;
    c.lengths = rng() % 3 == 0;
    c.softcap = rng() % 3 == 0;
    c.documents = rng() % 4 == 0;
    c.dtype = rng() % 3 == 0 ? "bf16" : "f32";
    runCase(c, 100 + n, /*gradients=*/n % 2 == 0);
  }
}

TEST(StatsTest, FullyMaskedRowsHaveZeroStatistics) {
  StatsCase c;
  c.B = 3, c.H = 2, c.Sq = 17, c.Skv = 33, c.Gq = 4, c.Gk = 4;
  c.lengths = true; // batch 0: no key at all
  runCase(c, 5, /*gradients=*/true);
}

TEST(StatsTest, EntropyGradients) {
  StatsCase c;
  c.B = 1, c.H = 4, c.Hkv = 2, c.Sq = 37, c.Skv = 45, c.Gq = 3, c.Gk = 5;
  c.softcap = true;
  c.causal = true;
  runCase(c, 9, /*gradients=*/true);
  c.dtype = "bf16";
  runCase(c, 10, /*gradients=*/true);
}

/// Grids whose row cells hold a query tile or more: the forward kernel
/// (AVX-512, or AMX for bf16 from 64 query rows) pools P itself.
TEST(StatsTest, PooledMapsInTheForward) {
  StatsCase c;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Sq = 100, c.Skv = 130, c.D = 32, c.Gq = 3,
  c.Gk = 7;
  c.causal = true;
  c.lengths = true;
  runCase(c, 21, /*gradients=*/false);
  c.dtype = "bf16";
  runCase(c, 22, /*gradients=*/false);
  c.causal = false;
  c.lengths = false;
  c.window = 37;
  c.Gq = 1, c.Gk = 130;
  runCase(c, 23, /*gradients=*/false);
  c.dtype = "f32";
  c.Sq = 1, c.Skv = 300, c.Gk = 11, c.window = 0;
  runCase(c, 24, /*gradients=*/false);
}

/// Rows over many key blocks: the forward's online sums move to each new
/// running max (a row of one block never exercises the rescale).
TEST(StatsTest, RowsOverManyKeyBlocks) {
  StatsCase c;
  c.B = 1, c.H = 2, c.Sq = 70, c.Skv = 1100, c.D = 32, c.Gq = 2, c.Gk = 9;
  runCase(c, 31, /*gradients=*/true);
  c.dtype = "bf16";
  c.lengths = true, c.B = 2;
  runCase(c, 32, /*gradients=*/false);
  c.dtype = "f32";
  c.window = 300, c.lengths = false;
  runCase(c, 33, /*gradients=*/true);
}

/// The head similarity in the forward: a task covers every head of its
/// query tiles and sums each row's <P_h, P_g>, moved to each new pair of
/// running maxima, into its partial. Many heads (fewer tiles per task: 78
/// head pairs), several tasks per batch, rows over many key blocks; grids
/// whose key cells hold whole key blocks (the pooled map's sum per block)
/// and grids that do not.
TEST(StatsTest, SimilarityOfManyHeadsInTheForward) {
  StatsCase c;
  c.B = 2, c.H = 12, c.Hkv = 3, c.Sq = 150, c.Skv = 1500, c.D = 16, c.Gq = 2,
  c.Gk = 2;
  c.lengths = true;
  runCase(c, 61, /*gradients=*/false);
  c.dtype = "bf16", c.Gk = 3, c.lengths = false, c.softcap = true;
  runCase(c, 62, /*gradients=*/true);
  c.dtype = "f32", c.H = 5, c.Hkv = 5, c.Sq = 300, c.Skv = 600, c.Gk = 600;
  c.softcap = false, c.causal = true, c.documents = true;
  runCase(c, 63, /*gradients=*/false);
}

/// Statistics over an LSE the caller passes (no attention in the spec): the
/// statistics kernel computes the entropies itself.
TEST(StatsTest, StatisticsOfAGivenLse) {
  const int64_t B = 2, H = 4, Hkv = 1, Sq = 45, Skv = 70, D = 32, Gq = 5,
                Gk = 7;
  std::string qT = tensorType({B, H, Sq, D}), kT = tensorType({B, Hkv, Skv, D}),
              lseT = tensorType({B, H, Sq}), meanT = tensorType({B, H}),
              poolT = tensorType({B, H, Gq, Gk}), simT = tensorType({B, H, H});
  std::ostringstream spec;
  spec << "func.func @stats(%q: " << qT << ", %k: " << kT << ", %lse: " << lseT
       << ") -> (" << lseT << ", " << meanT << ", " << poolT << ", " << simT
       << ") {\n  %h, %m, %p, %s = attn.attention_stats %q, %k, %lse window "
          "30 : "
       << qT << ", " << kT << ", " << lseT << " -> entropy " << lseT
       << " mean_entropy " << meanT << " pooled " << poolT << " similarity "
       << simT << "\n  return %h, %m, %p, %s : " << lseT << ", " << meanT
       << ", " << poolT << ", " << simT << "\n}\n";
  SCOPED_TRACE(spec.str());
  jit::Options options = test::testOptions();
  options.backward = false;
  std::string error;
  auto module = jit::Module::compile(spec.str(), options, &error);
  ASSERT_TRUE(module) << error;
  Buffer q(B * H * Sq * D, "f32"), k(B * Hkv * Skv * D, "f32"),
      v(B * Hkv * Skv * D, "f32"), lse(B * H * Sq, "f32"),
      entropy(B * H * Sq, "f32"), mean(B * H, "f32"),
      pooled(B * H * Gq * Gk, "f32"), sim(B * H * H, "f32");
  ref::fillRandom(q.values.data(), q.values.size(), 3, -2, 2);
  ref::fillRandom(k.values.data(), k.values.size(), 4, -2, 2);
  q.pack();
  k.pack();
  ref::AttentionShape shape{B, H, Hkv, Sq, Skv, D, D};
  ref::MaskSpec mask;
  mask.window = 30;
  double scale = double(float(1.0 / std::sqrt(double(D))));
  std::vector<double> o(B * H * Sq * D);
  ref::attentionForward(shape, scale, mask, {}, q.values.data(),
                        k.values.data(), v.values.data(), o.data(),
                        lse.values.data());
  lse.pack();
  jit::Result status =
      call(*module, "stats", {&q, &k, &lse, &entropy, &mean, &pooled, &sim});
  ASSERT_TRUE(status.ok()) << status.error << " status " << status.status;
  for (Buffer *r : {&entropy, &mean, &pooled, &sim})
    r->unpack();
  ref::AttentionStatistics expected = ref::attentionStatistics(
      shape, scale, mask, {}, q.values.data(), k.values.data(), Gq, Gk);
  EXPECT_LE(errorOf(entropy.values, expected.entropy, 1e-3), 2e-5);
  EXPECT_LE(errorOf(mean.values, expected.meanEntropy, 1e-3), 2e-5);
  EXPECT_LE(errorOf(pooled.values, expected.pooled, 1e-6), 2e-5);
  EXPECT_LE(errorOf(sim.values, expected.similarity, 1e-3), 2e-5);
}

/// attn.attention_stats_grad over an LSE argument (no attention backward
/// takes it in; on CPU its own kernel): the partial derivatives for that
/// LSE. Given the rows' own LSE, they and the LSE's path (dLSE_i p_ij into
/// dS') sum to the reference's total entropy gradients, element by element,
/// and dLSE_i = g_i (1 - H_i).
void gradientsOfAGivenLse(const StatsCase &c, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  std::string qT = tensorType({c.B, c.H, c.Sq, c.D}, c.dtype),
              kT = tensorType({c.B, c.Hkv, c.Skv, c.D}, c.dtype),
              lseT = tensorType({c.B, c.H, c.Sq}),
              meanT = tensorType({c.B, c.H});
  CaseParts parts = partsOf(c);
  std::ostringstream os;
  os << "func.func @g(%q: " << qT << ", %k: " << kT << ", %lse: " << lseT
     << parts.args << ") -> (" << lseT << ", " << meanT << ") {\n"
     << "  %h, %m = attn.attention_stats %q, %k, %lse" << parts.options << " : "
     << qT << ", " << kT << ", " << lseT << " -> entropy " << lseT
     << " mean_entropy " << meanT << parts.regions << "\n"
     << "  return %h, %m : " << lseT << ", " << meanT << "\n}\n";
  std::string spec = os.str();
  SCOPED_TRACE(spec);
  std::string error;
  jit::Options options = test::testOptions();
  options.cpu = c.cpu;
  options.target = c.target;
  auto module = jit::Module::compile(spec, options, &error);
  ASSERT_TRUE(module) << error;
  const int64_t rows = c.B * c.H * c.Sq;
  Buffer q(rows * c.D, c.dtype), k(c.B * c.Hkv * c.Skv * c.D, c.dtype),
      lse(rows, "f32"), slopes(c.H, "f32"), entropy(rows, "f32"),
      mean(c.B * c.H, "f32"), dEntropy(rows, "f32"), dMean(c.B * c.H, "f32"),
      dq(rows * c.D, c.dtype), dk(c.B * c.Hkv * c.Skv * c.D, c.dtype),
      dlse(rows, "f32"), dslopes(c.H, "f32");
  ref::fillRandom(q.values.data(), q.values.size(), seed + 1, -2, 2);
  ref::fillRandom(k.values.data(), k.values.size(), seed + 2, -2, 2);
  ref::fillRandom(slopes.values.data(), slopes.values.size(), seed + 3, -0.3,
                  0.3);
  ref::fillRandom(dEntropy.values.data(), rows, seed + 4);
  ref::fillRandom(dMean.values.data(), c.B * c.H, seed + 5);
  for (Buffer *x : {&q, &k, &slopes, &dEntropy, &dMean})
    x->pack();
  CaseMasks masks(c, seed);
  ref::AttentionShape shape{c.B, c.H, c.Hkv, c.Sq, c.Skv, c.D, c.D};
  const ref::MaskSpec &mask = masks.mask;
  // The ALiBi slopes' gradient accumulates into *slopeGrads.
  std::vector<double> *slopeGrads = nullptr;
  ref::ScoreMod mod = c.softcap ? masks.softcap : ref::ScoreMod{};
  if (c.alibi) {
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + slopes.values[h] * double(j - i);
    };
    mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
    mod.accumulateCaptureGrad = [&](double, int64_t, int64_t h, int64_t i,
                                    int64_t j, double dSPrime) {
      (*slopeGrads)[h] += dSPrime * double(j - i);
    };
  }
  double scale = double(float(1.0 / std::sqrt(double(c.D))));
  // The rows' own LSE (rounded to f32, as the kernels read it).
  std::vector<double> o(rows * c.D), v(c.B * c.Hkv * c.Skv * c.D);
  ref::attentionForward(shape, scale, mask, mod, q.values.data(),
                        k.values.data(), v.data(), o.data(), lse.values.data());
  lse.pack();
  std::vector<Buffer *> inputs = {&q, &k, &lse};
  if (c.lengths)
    inputs.push_back(&masks.len);
  if (c.alibi)
    inputs.push_back(&slopes);
  if (c.documents)
    inputs.insert(inputs.end(), {&masks.docQ, &masks.docK});
  std::vector<Buffer *> args = inputs;
  args.insert(args.end(),
              {&entropy, &mean, &dEntropy, &dMean, &dq, &dk, &dlse});
  if (c.alibi)
    args.push_back(&dslopes);
  jit::Result status = call(*module, "g_bwd", args);
  if (test::noVulkanDevice(status))
    GTEST_SKIP() << "no Vulkan device";
  ASSERT_TRUE(status.ok()) << status.error << " status " << status.status;
  for (Buffer *g : {&dq, &dk, &dlse, &dslopes})
    g->unpack();
  // The totals, and the LSE's path from the kernel's dLSE.
  std::vector<double> eq(q.values.size()), ek(k.values.size()),
      lq(q.values.size()), lk(k.values.size()), es(c.H), ls(c.H);
  slopeGrads = &es;
  ref::entropyBackward(shape, scale, mask, mod, q.values.data(),
                       k.values.data(), dEntropy.values.data(),
                       dMean.values.data(), eq.data(), ek.data());
  slopeGrads = &ls;
  ref::attentionLseBackward(shape, scale, mask, mod, q.values.data(),
                            k.values.data(), dlse.values.data(), lq.data(),
                            lk.data());
  std::vector<double> sq(q.values.size()), sk(k.values.size()), ss(c.H);
  for (size_t i = 0; i < sq.size(); ++i)
    sq[i] = dq.values[i] + lq[i];
  for (size_t i = 0; i < sk.size(); ++i)
    sk[i] = dk.values[i] + lk[i];
  for (int64_t h = 0; h < c.H; ++h)
    ss[h] = dslopes.values[h] + ls[h];
  // dLSE = g (1 - H), g the entropy's cotangent plus the mean's share.
  ref::AttentionStatistics stats = ref::attentionStatistics(
      shape, scale, mask, mod, q.values.data(), k.values.data(), 1, 1);
  std::vector<double> el(rows);
  for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
    int64_t seen = 0;
    for (int64_t i = 0; i < c.Sq; ++i)
      seen += std::isfinite(lse.values[bh * c.Sq + i]);
    for (int64_t i = 0; i < c.Sq; ++i) {
      int64_t n = bh * c.Sq + i;
      if (!std::isfinite(lse.values[n]))
        continue;
      double g = dEntropy.values[n] + dMean.values[bh] / double(seen);
      el[n] = g * (1 - stats.entropy[n]);
    }
  }
  const double tolerance = c.dtype == "f32" ? 1e-4 : 3e-2;
  EXPECT_LE(errorOf(sq, eq, 1.0), tolerance) << "d_q";
  EXPECT_LE(errorOf(sk, ek, 1.0), tolerance) << "d_k";
  EXPECT_LE(errorOf(dlse.values, el, 1.0), 1e-4) << "d_lse";
  if (c.alibi)
    EXPECT_LE(errorOf(ss, es, 1.0), tolerance) << "d_slopes";
}

TEST(StatsTest, GradientsOfAGivenLse) {
  StatsCase c;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Sq = 70, c.Skv = 300, c.D = 32;
  c.causal = true;
  gradientsOfAGivenLse(c, 101);
  c.alibi = true, c.lengths = true;
  gradientsOfAGivenLse(c, 102);
  c.alibi = false, c.causal = false, c.window = 50, c.softcap = true;
  c.dtype = "bf16", c.D = 64;
  gradientsOfAGivenLse(c, 103);
  c.window = 0, c.softcap = false, c.documents = true, c.dtype = "f32";
  c.Sq = 13, c.Skv = 500, c.H = 3, c.Hkv = 1, c.D = 16;
  gradientsOfAGivenLse(c, 104);
  // Head dimensions the CPU kernel does not take (the unfused lowering),
  // generic CPUs, and the GPU kernels through Vulkan.
  c = StatsCase{};
  c.B = 1, c.H = 2, c.Hkv = 1, c.Sq = 20, c.Skv = 40, c.D = 7;
  c.causal = true, c.alibi = true;
  gradientsOfAGivenLse(c, 105);
  c.D = 32;
  for (const char *cpu : {"x86-64", "x86-64-v3"}) {
    c.cpu = cpu;
    gradientsOfAGivenLse(c, 106);
  }
  c.cpu = "native", c.target = jit::Target::Vulkan, c.lengths = true;
  c.B = 2;
  gradientsOfAGivenLse(c, 107);
  // Random shapes and options on the CPU: a query row or a key alone, rows
  // that see nothing, GQA, f16 and bf16.
  std::mt19937_64 rng(108);
  for (int n = 0; n < 12; ++n) {
    c = StatsCase{};
    c.B = 1 + rng() % 2;
    c.Hkv = 1 + rng() % 3;
    c.H = c.Hkv * (1 + rng() % 3);
    c.Sq = 1 + rng() % 60;
    c.Skv = 1 + rng() % 300;
    c.D = 16 * int64_t(1 + rng() % 5);
    c.causal = rng() % 3 == 0;
    c.window = rng() % 4 == 0 ? 1 + rng() % 40 : 0;
    c.lengths = rng() % 3 == 0;
    c.documents = rng() % 4 == 0;
    int mod = int(rng() % 3);
    c.softcap = mod == 1;
    c.alibi = mod == 2;
    c.dtype = std::vector<std::string>{"f32", "bf16", "f16"}[rng() % 3];
    gradientsOfAGivenLse(c, 110 + n);
  }
}

/// CPUs without AVX-512 (x86-64: 128-bit vectors, one query row a
/// register block; x86-64-v3: AVX2): the kernels' generic paths.
TEST(StatsTest, GenericCpus) {
  StatsCase c;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Sq = 70, c.Skv = 300, c.D = 32, c.Gq = 2,
  c.Gk = 7;
  c.causal = true, c.softcap = true;
  for (const char *cpu : {"x86-64", "x86-64-v3"}) {
    c.cpu = cpu;
    runCase(c, 51, /*gradients=*/true);
  }
  c.Gq = 35, c.dtype = "bf16", c.lengths = true, c.causal = false;
  for (const char *cpu : {"x86-64", "x86-64-v3"}) {
    c.cpu = cpu;
    runCase(c, 52, /*gradients=*/false);
  }
}

/// The GPU kernels through Vulkan (lavapipe in the test suite): the
/// statistics recomputed from the LSE a key block at a time, never P.
TEST(StatsTest, VulkanKernels) {
  StatsCase c;
  c.target = jit::Target::Vulkan;
  c.B = 2, c.H = 4, c.Hkv = 2, c.Sq = 40, c.Skv = 70, c.Gq = 8, c.Gk = 6;
  c.causal = true;
  runCase(c, 71, /*gradients=*/true);
  // Many heads (78 head pairs over 64 invocations), GQA, rows over many
  // key blocks, an empty batch; key cells smaller than a key block (one
  // key each) and larger ones.
  c.B = 2, c.H = 12, c.Hkv = 3, c.Sq = 70, c.Skv = 300, c.Gq = 5, c.Gk = 300;
  c.causal = false, c.lengths = true;
  runCase(c, 73, /*gradients=*/true);
  c.Gk = 7, c.dtype = "bf16", c.lengths = false, c.window = 40;
  c.softcap = true;
  runCase(c, 74, /*gradients=*/false);
  c.dtype = "f32", c.window = 0, c.softcap = false, c.documents = true;
  c.Sq = 33, c.Gq = 33;
  runCase(c, 75, /*gradients=*/true);
  std::mt19937_64 rng(72);
  for (int n = 0; n < 10; ++n) {
    c = StatsCase{};
    c.target = jit::Target::Vulkan;
    c.B = 1 + rng() % 2;
    c.Hkv = 1 + rng() % 2;
    c.H = c.Hkv * (1 + rng() % 3);
    c.Sq = 1 + rng() % 50;
    c.Skv = 1 + rng() % 90;
    c.D = std::vector<int64_t>{1, 7, 16, 32, 80}[rng() % 5];
    c.Gq = 1 + rng() % c.Sq;
    c.Gk = 1 + rng() % c.Skv;
    c.causal = rng() % 3 == 0;
    c.window = rng() % 4 == 0 ? 1 + rng() % 20 : 0;
    c.lengths = rng() % 3 == 0;
    c.softcap = rng() % 3 == 0;
    c.documents = rng() % 4 == 0;
    c.dtype = rng() % 3 == 0 ? "bf16" : "f32";
    runCase(c, 80 + n, /*gradients=*/n % 3 == 0);
  }
}

TEST(StatsTest, InvalidGridIsALocatedError) {
  std::string spec = R"(
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %l: tensor<1x2x8xf32>) -> tensor<1x2x9x4xf32> {
  %p = attn.attention_stats %q, %k, %l : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> pooled tensor<1x2x9x4xf32>
  return %p : tensor<1x2x9x4xf32>
})";
  std::string error;
  EXPECT_FALSE(jit::Module::compile(spec, test::testOptions(), &error));
  EXPECT_NE(error.find("3:8"), std::string::npos) << error;
  EXPECT_NE(error.find("pooled's grid 9 x 4"), std::string::npos) << error;
}

} // namespace
