// Compiled kernels against the float64 reference, on random specs, shapes
// and inputs (through the JIT, which runs the same pipeline as attnc compile).
#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

using namespace attnc;

namespace {

using test::Buffer;
using test::noVulkanDevice;
using test::tensorType;
using test::testOptions;

// NegInf: -inf for every key of row 0 and for key 1 of every row (masking
// in a score_mod, FlexAttention's idiom). NonFinite: +inf at (i, j) =
// (2, 3) and NaN at (4, 5).
enum class ScoreModKind {
  None,
  Alibi,
  Softcap,
  BiasTable,
  NegInf,
  NonFinite,
  RelativeTable, // rel[h, j - i + Sq - 1]: a bias per head and distance
  HeadScales     // s t[h] + t[H] (j - i) / 64: two reads per head, one at a
                 // constant
};

struct AttentionCase {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, Skv = 1, D = 1, Dv = 1;
  std::string dtype = "f32";
  bool causal = false;
  int64_t window = 0;
  bool cache = false; // causal and window from the end of the keys
  bool lengths = false;
  // varlen: this many packed sequences (0: none); Sq == Skv, no cache.
  int64_t sequences = 0;
  ScoreModKind scoreMod = ScoreModKind::None;
  bool documentMask = false;
  // causal and window written as a mask_mod region (affine comparisons of
  // i and j that attn-plan-tiles turns back into named masks).
  bool maskAsRegion = false;
  // Conjuncts of affine index comparisons in the mask_mod region: each
  // compares a*i + c*j + k (index arithmetic) with a constant through a
  // predicate (attn-plan-tiles turns some of them into named masks).
  struct AffineConjunct {
    std::string predicate; // arith.cmpi predicate
    int64_t a = 0, c = 0, k = 0, rhs = 0;
    bool holds(int64_t i, int64_t j) const {
      int64_t x = a * i + c * j + k;
      uint64_t ux = uint64_t(x), ur = uint64_t(rhs);
      if (predicate == "slt") return x < rhs;
      if (predicate == "sle") return x <= rhs;
      if (predicate == "sgt") return x > rhs;
      if (predicate == "sge") return x >= rhs;
      if (predicate == "ult") return ux < ur;
      if (predicate == "ule") return ux <= ur;
      if (predicate == "ugt") return ux > ur;
      if (predicate == "uge") return ux >= ur;
      if (predicate == "eq") return x == rhs;
      return x != rhs;
    }
  };
  std::vector<AffineConjunct> affineMask;
  bool graphForm = false; // attn.scores ... attn.apply instead of attn.attention
  bool fuse = true;       // jit::Options::fuse (graph form: flash or unfused)
  std::string cpu = "native"; // jit::Options::cpu
  // ALiBi's slopes as a constant in the spec (constantSlope(h)), not an
  // argument: nothing reads their gradient.
  bool constantSlopes = false;
  jit::Target target = jit::Target::Cpu;
  double scale = 0;       // 0: the default 1/sqrt(D)
  double inputScale = 1;  // Q and K times this (large logits)
  double tolerance = 0;   // if larger than the dtype's (ill-conditioned cases)
  // If set, the float captures' gradients' (smaller than the dtype's,
  // where their errors are those of the f32 sums: a check that would pass
  // an uncorrected error of bf16 rounding).
  double captureTolerance = 0;
  // O's, the LSE's and the gradients' tolerances times this (logits larger
  // than a few units: see randomFlashCase).
  double conditioning = 1;
  // K and V rows past each batch's length hold NaN (a cache's unwritten
  // rows): no result may change (the reference sees zeros there).
  bool nanPastLengths = false;
  // The batch written as `?` (codegen/DynamicBatch.h), B given at the call.
  bool dynamicBatch = false;
  // A call that returns ATTNC_STATUS_DEVICE_LIMIT (lavapipe cut its loops
  // short, and the kernel said so) ends the case without a failure: random
  // Vulkan cases may be larger than lavapipe runs.
  bool deviceLimitEnds = false;

  std::string describe() const {
    std::ostringstream os;
    os << "B=" << B << " H=" << H << " Hkv=" << Hkv << " Sq=" << Sq
       << " Skv=" << Skv << " D=" << D << " Dv=" << Dv << " " << dtype
       << (causal ? " causal" : "") << " window=" << window
       << (cache ? " cache" : "") << (lengths ? " lengths" : "")
       << " sequences=" << sequences << " mod=" << int(scoreMod)
       << (documentMask ? " documents" : "")
       << (maskAsRegion ? " mask-region" : "") << (graphForm ? " graph" : "")
       << " affine-conjuncts=" << affineMask.size() << (fuse ? "" : " unfused")
       << " cpu=" << cpu << (target == jit::Target::Vulkan ? " vulkan" : "")
       << " scale=" << scale << " inputs x" << inputScale
       << (nanPastLengths ? " NaN past the lengths" : "")
       << (dynamicBatch ? " dynamic batch" : "");
    return os.str();
  }
};

/// The slope of head h where a case's are constants.
double constantSlope(int64_t h) { return 1.0 / double(h + 2); }

/// The spec of one case; arguments: q, k, v, [lengths], [varlen offsets],
/// [score capture], [doc_q, doc_k]; results: O (and LSE for the fused
/// form).
std::string specFor(const AttentionCase &c) {
  // A tensor with the batch first: "tensor<?x..." for a dynamic one.
  auto batched = [&](std::initializer_list<int64_t> rest,
                     const std::string &dtype) {
    std::string type = tensorType(rest, dtype);
    return "tensor<" +
           (c.dynamicBatch ? std::string("?") : std::to_string(c.B)) + "x" +
           type.substr(7);
  };
  std::string qT = batched({c.H, c.Sq, c.D}, c.dtype),
              kT = batched({c.Hkv, c.Skv, c.D}, c.dtype),
              vT = batched({c.Hkv, c.Skv, c.Dv}, c.dtype),
              oT = batched({c.H, c.Sq, c.Dv}, c.dtype),
              lseT = batched({c.H, c.Sq}, "f32"),
              sT = batched({c.H, c.Sq, c.Skv}, "f32"),
              lenT = "tensor<" +
                     (c.dynamicBatch ? std::string("?") : std::to_string(c.B)) +
                     "xi32>",
              cuT = tensorType({c.sequences + 1}, "i32"),
              docQT = tensorType({c.Sq}, "i32"),
              docKT = tensorType({c.Skv}, "i32");
  std::string capT;
  if (c.scoreMod == ScoreModKind::Alibi)
    capT = tensorType({c.H}, "f32");
  if (c.scoreMod == ScoreModKind::BiasTable)
    capT = tensorType({c.H, c.Sq, c.Skv}, "f32");
  if (c.scoreMod == ScoreModKind::RelativeTable)
    capT = tensorType({c.H, c.Sq + c.Skv - 1}, "f32");
  if (c.scoreMod == ScoreModKind::HeadScales)
    capT = tensorType({c.H + 1}, "f32");

  std::ostringstream os;
  os << "func.func @kernel(%q: " << qT << ", %k: " << kT << ", %v: " << vT;
  if (c.lengths)
    os << ", %len: " << lenT;
  if (c.sequences)
    os << ", %cu: " << cuT;
  if (!capT.empty() && !c.constantSlopes)
    os << ", %cap: " << capT;
  if (c.documentMask)
    os << ", %dq: " << docQT << ", %dk: " << docKT;
  os << ") -> ";
  if (c.graphForm)
    os << oT;
  else
    os << "(" << oT << ", " << lseT << ")";
  os << " {\n";
  if (c.constantSlopes) {
    os << "  %cap = arith.constant dense<[";
    for (int64_t h = 0; h < c.H; ++h)
      os << (h ? ", " : "") << constantSlope(h);
    os << "]> : " << capT << "\n";
  }

  std::string captureArg = capT.empty() ? "" : ", %c: " + capT;
  std::ostringstream scoreModBody;
  scoreModBody << "^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index"
               << captureArg << "):\n";
  switch (c.scoreMod) {
  case ScoreModKind::Alibi:
    scoreModBody << "  %sl = tensor.extract %c[%h] : " << capT << "\n"
                 << "  %d = arith.subi %j, %i : index\n"
                 << "  %di = arith.index_cast %d : index to i64\n"
                 << "  %df = arith.sitofp %di : i64 to f32\n"
                 << "  %bias = arith.mulf %sl, %df : f32\n"
                 << "  %r = arith.addf %s, %bias : f32\n";
    break;
  case ScoreModKind::Softcap:
    scoreModBody << "  %cap = arith.constant 20.0 : f32\n"
                 << "  %x = arith.divf %s, %cap : f32\n"
                 << "  %t = math.tanh %x : f32\n"
                 << "  %r = arith.mulf %t, %cap : f32\n";
    break;
  case ScoreModKind::BiasTable:
    scoreModBody << "  %bias = tensor.extract %c[%h, %i, %j] : " << capT
                 << "\n  %r = arith.addf %s, %bias : f32\n";
    break;
  case ScoreModKind::RelativeTable:
    scoreModBody << "  %last = arith.constant " << c.Sq - 1 << " : index\n"
                 << "  %d = arith.subi %j, %i : index\n"
                 << "  %at = arith.addi %d, %last : index\n"
                 << "  %bias = tensor.extract %c[%h, %at] : " << capT
                 << "\n  %r = arith.addf %s, %bias : f32\n";
    break;
  case ScoreModKind::HeadScales:
    scoreModBody << "  %last = arith.constant " << c.H << " : index\n"
                 << "  %step = arith.constant 0.015625 : f32\n"
                 << "  %t = tensor.extract %c[%h] : " << capT << "\n"
                 << "  %u = tensor.extract %c[%last] : " << capT << "\n"
                 << "  %d = arith.subi %j, %i : index\n"
                 << "  %di = arith.index_cast %d : index to i64\n"
                 << "  %df = arith.sitofp %di : i64 to f32\n"
                 << "  %ud = arith.mulf %u, %df : f32\n"
                 << "  %bias = arith.mulf %ud, %step : f32\n"
                 << "  %st = arith.mulf %s, %t : f32\n"
                 << "  %r = arith.addf %st, %bias : f32\n";
    break;
  case ScoreModKind::NegInf:
    scoreModBody << "  %c0 = arith.constant 0 : index\n"
                 << "  %c1 = arith.constant 1 : index\n"
                 << "  %ninf = arith.constant 0xFF800000 : f32\n"
                 << "  %first = arith.cmpi eq, %i, %c0 : index\n"
                 << "  %one = arith.cmpi eq, %j, %c1 : index\n"
                 << "  %either = arith.ori %first, %one : i1\n"
                 << "  %r = arith.select %either, %ninf, %s : f32\n";
    break;
  case ScoreModKind::NonFinite:
    scoreModBody << "  %c2 = arith.constant 2 : index\n"
                 << "  %c3 = arith.constant 3 : index\n"
                 << "  %c4 = arith.constant 4 : index\n"
                 << "  %c5 = arith.constant 5 : index\n"
                 << "  %pinf = arith.constant 0x7F800000 : f32\n"
                 << "  %nan = arith.constant 0x7FC00000 : f32\n"
                 << "  %i2 = arith.cmpi eq, %i, %c2 : index\n"
                 << "  %j3 = arith.cmpi eq, %j, %c3 : index\n"
                 << "  %i4 = arith.cmpi eq, %i, %c4 : index\n"
                 << "  %j5 = arith.cmpi eq, %j, %c5 : index\n"
                 << "  %at23 = arith.andi %i2, %j3 : i1\n"
                 << "  %at45 = arith.andi %i4, %j5 : i1\n"
                 << "  %r1 = arith.select %at23, %pinf, %s : f32\n"
                 << "  %r = arith.select %at45, %nan, %r1 : f32\n";
    break;
  case ScoreModKind::None:
    break;
  }
  scoreModBody << "  attn.yield %r : f32\n}";
  // The mask_mod region: document masks, and causal/window as comparisons
  // (j <= i as i >= j; the window as (i - j) <u W, which implies j <= i).
  bool regionMasks = c.maskAsRegion && (c.causal || c.window);
  bool hasMaskMod = c.documentMask || regionMasks || !c.affineMask.empty();
  std::ostringstream maskModBody;
  maskModBody << "^bb0(%b: index, %h: index, %i: index, %j: index"
              << (c.documentMask ? ", %a: " + docQT + ", %z: " + docKT : "")
              << "):\n";
  std::string visible;
  auto conjoin = [&](const std::string &value) {
    if (visible.empty()) {
      visible = value;
      return;
    }
    maskModBody << "  %and" << value.substr(1) << " = arith.andi " << visible
                << ", " << value << " : i1\n";
    visible = "%and" + value.substr(1);
  };
  if (c.documentMask) {
    maskModBody << "  %x = tensor.extract %a[%i] : " << docQT
                << "\n  %y = tensor.extract %z[%j] : " << docKT
                << "\n  %e = arith.cmpi eq, %x, %y : i32\n";
    conjoin("%e");
  }
  if (regionMasks && c.causal) {
    maskModBody << "  %causal = arith.cmpi sge, %i, %j : index\n";
    conjoin("%causal");
  }
  if (regionMasks && c.window) {
    maskModBody << "  %w = arith.constant " << c.window << " : index\n"
                << "  %d = arith.subi %i, %j : index\n"
                << "  %inw = arith.cmpi ult, %d, %w : index\n";
    conjoin("%inw");
  }
  for (size_t n = 0; n < c.affineMask.size(); ++n) {
    const AttentionCase::AffineConjunct &a = c.affineMask[n];
    std::string t = "%t" + std::to_string(n) + "_";
    // a*i + c*j + k as muli/addi/subi in varying orders.
    maskModBody << "  " << t << "a = arith.constant " << a.a << " : index\n"
                << "  " << t << "c = arith.constant " << a.c << " : index\n"
                << "  " << t << "k = arith.constant " << a.k << " : index\n"
                << "  " << t << "r = arith.constant " << a.rhs << " : index\n"
                << "  " << t << "ai = arith.muli " << t << "a, %i : index\n"
                << "  " << t << "cj = arith.muli %j, " << t << "c : index\n"
                << "  " << t << "s = arith.addi " << t << "ai, " << t
                << "cj : index\n"
                << "  " << t << "x = arith.addi " << t << "k, " << t
                << "s : index\n"
                << "  " << t << "p = arith.cmpi " << a.predicate << ", " << t
                << "x, " << t << "r : index\n";
    conjoin(t + "p");
  }
  maskModBody << "  attn.yield " << visible << " : i1\n}";

  std::string maskOptions;
  if (c.causal && !regionMasks)
    maskOptions += " causal";
  if (c.window && !regionMasks)
    maskOptions += " window " + std::to_string(c.window);
  if (c.cache)
    maskOptions += " cache";
  if (c.lengths)
    maskOptions += " lengths(%len : " + lenT + ")";
  if (c.sequences)
    maskOptions += " varlen(%cu : " + cuT + ")";

  if (c.graphForm) {
    os << "  %s0 = attn.scores %q, %k : " << qT << ", " << kT << " -> " << sT
       << "\n";
    if (c.scale)
      os << "  %s1 = attn.scale %s0 by " << c.scale << " : " << sT << "\n";
    else
      os << "  %s1 = attn.scale %s0 : " << sT << "\n";
    std::string last = "%s1";
    if (c.scoreMod != ScoreModKind::None) {
      os << "  %s2 = attn.score_mod %s1"
         << (capT.empty() ? "" : " captures(%cap : " + capT + ")") << " : "
         << sT << " {\n"
         << scoreModBody.str() << "\n";
      last = "%s2";
    }
    if (!maskOptions.empty() || hasMaskMod) {
      os << "  %s3 = attn.mask " << last << maskOptions
         << (c.documentMask
                 ? " captures(%dq, %dk : " + docQT + ", " + docKT + ")"
                 : "")
         << " : " << sT << (hasMaskMod ? " {\n" + maskModBody.str() : "")
         << "\n";
      last = "%s3";
    }
    os << "  %p = attn.softmax " << last << " : " << sT << "\n"
       << "  %o = attn.apply %p, %v : " << sT << ", " << vT << " -> " << oT
       << "\n  return %o : " << oT << "\n}\n";
    return os.str();
  }

  os << "  %o, %lse = attn.attention %q, %k, %v";
  if (c.scale)
    os << " scale " << c.scale;
  os << maskOptions;
  if (!capT.empty())
    os << " score_captures(%cap : " << capT << ")";
  if (c.documentMask)
    os << " mask_captures(%dq, %dk : " << docQT << ", " << docKT << ")";
  os << " : " << qT << ", " << kT << ", " << vT << " -> " << oT << ", "
     << lseT;
  if (c.scoreMod != ScoreModKind::None)
    os << " score_mod {\n" << scoreModBody.str();
  if (hasMaskMod)
    os << " mask_mod {\n" << maskModBody.str();
  os << "\n  return %o, %lse : " << oT << ", " << lseT << "\n}\n";
  return os.str();
}

double toleranceFor(const std::string &dtype) {
  // f32: accumulation error only. f16 keeps 11 significant bits, bf16 8:
  // a few roundings of inputs, probabilities and the output.
  if (dtype == "f32")
    return 1e-5;
  if (dtype == "f16")
    return 4e-3;
  return 2e-2;
}

/// Normwise error of a gradient, relative to max(|expected|_inf, 1). Inputs
/// are O(1), and so are gradients, except where they cancel: when every row
/// sees one key (Skv = 1, or key padding down to one key), dQ and dK are 0
/// by symmetry (P = 1, dS = dP - Delta = 0) and what is computed is the
/// rounding noise of O(1) terms; dividing by ~0 would measure nothing.
/// (NaN where the reference has NaN, through a row with a score of +inf or
/// NaN, agrees; NaN anywhere else, or a number there, does not.)
double gradientError(const std::vector<double> &actual,
                     const std::vector<double> &expected) {
  return test::errorOf(actual, expected, /*floor=*/1.0);
}

/// Calls entry point `name` with one host buffer per tensor: a checked call,
/// which on GPU targets also copies them to the device and back.
jit::Result callHost(const jit::Module &module, const std::string &name,
                     const std::vector<void *> &buffers, int64_t batch) {
  std::vector<jit::TensorRef> tensors;
  if (const jit::EntryPoint *found = module.find(name)) {
    jit::EntryPoint entry = found->atBatch(batch);
    for (size_t k = 0; k < entry.args.size() && k < buffers.size(); ++k)
      tensors.push_back({buffers[k], entry.args[k].shape, entry.args[k].dtype});
  }
  return module.call(name, tensors);
}

void runCase(const AttentionCase &c, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  std::string spec = specFor(c);
  SCOPED_TRACE(spec);
  std::string kernelsError;
  jit::Options options = testOptions();
  options.fuse = c.fuse;
  options.cpu = c.cpu;
  options.target = c.target;
  auto kernels = jit::Module::compile(spec, options, &kernelsError);
  ASSERT_TRUE(kernels) << kernelsError;
  // The fused form returns the LSE; a fused graph-form chain saves it.
  bool returnsLse = !c.graphForm, savesLse = c.graphForm && c.fuse;

  Buffer q(c.B * c.H * c.Sq * c.D, c.dtype),
      k(c.B * c.Hkv * c.Skv * c.D, c.dtype),
      v(c.B * c.Hkv * c.Skv * c.Dv, c.dtype),
      o(c.B * c.H * c.Sq * c.Dv, c.dtype), lse(c.B * c.H * c.Sq, "f32"),
      lengths(c.B, "i32"), offsets(c.sequences + 1, "i32"), docQ(c.Sq, "i32"),
      docK(c.Skv, "i32");
  ref::fillRandom(q.values.data(), q.values.size(), seed + 1, -2, 2);
  ref::fillRandom(k.values.data(), k.values.size(), seed + 2, -2, 2);
  ref::fillRandom(v.values.data(), v.values.size(), seed + 3);
  for (Buffer *x : {&q, &k})
    for (double &value : x->values)
      value *= c.inputScale;
  q.pack();
  k.pack();
  v.pack();
  std::mt19937_64 rng(seed);
  std::vector<int64_t> lengths64(c.B);
  for (int64_t b = 0; b < c.B; ++b) {
    // Batch 0 keeps no key at all when there are several batches, to check
    // fully masked rows; the rest get random lengths, some past Skv.
    // (A cache's lengths stay within its capacity: past it the call
    // returns ATTNC_STATUS_BAD_SIZE, see JitTest.)
    lengths64[b] = (b == 0 && c.B > 1)
                       ? 0
                       : int64_t(rng() % (c.Skv + (c.cache ? 1 : 3)));
    lengths.values[b] = double(lengths64[b]);
  }
  lengths.pack();
  // varlen: n + 1 sorted offsets in [0, Skv], equal ones (empty sequences)
  // and rows before the first or from the last outside every sequence.
  std::vector<int64_t> offsets64(c.sequences ? c.sequences + 1 : 0);
  for (int64_t &d : offsets64)
    d = int64_t(rng() % uint64_t(c.Skv + 1));
  std::sort(offsets64.begin(), offsets64.end());
  if (c.sequences && rng() % 2) { // often the whole range
    offsets64.front() = 0;
    offsets64.back() = c.Skv;
  }
  for (size_t d = 0; d < offsets64.size(); ++d)
    offsets.values[d] = double(offsets64[d]);
  offsets.pack();
  if (c.nanPastLengths) {
    // NaN in the kernel's bytes, 0 in the reference's values.
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t g = 0; g < c.Hkv; ++g)
        for (int64_t j = std::min(lengths64[b], c.Skv); j < c.Skv; ++j) {
          size_t row = size_t((b * c.Hkv + g) * c.Skv + j);
          std::fill_n(k.values.begin() + row * c.D, c.D,
                      std::numeric_limits<double>::quiet_NaN());
          std::fill_n(v.values.begin() + row * c.Dv, c.Dv,
                      std::numeric_limits<double>::quiet_NaN());
        }
    k.pack();
    v.pack();
    for (double *x = k.values.data(); x != k.values.data() + k.values.size();
         ++x)
      *x = std::isnan(*x) ? 0.0 : *x;
    for (double &x : v.values)
      x = std::isnan(x) ? 0.0 : x;
  }
  for (int64_t i = 0; i < c.Sq; ++i)
    docQ.values[i] = double(i * 3 / std::max<int64_t>(c.Sq, 1));
  for (int64_t j = 0; j < c.Skv; ++j)
    docK.values[j] = double(j * 3 / std::max<int64_t>(c.Skv, 1));
  docQ.pack();
  docK.pack();

  Buffer capture(0, "f32");
  if (c.scoreMod == ScoreModKind::Alibi)
    capture = Buffer(c.H, "f32");
  if (c.scoreMod == ScoreModKind::BiasTable)
    capture = Buffer(c.H * c.Sq * c.Skv, "f32");
  if (c.scoreMod == ScoreModKind::RelativeTable)
    capture = Buffer(c.H * (c.Sq + c.Skv - 1), "f32");
  if (c.scoreMod == ScoreModKind::HeadScales)
    capture = Buffer(c.H + 1, "f32");
  ref::fillRandom(capture.values.data(), capture.values.size(), seed + 4);
  if (c.constantSlopes)
    for (int64_t h = 0; h < c.H; ++h)
      capture.values[h] = constantSlope(h);
  capture.pack();

  std::vector<void *> args = {q.data(), k.data(), v.data()};
  if (c.lengths)
    args.push_back(lengths.data());
  if (c.sequences)
    args.push_back(offsets.data());
  if (!capture.values.empty() && !c.constantSlopes)
    args.push_back(capture.data());
  if (c.documentMask) {
    args.push_back(docQ.data());
    args.push_back(docK.data());
  }
  args.push_back(o.data());
  if (returnsLse)
    args.push_back(lse.data());
  auto status = callHost(*kernels, "kernel", args, c.B);
  if (noVulkanDevice(status))
    GTEST_SKIP() << "no Vulkan device";
  ASSERT_TRUE(status.error.empty()) << status.error;
  if (c.deviceLimitEnds && status.status == ATTNC_STATUS_DEVICE_LIMIT)
    return;
  ASSERT_EQ(status.status, 0);
  o.unpack();

  ref::MaskSpec mask;
  mask.causal = c.causal;
  mask.window = c.window;
  mask.cache = c.cache;
  mask.sq = c.Sq;
  mask.skv = c.Skv;
  if (c.lengths)
    mask.lengths = lengths64.data();
  if (c.sequences) {
    mask.offsets = offsets64.data();
    mask.numOffsets = int64_t(offsets64.size());
  }
  if (c.documentMask || !c.affineMask.empty())
    mask.maskMod = [&](int64_t, int64_t, int64_t i, int64_t j) {
      bool visible = !c.documentMask || docQ.values[i] == docK.values[j];
      for (const AttentionCase::AffineConjunct &a : c.affineMask)
        visible = visible && a.holds(i, j);
      return visible;
    };
  ref::ScoreMod mod;
  const std::vector<double> &cap = capture.values;
  switch (c.scoreMod) {
  case ScoreModKind::Alibi:
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + cap[h] * double(j - i);
    };
    break;
  case ScoreModKind::Softcap:
    mod.apply = [](double s, int64_t, int64_t, int64_t, int64_t) {
      return 20.0 * std::tanh(s / 20.0);
    };
    break;
  case ScoreModKind::BiasTable:
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + cap[(h * c.Sq + i) * c.Skv + j];
    };
    break;
  case ScoreModKind::RelativeTable:
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + cap[h * (c.Sq + c.Skv - 1) + j - i + c.Sq - 1];
    };
    break;
  case ScoreModKind::HeadScales:
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s * cap[h] + cap[c.H] * double(j - i) / 64;
    };
    break;
  case ScoreModKind::NegInf:
    mod.apply = [](double s, int64_t, int64_t, int64_t i, int64_t j) {
      return i == 0 || j == 1 ? -std::numeric_limits<double>::infinity() : s;
    };
    break;
  case ScoreModKind::NonFinite:
    mod.apply = [](double s, int64_t, int64_t, int64_t i, int64_t j) {
      if (i == 2 && j == 3)
        return std::numeric_limits<double>::infinity();
      return i == 4 && j == 5 ? std::numeric_limits<double>::quiet_NaN() : s;
    };
    break;
  case ScoreModKind::None:
    break;
  }
  // The kernel multiplies by the scale rounded to f32.
  double scale = double(float(c.scale ? c.scale : ref::defaultScale(c.D)));
  std::vector<double> expectedO(o.values.size()), expectedLse(lse.values.size());
  ref::attentionForward({c.B, c.H, c.Hkv, c.Sq, c.Skv, c.D, c.Dv}, scale, mask,
                        mod, q.values.data(), k.values.data(), v.values.data(),
                        expectedO.data(), expectedLse.data());

  double tolerance =
      std::max(toleranceFor(c.dtype) * c.conditioning, c.tolerance);
  EXPECT_LE(ref::maxRelativeError(o.values.data(), expectedO.data(),
                                  expectedO.size()),
            tolerance);
  // Fully masked rows give exactly 0, never NaN.
  for (size_t i = 0; i < expectedO.size(); ++i)
    if (expectedO[i] == 0.0 && !std::isfinite(expectedLse[i / c.Dv]))
      ASSERT_EQ(o.values[i], 0.0) << "element " << i;
  if (returnsLse) {
    lse.unpack();
    for (size_t i = 0; i < expectedLse.size(); ++i) {
      if (std::isnan(expectedLse[i])) {
        EXPECT_TRUE(std::isnan(lse.values[i])) << "row " << i;
        continue;
      }
      if (std::isinf(expectedLse[i])) {
        EXPECT_TRUE(std::isinf(lse.values[i]) && lse.values[i] < 0)
            << "row " << i << " LSE " << lse.values[i];
        continue;
      }
      // LSE is f32 in every dtype: compare relative to its magnitude + 1.
      EXPECT_NEAR(lse.values[i], expectedLse[i],
                  (c.dtype == "f32" ? 1e-5 : 1e-4) * c.conditioning *
                      (1 + std::fabs(expectedLse[i])))
          << "row " << i;
    }
  }

  // f_fwd returns what f returns, then the LSE when f does not return it
  // (nothing is saved for Q/K/V given as inputs).
  Buffer o2(o.values.size(), c.dtype), lse2(lse.values.size(), "f32"),
      savedLse(lse.values.size(), "f32");
  std::vector<void *> inputs(args.begin(), args.end() - (returnsLse ? 2 : 1));
  std::vector<void *> fwdArgs(inputs);
  fwdArgs.push_back(o2.data());
  if (returnsLse)
    fwdArgs.push_back(lse2.data());
  if (savesLse)
    fwdArgs.push_back(savedLse.data());
  auto fwdStatus = callHost(*kernels, "kernel_fwd", fwdArgs, c.B);
  ASSERT_TRUE(fwdStatus.error.empty()) << fwdStatus.error;
  if (c.deviceLimitEnds && fwdStatus.status == ATTNC_STATUS_DEVICE_LIMIT)
    return;
  ASSERT_EQ(fwdStatus.status, 0);
  EXPECT_EQ(o2.bytes, o.bytes);

  // f_bwd(inputs, results, d results) -> d (float inputs).
  Buffer dO(o.values.size(), c.dtype), dLse(lse.values.size(), "f32");
  ref::fillRandom(dO.values.data(), dO.values.size(), seed + 5);
  dO.pack();
  dLse.pack(); // zeros: the LSE cotangent is checked by finite differences
  Buffer dQ(q.values.size(), c.dtype), dK(k.values.size(), c.dtype),
      dV(v.values.size(), c.dtype), dCapture(capture.values.size(), "f32");
  std::vector<void *> bwdArgs(inputs);
  bwdArgs.push_back(o.data());
  if (returnsLse)
    bwdArgs.push_back(lse.data());
  if (savesLse)
    bwdArgs.push_back(savedLse.data());
  bwdArgs.push_back(dO.data());
  if (returnsLse)
    bwdArgs.push_back(dLse.data());
  for (Buffer *grad : {&dQ, &dK, &dV})
    bwdArgs.push_back(grad->data());
  if (!capture.values.empty() && !c.constantSlopes)
    bwdArgs.push_back(dCapture.data());
  auto bwdStatus = callHost(*kernels, "kernel_bwd", bwdArgs, c.B);
  ASSERT_TRUE(bwdStatus.error.empty()) << bwdStatus.error;
  if (c.deviceLimitEnds && bwdStatus.status == ATTNC_STATUS_DEVICE_LIMIT)
    return;
  ASSERT_EQ(bwdStatus.status, 0);
  for (Buffer *grad : {&dQ, &dK, &dV, &dCapture})
    grad->unpack();

  std::vector<double> expectedCapture(capture.values.size(), 0.0);
  // A table's gradient sums dS = P dP - P Delta, differences: the
  // kernel's errors scale with those terms (Delta from the rounded O in
  // bf16), not with dS, which cancels to 0 where a row sees one key. Each
  // element's sum of P (|dP| + sum_d |dO O|) is the scale of its error.
  std::vector<double> dsTerms(capture.values.size(), 0.0);
  auto addDsTerms = [&](size_t element, double s, int64_t b, int64_t h,
                        int64_t i, int64_t j) {
    int64_t row = (b * c.H + h) * c.Sq + i;
    int64_t key = (b * c.Hkv + h / (c.H / c.Hkv)) * c.Skv + j;
    double p = std::exp(mod.apply(s, b, h, i, j) - expectedLse[row]);
    double dp = 0, delta = 0;
    for (int64_t d = 0; d < c.Dv; ++d) {
      dp += dO.values[row * c.Dv + d] * v.values[key * c.Dv + d];
      delta += std::fabs(dO.values[row * c.Dv + d] * expectedO[row * c.Dv + d]);
    }
    dsTerms[element] += p * (std::fabs(dp) + delta);
  };
  switch (c.scoreMod) {
  case ScoreModKind::Alibi:
    mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
    mod.accumulateCaptureGrad = [&](double, int64_t, int64_t h, int64_t i,
                                    int64_t j, double g) {
      expectedCapture[h] += g * double(j - i);
    };
    break;
  case ScoreModKind::Softcap:
    mod.dScore = [](double s, int64_t, int64_t, int64_t, int64_t) {
      double t = std::tanh(s / 20.0);
      return 1.0 - t * t;
    };
    break;
  case ScoreModKind::BiasTable:
    mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
    mod.accumulateCaptureGrad = [&](double s, int64_t b, int64_t h, int64_t i,
                                    int64_t j, double g) {
      size_t element = size_t((h * c.Sq + i) * c.Skv + j);
      addDsTerms(element, s, b, h, i, j);
      expectedCapture[element] += g;
    };
    break;
  case ScoreModKind::RelativeTable:
    mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
    mod.accumulateCaptureGrad = [&](double s, int64_t b, int64_t h, int64_t i,
                                    int64_t j, double g) {
      size_t element = size_t(h * (c.Sq + c.Skv - 1) + j - i + c.Sq - 1);
      addDsTerms(element, s, b, h, i, j);
      expectedCapture[element] += g;
    };
    break;
  case ScoreModKind::HeadScales:
    mod.dScore = [&](double, int64_t, int64_t h, int64_t, int64_t) {
      return cap[h];
    };
    mod.accumulateCaptureGrad = [&](double s, int64_t, int64_t h, int64_t i,
                                    int64_t j, double g) {
      expectedCapture[h] += g * s;
      expectedCapture[c.H] += g * double(j - i) / 64;
    };
    break;
  case ScoreModKind::NegInf:
    mod.dScore = [](double, int64_t, int64_t, int64_t i, int64_t j) {
      return i == 0 || j == 1 ? 0.0 : 1.0;
    };
    break;
  case ScoreModKind::NonFinite:
    mod.dScore = [](double, int64_t, int64_t, int64_t, int64_t) { return 1.0; };
    break;
  case ScoreModKind::None:
    break;
  }
  std::vector<double> expectedDQ(q.values.size()), expectedDK(k.values.size()),
      expectedDV(v.values.size());
  ref::attentionBackward({c.B, c.H, c.Hkv, c.Sq, c.Skv, c.D, c.Dv}, scale,
                         mask, mod, q.values.data(), k.values.data(),
                         v.values.data(), dO.values.data(), expectedDQ.data(),
                         expectedDK.data(), expectedDV.data());
  double gradTolerance = std::max(c.conditioning * (c.dtype == "f32"   ? 1e-4
                                                    : c.dtype == "f16" ? 1e-2
                                                                       : 5e-2),
                                  c.tolerance);
  EXPECT_LE(gradientError(dQ.values, expectedDQ), gradTolerance)
      << "dQ " << test::nanMismatch(dQ.values, expectedDQ);
  EXPECT_LE(gradientError(dK.values, expectedDK), gradTolerance)
      << "dK " << test::nanMismatch(dK.values, expectedDK);
  EXPECT_LE(gradientError(dV.values, expectedDV), gradTolerance)
      << "dV " << test::nanMismatch(dV.values, expectedDV);
  // A table's gradient is dS itself, whose elements are far below 1 with
  // long rows (P ~ 1 / Skv): relative to its largest plus each element's
  // terms (dsTerms above), else the floor of 1 would hide any error (a
  // gradient overwritten rather than summed over the batch passed at Skv
  // = 1300).
  bool table = c.scoreMod == ScoreModKind::BiasTable ||
               c.scoreMod == ScoreModKind::RelativeTable;
  if (!expectedCapture.empty() && !c.constantSlopes)
    EXPECT_LE(table ? test::errorOf(dCapture.values, expectedCapture, dsTerms)
                    : test::errorOf(dCapture.values, expectedCapture, 1.0),
              c.captureTolerance ? c.captureTolerance : gradTolerance)
        << "d capture " << test::nanMismatch(dCapture.values, expectedCapture);
}

TEST(KernelTest, Examples) {
  AttentionCase c;
  c.B = 2;
  c.H = 4;
  c.Hkv = 2;
  c.Sq = 17;
  c.Skv = 23;
  c.D = 16;
  c.Dv = 8;
  for (bool graph : {false, true}) {
    c.graphForm = graph;
    runCase(c, 1);
  }
  c.fuse = false;
  runCase(c, 1);
}

// Large logits (Q and K scaled up: softmax rows one-hot or nearly), where
// dP - Delta cancels: at x1e3 and x1e4 (one-hot rows) every gradient
// stays within f32's tolerance (it was 3.6e-4 and 3.6e-3 before Delta
// summed as dP does). At x1e2 some rows' top two scores lie a few units
// apart, and the scores' own rounding in f32 (eps D |q||k| scale, about
// 4e-3 there) moves their P however a kernel computes them: errors of
// 1.7e-3 (D=64) and 3.9e-3 (D=128) in dQ and dK are the problem's
// condition, hence 1e-2 there.
TEST(KernelTest, LargeLogitGradients) {
  AttentionCase c;
  c.B = 1;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = 70;
  c.Skv = 90;
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (double x : {1e2, 1e3, 1e4}) {
        c.D = c.Dv = d;
        c.causal = causal;
        c.inputScale = x;
        c.tolerance = x < 1e3 ? 1e-2 : 0;
        runCase(c, 11);
      }
}

// bf16 forwards over several key blocks whose rows' maxima jump by more
// than the AMX forward's slack (8 ln 2) in some steps and not in others:
// a tile's P V then goes into O's own tiles in some steps and through the
// rescale in others (FlashForward.h, lazyMax); forward and every gradient.
TEST(KernelTest, MovingRowMaxima) {
  AttentionCase c;
  c.B = 1;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = 100; // 32-row tiles on AMX, pipelined
  c.Skv = 1100;
  c.D = c.Dv = 64;
  c.dtype = "bf16";
  for (double x : {1.0, 3.0, 10.0})
    for (bool causal : {false, true}) {
      c.causal = causal;
      c.inputScale = x;
      c.scoreMod = x == 1.0 ? ScoreModKind::Alibi : ScoreModKind::None;
      runCase(c, 12);
    }
}

/// runCase in f32 and bf16, causal or not, at D = Dv = 8 (the unfused
/// lowering), 16 and 64 (the flash kernels).
void runInEveryCpuKernel(AttentionCase c, uint64_t seed) {
  for (std::string dtype : {"f32", "bf16"})
    for (int64_t d : {8, 16, 64})
      for (bool causal : {false, true}) {
        c.dtype = dtype;
        c.D = c.Dv = d;
        c.causal = causal;
        runCase(c, seed);
      }
}

// A score_mod that sends scores to -inf masks them: a row of -inf scores
// is a fully masked row (O = 0, LSE = -inf, no gradient), forward and
// backward, in every kernel (the flash backward from D = 16 gave NaN in
// dV: exp(-inf - LSE) with LSE = -inf).
TEST(KernelTest, NegativeInfinityScoresMask) {
  AttentionCase c;
  c.B = 2;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = 19;
  c.Skv = 37;
  c.scoreMod = ScoreModKind::NegInf;
  runInEveryCpuKernel(c, 12);
  c.D = c.Dv = 16;
  c.graphForm = true;
  runCase(c, 13);
  c.fuse = false;
  runCase(c, 13);
}

// A score of +inf or NaN leaves its row's softmax undefined: O, LSE and
// the gradients through the row are NaN, in every kernel, and the other
// rows are untouched (a row of -inf scores is a masked row, on the GPU
// too).
TEST(KernelTest, NonFiniteScoresMakeTheirRowNaN) {
  AttentionCase c;
  c.B = 1;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = 19;
  c.Skv = 37;
  c.scoreMod = ScoreModKind::NonFinite;
  runInEveryCpuKernel(c, 14);
  // The GPU kernels (they took such a row for one that saw no key).
  c.target = jit::Target::Vulkan;
  c.D = c.Dv = 16;
  runCase(c, 15);
  c.scoreMod = ScoreModKind::NegInf;
  runCase(c, 15);
}

TEST(KernelTest, SingleQueryAndKey) {
  AttentionCase c; // every dimension 1
  runCase(c, 2);
  c.causal = true;
  runCase(c, 3);
}

TEST(KernelTest, FullyMaskedRowsGiveZero) {
  AttentionCase c;
  c.B = 3;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = 9;
  c.Skv = 5;
  c.D = 4;
  c.Dv = 3;
  c.lengths = true; // batch 0 has length 0
  runCase(c, 4);
  c.graphForm = true;
  runCase(c, 5);
  c.fuse = false;
  runCase(c, 5);
}

/// pick({a, b, ...}): one of the values, drawn from `rng` (the random-case
/// tests' shapes and options).
static auto picker(std::mt19937_64 &rng) {
  return [&rng](std::initializer_list<int64_t> values) {
    return *(values.begin() + rng() % values.size());
  };
}

/// A random spec: every mask kind, score mod, GQA/MQA, dtype and form, with
/// shapes that are not multiples of 8, S = 1, Sq != Skv and D != Dv.
static AttentionCase randomCase(std::mt19937_64 &rng, int n) {
  auto pick = picker(rng);
  AttentionCase c;
  c.B = pick({1, 2, 3});
  c.Hkv = pick({1, 2, 3});
  c.H = c.Hkv * pick({1, 2, 4});
  c.Sq = pick({1, 5, 13, 31, 40});
  c.Skv = pick({1, 7, 13, 33});
  c.D = pick({1, 5, 16, 24});
  c.Dv = pick({3, 8, 20});
  c.dtype = n % 6 == 4 ? "bf16" : n % 6 == 5 ? "f16" : "f32";
  c.causal = rng() % 3 == 0;
  c.window = rng() % 4 == 0 ? pick({1, 3, 8}) : 0;
  c.lengths = rng() % 3 == 0;
  c.scoreMod = ScoreModKind(rng() % 4);
  c.documentMask = rng() % 4 == 0;
  c.graphForm = rng() % 3 == 0;
  c.scale = rng() % 4 == 0 ? 0.3 : 0;
  return c;
}

/// Random specs; graph forms both fused (attn-fuse) and unfused.
TEST(KernelTest, RandomSpecs) {
  std::mt19937_64 rng(20261129);
  for (int n = 0; n < 36; ++n) {
    AttentionCase c = randomCase(rng, n);
    runCase(c, 100 + n);
    // Graph form both ways: through attn-fuse and op by op.
    if (c.graphForm) {
      c.fuse = false;
      runCase(c, 100 + n);
    }
  }
}

/// A random spec at the sizes the flash kernels tile (heads of 16 to 128,
/// several query and key tiles, partial last tiles), with any mask, cache,
/// packed sequences, score mod, dtype and form, on the host's kernels or
/// those of a CPU without AMX or AVX-512 BF16.
static AttentionCase randomFlashCase(std::mt19937_64 &rng, int n) {
  auto pick = picker(rng);
  AttentionCase c;
  c.B = pick({1, 2});
  c.Hkv = pick({1, 2, 4});
  c.H = c.Hkv * pick({1, 2, 4});
  c.Sq = pick({1, 4, 16, 63, 129, 257});
  c.Skv = pick({17, 64, 200, 257, 520});
  c.D = pick({16, 32, 64, 128});
  c.Dv = rng() % 2 ? c.D : pick({16, 32, 64, 128});
  c.dtype = n % 3 == 1 ? "bf16" : n % 6 == 5 ? "f16" : "f32";
  c.causal = rng() % 2;
  c.window = rng() % 4 == 0 ? pick({1, 16, 100}) : 0;
  c.lengths = rng() % 3 == 0;
  // Every score mod but NonFinite: a row with a +inf or NaN score is NaN,
  // and what its gradients put into the keys it does not see (masked: NaN
  // or 0) differs between the kernels and the reference
  // (NonFiniteScoresMakeTheirRowNaN checks such rows without masks).
  int64_t kind = rng() % 8;
  c.scoreMod = kind < 5    ? ScoreModKind(kind)
               : kind == 5 ? ScoreModKind::RelativeTable
               : kind == 6 ? ScoreModKind::HeadScales
                           : ScoreModKind::None;
  c.documentMask = rng() % 4 == 0;
  c.scale = rng() % 5 == 0 ? 0.3 : 0;
  c.inputScale = rng() % 6 == 0 ? 4 : 1;
  int64_t layout = rng() % 6;
  if (layout == 0 && (c.causal || c.window)) {
    c.cache = true;
    c.Sq = std::min(c.Sq, c.Skv);
  } else if (layout == 1) {
    c.Sq = c.Skv;
    c.sequences = pick({1, 2, 5});
  } else {
    c.maskAsRegion = rng() % 4 == 0;
  }
  c.graphForm = rng() % 4 == 0;
  int64_t cpu = rng() % 4;
  c.cpu = cpu == 1   ? "native,-amx-tile,-amx-bf16"
          : cpu == 2 ? "native,-amx-tile,-amx-bf16,-avx512bf16"
                     : "native";
  // The tolerances scaled by the logits' size: an f32 score carries a
  // rounding error of about 6e-8 |S'|, and P and O inherit it. Scores here
  // reach ~4 sigma of scale |q| |k| (q, k uniform in +-2 times inputScale)
  // and ALiBi's slope (up to 1) times the distance; the dtypes'
  // tolerances are for logits of a few units (8).
  double sigma = (c.scale ? c.scale : 1 / std::sqrt(double(c.D))) *
                 std::sqrt(double(c.D)) * (4.0 / 3) * c.inputScale *
                 c.inputScale;
  double logits =
      4 * sigma +
      (c.scoreMod == ScoreModKind::Alibi ? double(std::max(c.Sq, c.Skv))
       : c.scoreMod == ScoreModKind::HeadScales
           ? double(std::max(c.Sq, c.Skv)) / 64
           : 0.0);
  c.conditioning = std::max(1.0, logits / 8);
  return c;
}

/// Random specs at flash-kernel sizes, forward and every gradient against
/// the float64 reference. ATTNC_RANDOM_CASES (default 8) and
/// ATTNC_RANDOM_SEED run more, or others, as a soak:
///   ATTNC_RANDOM_CASES=500 ATTNC_RANDOM_SEED=7 build/bin/attnc-unit-tests \
///     --gtest_filter=KernelTest.RandomFlashSpecs
/// ATTNC_RANDOM_FIRST=N skips the cases before case N (to rerun one that
/// failed: its spec and inputs are the same).
TEST(KernelTest, RandomFlashSpecs) {
  const char *cases = std::getenv("ATTNC_RANDOM_CASES");
  const char *seed = std::getenv("ATTNC_RANDOM_SEED");
  const char *first = std::getenv("ATTNC_RANDOM_FIRST");
  int firstCase = first ? std::atoi(first) : 0;
  // ATTNC_RANDOM_TARGET=vulkan: the same cases on the Vulkan kernels.
  const char *target = std::getenv("ATTNC_RANDOM_TARGET");
  bool vulkan = target && std::string(target) == "vulkan";
  int count = cases ? std::atoi(cases) : 8;
  uint64_t base = seed ? std::strtoull(seed, nullptr, 10) : 20261204;
  std::mt19937_64 rng(base);
  for (int n = 0; n < count; ++n) {
    AttentionCase c = randomFlashCase(rng, n);
    if (n < firstCase)
      continue;
    if (vulkan) {
      c.target = jit::Target::Vulkan;
      c.deviceLimitEnds = true;
    }
    SCOPED_TRACE("case " + std::to_string(n) + " of seed " +
                 std::to_string(base));
    runCase(c, base + 1000 * n);
    if (c.graphForm) {
      c.fuse = false;
      runCase(c, base + 1000 * n);
    }
  }
}

/// Random specs with a dynamic batch (`?`), compiled once and called at
/// batches of 1, 3 and 5 (on 2 threads: 5 entries without lengths or score
/// captures run on threads of their own, the others one after the other),
/// forward and every gradient against the float64 reference, with AMX
/// (where the host has it) and without; the score captures (ALiBi slopes,
/// bias tables) have no batch, and their gradients are summed over the
/// entries.
TEST(KernelTest, RandomSpecsWithADynamicBatch) {
  std::mt19937_64 rng(20261204);
  attnc_set_num_threads(2);
  for (int n = 0; n < 12; ++n) {
    AttentionCase c = randomCase(rng, n);
    c.dynamicBatch = true;
    const int64_t batches[] = {1, 3, 5};
    c.B = batches[n % 3];
    // Every other case on the kernels of a CPU without AMX.
    if (n % 2)
      c.cpu = "native,-amx-tile,-amx-bf16";
    runCase(c, 300 + n);
  }
  attnc_set_num_threads(0);
}

/// A random case of packed sequences (varlen): 1 to 5 of them over
/// Sq = Skv, with the other masks, score mods and forms; every other one
/// with heads that take the flash kernels (multiples of 16), the others
/// the unfused lowering (the CPU's).
static AttentionCase randomPackedCase(std::mt19937_64 &rng, int n) {
  AttentionCase c = randomCase(rng, n);
  auto pick = picker(rng);
  c.Skv = c.Sq = pick({1, 13, 40, 70});
  c.sequences = pick({1, 2, 3, 5});
  if (n % 2 == 0) {
    c.D = pick({16, 32, 64});
    c.Dv = pick({16, 32, 64});
  }
  return c;
}

/// Packed variable-length sequences (`varlen`) on the CPU: forward and
/// every gradient against the float64 reference, graph forms fused and
/// unfused (attn.mask varlen in linalg), with and without the AVX-512 BF16
/// and AMX products where the host has them, and with a dynamic batch.
TEST(KernelTest, PackedSequences) {
  std::mt19937_64 rng(20261205);
  for (int n = 0; n < 24; ++n) {
    AttentionCase c = randomPackedCase(rng, n);
    if (n % 4 == 3)
      c.cpu = "native,-amx-tile,-amx-bf16,-avx512bf16";
    runCase(c, 900 + n);
    if (c.graphForm) {
      c.fuse = false;
      runCase(c, 900 + n);
    }
  }
  // With a dynamic batch (`?`): every entry packs its sequences at the same
  // offsets (the offsets have no batch), batches of 1, 3 and 5.
  for (int n = 0; n < 6; ++n) {
    AttentionCase c = randomPackedCase(rng, n);
    c.dynamicBatch = true;
    c.B = 1 + 2 * (n % 3);
    runCase(c, 950 + n);
  }
}

/// Packed sequences give what separate calls on each sequence give: one
/// causal call over offsets {3, 20, 20, 61} (rows 0-2 and 61-63 in no
/// sequence: O = 0, LSE = -inf) against calls of Sq = Skv = 17 and 41 on
/// the sequences' rows, f32, GQA, D = 32.
TEST(KernelTest, PackedSequencesMatchSeparateCalls) {
  const int64_t H = 4, Hkv = 2, S = 64, D = 32;
  const std::vector<int64_t> cu = {3, 20, 20, 61};
  auto compile = [](const AttentionCase &c) {
    std::string error;
    auto module = jit::Module::compile(specFor(c), testOptions(), &error);
    EXPECT_TRUE(module) << error;
    return module;
  };
  AttentionCase packed;
  packed.H = H;
  packed.Hkv = Hkv;
  packed.Sq = packed.Skv = S;
  packed.D = packed.Dv = D;
  packed.causal = true;
  packed.sequences = int64_t(cu.size()) - 1;
  auto packedKernel = compile(packed);
  ASSERT_TRUE(packedKernel);
  Buffer q(H * S * D, "f32"), k(Hkv * S * D, "f32"), v(Hkv * S * D, "f32"),
      offsets(cu.size(), "i32"), o(H * S * D, "f32"), lse(H * S, "f32");
  ref::fillRandom(q.values.data(), q.values.size(), 1, -2, 2);
  ref::fillRandom(k.values.data(), k.values.size(), 2, -2, 2);
  ref::fillRandom(v.values.data(), v.values.size(), 3);
  for (size_t d = 0; d < cu.size(); ++d)
    offsets.values[d] = double(cu[d]);
  for (Buffer *x : {&q, &k, &v, &offsets})
    x->pack();
  auto status = callHost(
      *packedKernel, "kernel",
      {q.data(), k.data(), v.data(), offsets.data(), o.data(), lse.data()}, 1);
  ASSERT_TRUE(status.ok()) << status.error << " status " << status.status;
  o.unpack();
  lse.unpack();
  // Rows in no sequence.
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i : {0, 1, 2, 61, 62, 63}) {
      EXPECT_TRUE(std::isinf(lse.values[h * S + i]) &&
                  lse.values[h * S + i] < 0)
          << "row " << i;
      for (int64_t c = 0; c < D; ++c)
        EXPECT_EQ(o.values[(h * S + i) * D + c], 0.0) << "row " << i;
    }
  for (size_t d = 0; d + 1 < cu.size(); ++d) {
    int64_t start = cu[d], n = cu[d + 1] - cu[d];
    if (n == 0)
      continue;
    AttentionCase one = packed;
    one.Sq = one.Skv = n;
    one.sequences = 0;
    auto kernel = compile(one);
    ASSERT_TRUE(kernel);
    // The sequence's rows of every head.
    auto slice = [&](const Buffer &from, int64_t heads) {
      Buffer to(heads * n * D, "f32");
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < D; ++c)
            to.values[(h * n + i) * D + c] =
                from.values[(h * S + start + i) * D + c];
      to.pack();
      return to;
    };
    Buffer qs = slice(q, H), ks = slice(k, Hkv), vs = slice(v, Hkv),
           os(H * n * D, "f32"), lses(H * n, "f32");
    auto st =
        callHost(*kernel, "kernel",
                 {qs.data(), ks.data(), vs.data(), os.data(), lses.data()}, 1);
    ASSERT_TRUE(st.ok()) << st.error << " status " << st.status;
    os.unpack();
    lses.unpack();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(lse.values[h * S + start + i], lses.values[h * n + i],
                    1e-5 * (1 + std::fabs(lses.values[h * n + i])))
            << "sequence " << d << " row " << i;
        for (int64_t c = 0; c < D; ++c)
          EXPECT_NEAR(o.values[(h * S + start + i) * D + c],
                      os.values[(h * n + i) * D + c], 1e-5)
              << "sequence " << d << " row " << i;
      }
  }
}

/// Offsets that are out of order, negative or past Skv make the CPU entry
/// points return ATTNC_STATUS_BAD_SIZE, writing nothing.
TEST(KernelTest, PackedSequencesRefuseBadOffsets) {
  AttentionCase c;
  c.H = c.Hkv = 2;
  c.Sq = c.Skv = 9;
  c.D = c.Dv = 16;
  c.causal = true;
  c.sequences = 3;
  std::string error;
  auto kernels = jit::Module::compile(specFor(c), testOptions(), &error);
  ASSERT_TRUE(kernels) << error;
  Buffer q(2 * 9 * 16, "f32"), o(2 * 9 * 16, "f32"), lse(2 * 9, "f32"),
      offsets(4, "i32");
  ref::fillRandom(q.values.data(), q.values.size(), 1);
  q.pack();
  for (const std::vector<double> &bad :
       {std::vector<double>{0, 5, 3, 9}, {-1, 2, 4, 9}, {0, 2, 4, 10}}) {
    offsets.values = bad;
    offsets.pack();
    std::fill(o.bytes.begin(), o.bytes.end(), 0x7f);
    auto status = callHost(
        *kernels, "kernel",
        {q.data(), q.data(), q.data(), offsets.data(), o.data(), lse.data()},
        1);
    ASSERT_TRUE(status.error.empty()) << status.error;
    EXPECT_EQ(status.status, ATTNC_STATUS_BAD_SIZE) << bad[0] << " " << bad[2];
    EXPECT_TRUE(std::all_of(o.bytes.begin(), o.bytes.end(),
                            [](uint8_t x) { return x == 0x7f; }));
  }
}

/// The same cases on the GPU kernels through Vulkan.
TEST(KernelTest, PackedSequencesOnVulkan) {
  std::mt19937_64 rng(20261206);
  for (int n = 0; n < 10; ++n) {
    AttentionCase c = randomPackedCase(rng, n);
    c.target = jit::Target::Vulkan;
    runCase(c, 950 + n);
  }
}

/// The GPU kernels through Vulkan (lavapipe in the test suite): random
/// specs, fully masked rows (a batch of key length 0), and shapes around
/// the GPU plan's tiles (16 query rows, 32-key blocks, 4 to 64 invocations
/// per subgroup row) with D = 64, 80 and 128. Skipped without a Vulkan
/// device unless ATTNC_REQUIRE_VULKAN=1.
TEST(KernelTest, VulkanKernels) {
  std::mt19937_64 rng(20261202);
  for (int n = 0; n < 24; ++n) {
    AttentionCase c = randomCase(rng, n);
    c.target = jit::Target::Vulkan;
    runCase(c, 700 + n);
  }
  AttentionCase masked;
  masked.B = 3;
  masked.H = 2;
  masked.Sq = 9;
  masked.Skv = 5;
  masked.D = 4;
  masked.Dv = 3;
  masked.lengths = true; // batch 0 has length 0
  masked.target = jit::Target::Vulkan;
  runCase(masked, 4);
  auto pick = picker(rng);
  for (int n = 0; n < 8; ++n) {
    AttentionCase c;
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick({1, 16, 17, 33});
    c.Skv = pick({1, 31, 32, 33, 65});
    c.D = pick({64, 80, 128});
    c.Dv = pick({64, 80, 128});
    c.dtype = n % 4 == 1 ? "bf16" : n % 4 == 3 ? "f16" : "f32";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? pick({1, 5, 40}) : 0;
    c.lengths = rng() % 3 == 0;
    c.scoreMod = ScoreModKind(rng() % 4);
    c.target = jit::Target::Vulkan;
    runCase(c, 800 + n);
  }
}

/// Shapes around the flash kernel's tiles (8 query rows, 32 keys, 16-lane
/// value chunks): S at, below and above tile multiples, S = 1, Sq != Skv,
/// every mask kind and score mod, f32, bf16 and f16; Dv (and for the
/// backward D) a multiple of 16 takes the flash path.
TEST(KernelTest, FlashKernelTileBoundaries) {
  std::mt19937_64 rng(77);
  auto pick = picker(rng);
  for (int n = 0; n < 24; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 3});
    c.Sq = pick({1, 7, 8, 9, 31, 33, 64, 130});
    // Past 128: several forward key blocks and a partial last one.
    c.Skv = pick({1, 31, 32, 33, 63, 65, 129, 257});
    c.D = pick({1, 5, 16, 24, 64});
    c.Dv = pick({16, 32, 48, 64});
    c.dtype = n % 4 == 1 ? "bf16" : n % 4 == 3 ? "f16" : "f32";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? pick({1, 5, 40}) : 0;
    c.lengths = rng() % 3 == 0;
    c.scale = rng() % 4 == 0 ? 0.3 : 0;
    c.graphForm = n % 3 == 2; // attn-fuse makes it a flash kernel too
    // Regions widened to 16 lanes: ALiBi (a float capture: the backward
    // stays unfused), softcap, a bias table (gathers), document masks.
    c.scoreMod = ScoreModKind(rng() % 4);
    c.documentMask = rng() % 4 == 0;
    c.maskAsRegion = rng() % 3 == 0;
    runCase(c, 500 + n);
  }
  // 2100 keys without a mask: the backward's key tiles in two splits, each
  // with its own dQ copy (fewer visible keys take one), with and without
  // key lengths, f32 and bf16.
  for (int n = 0; n < 2; ++n) {
    AttentionCase c;
    c.B = 1;
    c.Hkv = 2;
    c.H = 4;
    c.Sq = 40;
    c.Skv = 2100;
    c.D = 32;
    c.Dv = 16;
    c.dtype = n == 0 ? "f32" : "bf16";
    c.lengths = n == 1;
    runCase(c, 600 + n);
  }
  // D = Dv = 256: the backward's key blocks of 64 keys (2 tiles, the
  // second past the keys in the last block), causal with key lengths.
  AttentionCase wide;
  wide.B = 2;
  wide.Hkv = 1;
  wide.H = 2;
  wide.Sq = 70;
  wide.Skv = 150;
  wide.D = 256;
  wide.Dv = 256;
  wide.causal = true;
  wide.lengths = true;
  runCase(wide, 602);
}

/// bf16 forwards of the shapes AMX tiles take (D a multiple of 32, Dv of
/// 16) on a host with AMX: 16-row tiles, steps of 32 to 256 keys (one or
/// several of them, their scores 4 tiles at a time, P held in tile
/// registers or not), K and V in bf16 pairs, with every mask kind,
/// regions, grouped heads and Sq != Skv (on a host with AVX-512 BF16 and
/// no AMX the same cases take the dot products, elsewhere the AVX-512
/// path). AMX takes 4 query rows or more (TilePlan.cpp); the fewer rows
/// here take the dot products.
void runBf16TileShapes(const std::string &cpu) {
  std::mt19937_64 rng(57);
  auto pick = picker(rng);
  for (int n = 0; n < 16; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 3});
    c.Sq = pick({1, 17, 64, 65, 70, 97});
    c.Skv = pick({1, 31, 33, 64, 65, 150, 300});
    c.D = pick({32, 96, 128});
    c.Dv = pick({16, 48, 80});
    c.dtype = "bf16";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? pick({1, 20}) : 0;
    c.lengths = rng() % 3 == 0;
    c.scoreMod = ScoreModKind(rng() % 4);
    c.documentMask = rng() % 4 == 0;
    c.cpu = cpu;
    runCase(c, 1000 + n);
  }
  // Decoding steps with all the query heads of a KV head in one task (B Hkv
  // >= 8): the task pairs (dot products) or packs each key block once for
  // its group of 4.
  for (int n = 0; n < 4; ++n) {
    AttentionCase c;
    c.B = 2;
    c.Hkv = 4;
    c.H = 16;
    c.Sq = n % 2 ? 5 : 1;
    c.Skv = n < 2 ? 300 : 77;
    c.D = 128;
    c.Dv = 64;
    c.dtype = "bf16";
    c.causal = n == 3;
    c.lengths = n == 1;
    c.scoreMod = n == 2 ? ScoreModKind::Alibi : ScoreModKind::None;
    c.cpu = cpu;
    runCase(c, 1100 + n);
  }
  // Steps and chunks of 4 to 128 query rows (8 tiles or fewer a head):
  // one task per head or per KV head's group pairs each key block into its
  // scratch for the AMX tiles (or dot products), no per-call copy; caches
  // with lengths (0 included), windows, key splits (a single KV head over
  // 2100+ keys), score_mods.
  for (int n = 0; n < 8; ++n) {
    AttentionCase c;
    c.B = n < 4 ? 2 : 1;
    c.Hkv = n < 4 ? 4 : 1;
    c.H = c.Hkv * pick({1, 4});
    c.Sq = pick({4, 9, 16, 33, 128});
    c.Skv = n < 4 ? pick({16, 77, 300}) : pick({2100, 3000});
    c.D = pick({32, 128});
    c.Dv = pick({16, 64});
    c.dtype = "bf16";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? pick({5, 700}) : 0;
    c.cache = (c.causal || c.window) && rng() % 2;
    c.lengths = rng() % 2;
    c.scoreMod = ScoreModKind(rng() % 4);
    c.cpu = cpu;
    runCase(c, 1150 + n);
  }
  // Prefills of several query tiles a task and several tasks a head: on AMX
  // tiles of 32 rows, each tile's softmax interleaved with the next tile's
  // Q K^T, from the per-call copies of K and V; the last case's task of
  // tiles 2 and 3 has a key block (256-511) that tile 2 (positions 209 to
  // 240) does not see and tile 3 does.
  for (int n = 0; n < 5; ++n) {
    AttentionCase c;
    c.B = 1;
    c.Hkv = pick({1, 2, 4});
    c.H = 4;
    c.Sq = n == 4 ? 400 : pick({400, 450});
    c.Skv = n == 4 ? 545 : pick({300, 513});
    c.cache = n == 4;
    c.D = pick({64, 128});
    c.Dv = pick({32, 48, 64});
    c.dtype = "bf16";
    c.causal = n % 2 == 0;
    c.window = n == 1 ? 90 : 0;
    c.lengths = n == 2;
    c.scoreMod = n == 3 ? ScoreModKind::Alibi : ScoreModKind::None;
    c.cpu = cpu;
    runCase(c, 1170 + n);
  }
}

TEST(KernelTest, Bf16ForwardTileShapes) { runBf16TileShapes("native"); }

/// The same on AVX-512 BF16 dot products (vdpbf16ps) whatever the host's
/// AMX (the host's features less AMX's).
TEST(KernelTest, Bf16DotProducts) {
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  runBf16TileShapes("native,-amx-tile,-amx-bf16");
}

/// bf16 backwards of the shapes the AMX backward takes (64 query rows or
/// more, D and Dv multiples of 32): query tiles of 32 rows (Sq not a
/// multiple of them: the rows past Sq padded), key blocks of 32 to 128
/// keys (Skv not a multiple), grouped heads, every mask kind, score_mods
/// with and without float captures (a bias table's gradient; with a bf16
/// O, Delta from P and dP, on tiles too; constant ALiBi slopes, whose
/// gradient nothing reads: Delta from O), several dQ splits. On a host with
/// AVX-512 BF16 and no AMX the same cases take the dot products, elsewhere
/// the AVX-512 path.
void runBf16BackwardTileShapes(const std::string &cpu) {
  std::mt19937_64 rng(71);
  auto pick = picker(rng);
  for (int n = 0; n < 12; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick({64, 65, 100, 128, 150});
    c.Skv = n == 0 ? 2100 : pick({33, 64, 100, 150, 300});
    c.D = pick({32, 64, 128});
    c.Dv = pick({32, 64, 96});
    c.dtype = "bf16";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? pick({1, 40}) : 0;
    c.lengths = rng() % 3 == 0;
    auto drawn = ScoreModKind(rng() % 5);
    c.scoreMod = n == 1   ? ScoreModKind::BiasTable
                 : n == 2 ? ScoreModKind::Alibi
                          : drawn;
    c.constantSlopes = n == 2;
    c.documentMask = rng() % 4 == 0;
    c.cpu = cpu;
    runCase(c, 1200 + n);
  }
}

TEST(KernelTest, Bf16BackwardTileShapes) {
  runBf16BackwardTileShapes("native");
}

TEST(KernelTest, Bf16BackwardDotProducts) {
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  runBf16BackwardTileShapes("native,-amx-tile,-amx-bf16");
}

/// Forwards whose per-call copies of K^T and V would pass 16 MiB (33000
/// f32 keys of 64 + 64 columns: 16.1 MiB; bf16 pairs below) and whose heads
/// have several tasks: each task packs the key blocks it visits
/// (FlashForward.h, packedBlocks), causal or not, with lengths, windows and a
/// score_mod, forward and every gradient against the reference.
TEST(KernelTest, LongKeysArePackedPerTask) {
  for (int n = 0; n < 4; ++n) {
    AttentionCase c;
    c.B = 1;
    c.H = 2;
    c.Hkv = 1;
    c.Sq = 130; // 11 query tiles a head: more than one task's
    c.Skv = 33000;
    c.D = c.Dv = 64;
    c.causal = n % 2 == 0;
    c.window = n == 2 ? 5000 : 0;
    c.lengths = n == 3;
    c.scoreMod = n == 1 ? ScoreModKind::Softcap : ScoreModKind::None;
    runCase(c, 1900 + n);
  }
  // bf16 pairs past 16 MiB (16 heads of 4224 keys, 64 + 64 columns: 16.5
  // MiB) with 9 query tiles a head: on AMX two tasks a head of 5 pipelined
  // tiles of 32 rows (lower-cpu-amx-packed.mlir), else dot products.
  for (int n = 0; n < 2; ++n) {
    AttentionCase c;
    c.B = 1;
    c.H = c.Hkv = 16;
    c.Sq = 260;
    c.Skv = 4200;
    c.D = c.Dv = 64;
    c.dtype = "bf16";
    c.causal = n == 0;
    c.lengths = n == 1;
    c.scoreMod = n == 1 ? ScoreModKind::Alibi : ScoreModKind::None;
    runCase(c, 1910 + n);
  }
}

/// Split-KV: forwards of few (batch, KV head) pairs and a query block per
/// head over 2048 keys or more take the plan's key splits (partial O and
/// LSE per split, merged), forward and backward against the reference:
/// decoding steps and short chunks, causal from either end, windows,
/// lengths (0 included), score_mods, f32, bf16 and f16.
TEST(KernelTest, SplitKeys) {
  std::mt19937_64 rng(20261204);
  auto pick = picker(rng);
  for (int n = 0; n < 8; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 4});
    c.Sq = pick({1, 3, 16});
    c.Skv = pick({2100, 3000, 4500});
    c.D = pick({16, 64});
    c.Dv = pick({16, 32});
    c.dtype = n % 4 == 1 ? "bf16" : n % 4 == 3 ? "f16" : "f32";
    c.causal = rng() % 2;
    c.window = rng() % 3 == 0 ? 2500 : 0;
    c.cache = (c.causal || c.window) && rng() % 2;
    c.lengths = rng() % 2;
    c.scoreMod = ScoreModKind(rng() % 4);
    runCase(c, 1800 + n);
  }
  // bf16 chunks of 100 query rows of MQA: on AMX, tiles of 32 rows, each
  // task's four heads' tiles pipelined over its split of the keys.
  for (int n = 0; n < 2; ++n) {
    AttentionCase c;
    c.B = 1;
    c.Hkv = 1;
    c.H = 4;
    c.Sq = 100;
    c.Skv = 4100;
    c.D = 64;
    c.Dv = 32;
    c.dtype = "bf16";
    c.causal = n == 0;
    c.cache = n == 0;
    c.lengths = n == 0;
    c.scoreMod = n == 1 ? ScoreModKind::Alibi : ScoreModKind::None;
    runCase(c, 1810 + n);
  }
}

/// Bias tables read at each score's key (bias[h, i, j]) with enough key
/// blocks for a task per (batch, KV head): the backward's tasks are then
/// key splits over every pair (key_tasks, see
/// test/codegen/lower-cpu-key-tasks.mlir), adding to one gradient buffer
/// where each owns its keys' elements; with a bf16 or f16 output Delta
/// comes from O. Forward and every gradient against the reference, every
/// dtype, on the f32 kernel, the dot products and AMX where the CPU has
/// them, with masks, windows and lengths.
TEST(KernelTest, BiasGradientsOnKeyTasks) {
  std::mt19937_64 rng(20261205);
  auto pick = picker(rng);
  for (int n = 0; n < 6; ++n) {
    AttentionCase c;
    c.B = 2;
    c.Hkv = 2;
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick({40, 100});
    c.Skv = pick({1100, 1300});
    c.D = pick({32, 64});
    c.Dv = pick({32, 64});
    c.dtype = n % 3 == 1 ? "bf16" : n % 3 == 2 ? "f16" : "f32";
    c.causal = n % 2;
    c.window = rng() % 3 == 0 ? 700 : 0;
    // (The harness gives the first entry no keys: every key then has one
    // batch entry's terms.)
    c.lengths = n == 5;
    c.scoreMod = ScoreModKind::BiasTable;
    c.cpu = n == 4 ? "native,-amx-tile,-amx-bf16" : "native";
    runCase(c, 1900 + n);
  }
}

/// Random specs of one score_mod with a capture, forward and every
/// gradient against the reference: f32, bf16 and f16 in turn, causal or
/// not, windows (40 keys) and lengths at random, Sq drawn from `queries`,
/// the native CPU and (case 4) one without AMX.
static void runCaptureCases(ScoreModKind kind, uint64_t rngSeed, int cases,
                            uint64_t seedBase,
                            std::initializer_list<int64_t> queries,
                            double captureTolerance = 0) {
  std::mt19937_64 rng(rngSeed);
  auto pick = picker(rng);
  for (int n = 0; n < cases; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick(queries);
    c.Skv = pick({33, 150, 300});
    c.D = pick({32, 64});
    c.Dv = pick({32, 64});
    c.dtype = n % 3 == 1 ? "bf16" : n % 3 == 2 ? "f16" : "f32";
    c.causal = n % 2;
    c.window = rng() % 3 == 0 ? 40 : 0;
    c.lengths = rng() % 3 == 0;
    c.scoreMod = kind;
    c.captureTolerance = captureTolerance;
    c.cpu = n == 4 ? "native,-amx-tile,-amx-bf16" : "native";
    runCase(c, seedBase + n);
  }
}

/// A relative-position table (rel[h, j - i + Sq - 1]: one bias per head and
/// distance), whose gradient sums dS along diagonals: each of a row's keys
/// reads its own element, so a bf16 or f16 output's Delta comes from O
/// (isReadOncePerRow). Forward and every gradient against the reference.
TEST(KernelTest, RelativeTableGradients) {
  runCaptureCases(ScoreModKind::RelativeTable, 20261206, 6, 1950, {1, 40, 100});
}

/// Captures read per head (a scale t[h], a slope t[H] at a constant
/// index), whose gradients sum every row's terms: with a narrow output the
/// backward takes Delta from O and corrects them by each row's Delta error
/// (FlashBackward's correctRowSums), on the native, dot-product and AMX
/// paths, with masks, windows and lengths: errors of 1e-7 to 1e-6 of the
/// largest, 8e-5 to 7e-3 in bf16 and f16 without the correction, which the
/// check of 1e-4 catches.
TEST(KernelTest, PerHeadCaptureGradients) {
  runCaptureCases(ScoreModKind::HeadScales, 20261207, 8, 2950, {40, 100}, 1e-4);
}

/// A KV cache's rows past each sequence's length may hold anything (its
/// unwritten capacity): NaN there changes no output and no gradient,
/// forward and backward, on the f32 kernel, the dot products (bf16 without
/// AMX) and AMX, for causal caches and windows, decoding and prefill.
TEST(KernelTest, CacheRowsPastTheLengthsMayHoldNaN) {
  std::mt19937_64 rng(20261206);
  auto pick = picker(rng);
  for (int n = 0; n < 8; ++n) {
    AttentionCase c;
    c.B = 2;
    c.Hkv = 2;
    c.H = 4;
    c.Sq = pick({1, 16, 64});
    c.Skv = 300;
    c.D = 64;
    c.Dv = 64;
    c.dtype = n % 2 ? "bf16" : "f32";
    c.causal = n % 4 != 3;
    c.window = c.causal ? 0 : 50;
    c.cache = true;
    c.lengths = true;
    c.nanPastLengths = true;
    if (n == 5)
      c.cpu = "native,-amx-tile,-amx-bf16";
    runCase(c, 2600 + n);
  }
}

/// GQA/MQA decoding steps without regions: the kernel takes a KV head's
/// query heads as the rows of its query tiles (FlashForward's foldHeads),
/// groups of 2 to 32 heads (13: tiles of uneven rows; 32: MQA, tiles of 11
/// rows, the last one short), with no mask, lengths, a cache's causal mask
/// and window, split-KV (over 2048 keys), f32, bf16 and f16; forward and
/// backward against the reference.
TEST(KernelTest, DecodingStepsFoldHeads) {
  std::mt19937_64 rng(20261205);
  auto pick = picker(rng);
  int n = 0;
  for (int64_t group : {2, 4, 8, 13, 32}) {
    for (int m = 0; m < 2; ++m, ++n) {
      AttentionCase c;
      c.B = pick({1, 3});
      c.Hkv = group == 32 ? 1 : pick({1, 2});
      c.H = c.Hkv * group;
      c.Sq = 1;
      c.Skv = pick({40, 300, 2500});
      c.D = pick({32, 64, 128});
      c.Dv = pick({16, 64});
      c.dtype = n % 3 == 1 ? "bf16" : n % 3 == 2 ? "f16" : "f32";
      c.lengths = rng() % 2;
      c.causal = rng() % 2;
      c.window = c.causal && rng() % 2 ? pick({7, 100}) : 0;
      c.cache = c.causal && rng() % 2;
      runCase(c, 2500 + n);
    }
  }
}

/// `cache`: the queries are the last Sq tokens of each batch's keys, the
/// causal and window masks compare keys with their positions (lengths - Sq
/// + i), forward and backward against the reference: decoding steps (Sq =
/// 1) and prefill chunks (Sq up to 70, past a batch's keys too), batches of
/// 0 keys and full caches, GQA, score_mods, every dtype, the
/// graph form through attn-fuse and unfused, the AMX/dot-product bf16
/// kernels (64 query rows or more, D = 128) and the Vulkan kernels.
TEST(KernelTest, CacheMasks) {
  std::mt19937_64 rng(20261203);
  auto pick = picker(rng);
  for (int n = 0; n < 20; ++n) {
    AttentionCase c;
    c.B = pick({1, 2, 3});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 4});
    c.Sq = pick({1, 1, 5, 16, 33, 70});
    c.Skv = pick({33, 100, 300});
    c.D = pick({16, 24, 64, 128});
    c.Dv = pick({16, 48, 64});
    c.dtype = n % 4 == 1 ? "bf16" : n % 4 == 3 ? "f16" : "f32";
    c.causal = n % 3 != 2;
    c.window = c.causal && n % 2 ? 0 : pick({1, 20, 64});
    c.cache = true;
    c.lengths = n % 5 != 4;
    c.scoreMod = ScoreModKind(rng() % 4);
    c.documentMask = rng() % 5 == 0;
    c.graphForm = n % 6 == 5;
    runCase(c, 1500 + n);
    if (c.graphForm) {
      c.fuse = false;
      runCase(c, 1500 + n);
    }
  }
  for (int n = 0; n < 4; ++n) {
    AttentionCase c;
    c.B = 2;
    c.Hkv = 2;
    c.H = 4;
    c.Sq = n % 2 ? 64 : 97;
    c.Skv = 300;
    c.D = 128;
    c.Dv = 64;
    c.dtype = "bf16";
    c.causal = true;
    c.window = n == 3 ? 100 : 0;
    c.cache = true;
    c.lengths = n != 0;
    c.cpu = n == 2 ? "native,-amx-tile,-amx-bf16" : "native";
    runCase(c, 1600 + n);
  }
  for (int n = 0; n < 3; ++n) {
    AttentionCase c;
    c.B = 2;
    c.Hkv = 1;
    c.H = 2;
    c.Sq = pick({1, 17});
    c.Skv = 65;
    c.D = 64;
    c.Dv = 64;
    c.causal = true;
    c.window = n == 2 ? 9 : 0;
    c.cache = true;
    c.lengths = true;
    c.target = jit::Target::Vulkan;
    runCase(c, 1700 + n);
  }
}

/// mask_mod regions of random affine comparisons of i and j (signed and
/// unsigned predicates, eq/ne, negative constants): attn-plan-tiles turns
/// some into named masks (and drops the region when they say all of it);
/// whatever it does must agree with the region evaluated per element.
TEST(KernelTest, AffineMaskRegions) {
  std::mt19937_64 rng(91);
  auto pick = picker(rng);
  const char *predicates[] = {"slt", "sle", "sgt", "sge", "ult",
                              "ule", "ugt", "uge", "eq",  "ne"};
  std::pair<int64_t, int64_t> forms[] = {{1, -1}, {-1, 1}, {2, -1},
                                         {1, 0},  {0, 1}};
  auto base = [&](int n) {
    AttentionCase c;
    c.B = 1;
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick({9, 40, 130});
    c.Skv = pick({9, 40, 130});
    c.D = 16;
    c.Dv = 16;
    c.dtype = n % 4 == 3 ? "bf16" : "f32";
    c.graphForm = n % 3 == 2;
    return c;
  };
  int n = 0;
  // Every predicate on i - j and j - i against -1, 0 and 1, alone: the
  // forms the analysis can turn into named masks entirely, where an
  // off-by-one shows on the diagonal.
  for (const char *predicate : predicates)
    for (int form = 0; form < 2; ++form)
      for (int64_t rhs : {-1, 0, 1}) {
        AttentionCase c = base(n);
        c.Sq = c.Skv = 40;
        c.window = n % 7 == 0 ? 5 : 0;
        AttentionCase::AffineConjunct a;
        a.predicate = predicate;
        std::tie(a.a, a.c) = forms[form];
        a.rhs = rhs;
        c.affineMask.push_back(a);
        runCase(c, 900 + n++);
      }
  // Conjunctions of up to three, other forms (2 i - j, i alone, j alone)
  // and offsets, with and without named masks.
  for (int m = 0; m < 16; ++m) {
    AttentionCase c = base(n);
    c.causal = rng() % 4 == 0;
    c.window = rng() % 5 == 0 ? pick({5, 40}) : 0;
    int conjuncts = 1 + int(rng() % 3);
    for (int k = 0; k < conjuncts; ++k) {
      AttentionCase::AffineConjunct a;
      a.predicate = predicates[rng() % 10];
      std::tie(a.a, a.c) = forms[rng() % 5];
      a.k = pick({0, 3, -3, 17});
      a.rhs = pick({0, 1, -1, 5, 16, 33});
      c.affineMask.push_back(a);
    }
    runCase(c, 900 + n++);
  }
}

/// The same kernels for CPUs without AVX-512 (generic x86-64, and AVX2's
/// x86-64-v3): flash and unfused paths, regions, bf16.
TEST(KernelTest, GenericCpus) {
  std::mt19937_64 rng(31);
  auto pick = picker(rng);
  for (int n = 0; n < 6; ++n) {
    AttentionCase c;
    c.B = pick({1, 2});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 2});
    c.Sq = pick({7, 33});
    c.Skv = pick({9, 40});
    c.D = pick({5, 16, 32});
    c.Dv = pick({8, 16, 32});
    c.dtype = n % 3 == 2 ? "bf16" : "f32";
    c.causal = rng() % 2;
    c.lengths = rng() % 3 == 0;
    c.scoreMod = ScoreModKind(rng() % 4);
    c.documentMask = rng() % 3 == 0;
    c.cpu = n % 2 ? "x86-64" : "x86-64-v3";
    runCase(c, 900 + n);
  }
}

TEST(KernelTest, ProjectionAndMerge) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 4; ++n) {
    int64_t B = 1 + rng() % 2, S = 1 + rng() % 20, E = 4 + rng() % 13,
            H = 1 + rng() % 3, D = 1 + rng() % 9;
    bool causal = n % 2;
    std::ostringstream os;
    std::string xT = tensorType({B, S, E}, "f32"),
                wT = tensorType({E, H * D}, "f32"),
                woT = tensorType({H * D, E}, "f32"),
                hT = tensorType({B, H, S, D}, "f32"),
                sT = tensorType({B, H, S, S}, "f32");
    os << "func.func @layer(%x: " << xT << ", %wq: " << wT << ", %wk: " << wT
       << ", %wv: " << wT << ", %wo: " << woT << ") -> " << xT << " {\n";
    for (const char *name : {"q", "k", "v"})
      os << "  %" << name << " = attn.projection %x, %w" << name << " : "
         << xT << ", " << wT << " -> " << hT << "\n";
    os << "  %s = attn.scores %q, %k : " << hT << ", " << hT << " -> " << sT
       << "\n  %t = attn.scale %s : " << sT << "\n";
    os << (causal ? "  %m = attn.mask %t causal : " + sT + "\n"
                  : "  %m = attn.scale %t by 1.0 : " + sT + "\n");
    os << "  %p = attn.softmax %m : " << sT << "\n  %o = attn.apply %p, %v : "
       << sT << ", " << hT << " -> " << hT << "\n  %y = attn.merge %o, %wo : "
       << hT << ", " << woT << " -> " << xT << "\n  return %y : " << xT
       << "\n}\n";
    SCOPED_TRACE(os.str());
    std::string kernelsError;
  auto kernels = jit::Module::compile(os.str(), testOptions(), &kernelsError);
    ASSERT_TRUE(kernels) << kernelsError;

    std::vector<double> x(B * S * E), wq(E * H * D), wk(wq.size()),
        wv(wq.size()), wo(H * D * E);
    ref::fillRandom(x.data(), x.size(), 10 * n + 1);
    ref::fillRandom(wq.data(), wq.size(), 10 * n + 2, -0.5, 0.5);
    ref::fillRandom(wk.data(), wk.size(), 10 * n + 3, -0.5, 0.5);
    ref::fillRandom(wv.data(), wv.size(), 10 * n + 4, -0.5, 0.5);
    ref::fillRandom(wo.data(), wo.size(), 10 * n + 5, -0.5, 0.5);
    auto toF = [](const std::vector<double> &d) {
      return std::vector<float>(d.begin(), d.end());
    };
    auto xf = toF(x), wqf = toF(wq), wkf = toF(wk), wvf = toF(wv),
         wof = toF(wo);
    std::vector<float> y(B * S * E);
    auto status = kernels->callUnchecked(
        "layer", {xf.data(), wqf.data(), wkf.data(), wvf.data(), wof.data(),
                  y.data()});
    ASSERT_TRUE(status.error.empty()) << status.error;
    ASSERT_EQ(status.status, 0);

    std::vector<double> q(B * H * S * D), k(q.size()), v(q.size()),
        o(q.size()), expected(y.size());
    ref::projection(B, S, E, H, D, x.data(), wq.data(), q.data());
    ref::projection(B, S, E, H, D, x.data(), wk.data(), k.data());
    ref::projection(B, S, E, H, D, x.data(), wv.data(), v.data());
    ref::MaskSpec mask;
    mask.causal = causal;
    ref::attentionForward({B, H, H, S, S, D, D}, double(float(ref::defaultScale(D))),
                          mask, {}, q.data(), k.data(), v.data(), o.data(),
                          nullptr);
    ref::merge(B, H, S, D, E, o.data(), wo.data(), expected.data());
    EXPECT_LE(ref::maxRelativeError(y.data(), expected.data(), y.size()),
              1e-5);
  }
}

/// The softmax's exp, through the forward, to a few ulp: rows i of two
/// keys with scores 0 and a_i (Q's row i is a_i e_0, K's rows 0 and e_0,
/// scale 1) and V's rows 0 and 1 give O[i, :] = e^x / (1 + e^x) with x =
/// -|a_i| (the row's smaller score less its larger), for a_i over [-87,
/// 87]: the whole range above the flush of denormal probabilities. The
/// outputs' other tolerances (relative to the largest output) cannot see
/// an exp that is a few parts in a million off.
TEST(KernelTest, SoftmaxExpIsAccurate) {
  const int64_t n = 2048, d = 16;
  std::string q = tensorType({1, 1, n, d}), kv = tensorType({1, 1, 2, d});
  std::ostringstream spec;
  spec << "func.func @kernel(%q: " << q << ", %k: " << kv << ", %v: " << kv
       << ") -> " << q << " {\n  %o, %lse = attn.attention %q, %k, %v scale "
       << "1.0 : " << q << ", " << kv << ", " << kv << " -> " << q << ", "
       << tensorType({1, 1, n}) << "\n  return %o : " << q << "\n}\n";
  std::string error;
  auto kernels = jit::Module::compile(spec.str(), testOptions(), &error);
  ASSERT_TRUE(kernels) << error;
  std::vector<float> qs(n * d, 0.0f), ks(2 * d, 0.0f), vs(2 * d, 0.0f),
      o(n * d);
  for (int64_t i = 0; i < n; ++i)
    qs[i * d] = -87.0f + 174.0f * float(i) / float(n - 1);
  ks[d] = 1.0f; // key 1: score a_i
  for (int64_t c = 0; c < d; ++c)
    vs[d + c] = 1.0f; // value 1: ones
  auto status = kernels->callUnchecked(
      "kernel", {qs.data(), ks.data(), vs.data(), o.data()});
  ASSERT_TRUE(status.error.empty()) << status.error;
  ASSERT_EQ(status.status, 0);
  double worst = 0;
  int64_t worstRow = 0;
  for (int64_t i = 0; i < n; ++i) {
    double a = qs[i * d], expected = 1.0 / (1.0 + std::exp(-a));
    for (int64_t c = 0; c < d; ++c) {
      double err = std::fabs(o[i * d + c] - expected) / expected;
      if (err > worst)
        worst = err, worstRow = i;
    }
  }
  // exp's 1.5 ulp, and the rounding of 1 + e^x, its reciprocal and the
  // product: 3.5 ulp of 2^-24.
  EXPECT_LE(worst, 3.5 * 0x1p-24)
      << "row " << worstRow << ", a = " << qs[worstRow * d];
}

TEST(KernelTest, NullPointerReturnsStatusAndWritesNothing) {
  AttentionCase c;
  c.Sq = 3;
  c.Skv = 4;
  c.D = 2;
  c.Dv = 2;
  std::string kernelsError;
  auto kernels = jit::Module::compile(specFor(c), testOptions(), &kernelsError);
  ASSERT_TRUE(kernels) << kernelsError;
  std::vector<float> q(6, 1), k(8, 1), v(8, 1), o(6, 42), lse(3, 42);
  auto status = kernels->callUnchecked(
      "kernel", {q.data(), nullptr, v.data(), o.data(), lse.data()});
  ASSERT_TRUE(status.error.empty()) << status.error;
  EXPECT_EQ(status.status, 1);
  for (float x : o)
    EXPECT_EQ(x, 42.0f);
}

TEST(KernelTest, InvalidSpecGivesLocatedError) {
  std::string kernelsError;
  auto kernels = jit::Module::compile(
      "func.func @f(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> "
      "tensor<1x3x4x4xf32> {\n"
      "  %s = attn.scores %q, %k : tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32> "
      "-> tensor<1x3x4x4xf32>\n"
      "  return %s : tensor<1x3x4x4xf32>\n}\n", testOptions(), &kernelsError);
  ASSERT_FALSE(kernels);
  std::string message = kernelsError;
  EXPECT_NE(message.find("spec.mlir:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("multiple of key heads"), std::string::npos)
      << message;
}

} // namespace
