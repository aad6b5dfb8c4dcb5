// attn.distill (KL(P_t || P_s) of a teacher's and a student's attention,
// per row or its mean) and its derived gradients, compiled through the JIT,
// against the float64 reference: the KL from both full P, the gradients as
// each side's attention backward (dO, and the dLSE that attn.distill_grad
// passes on) plus the distillation's partial derivatives.
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

struct DistillCase {
  int64_t B = 1, H = 1, HkvS = 1, HkvT = 1, Sq = 1, Skv = 1, Ds = 16, Dt = 16;
  std::string dtype = "f32";
  bool mean = false; // the result is the mean KL (tensor<f32>)
  bool causal = false;
  int64_t window = 0;
  bool lengths = false;    // batch 0 sees no key (fully masked rows)
  bool documents = false;  // mask_mod: same document (ids captured)
  std::string cpu = "native"; // jit::Options::cpu
  jit::Target target = jit::Target::Cpu;
  double teacherScale = 0; // explicit (scale of the teacher's attention and
                           // teacher_scale of attn.distill); 0: default

  std::string describe() const {
    std::ostringstream os;
    os << "B=" << B << " H=" << H << " Hkv_s=" << HkvS << " Hkv_t=" << HkvT
       << " Sq=" << Sq << " Skv=" << Skv << " Ds=" << Ds << " Dt=" << Dt << " "
       << dtype << (mean ? " mean" : " per-row") << (causal ? " causal" : "")
       << " window=" << window << (lengths ? " lengths" : "")
       << (documents ? " documents" : "") << " teacher_scale=" << teacherScale
       << (target == jit::Target::Vulkan ? " vulkan" : "");
    return os.str();
  }
};

/// @f(qs, ks, vs, qt, kt, vt, [len], [doc_q, doc_k]) -> (O_s, KL): the
/// teacher's and the student's attn.attention and attn.distill over their
/// LSEs.
std::string specFor(const DistillCase &c) {
  std::string qsT = tensorType({c.B, c.H, c.Sq, c.Ds}, c.dtype),
              ksT = tensorType({c.B, c.HkvS, c.Skv, c.Ds}, c.dtype),
              qtT = tensorType({c.B, c.H, c.Sq, c.Dt}, c.dtype),
              ktT = tensorType({c.B, c.HkvT, c.Skv, c.Dt}, c.dtype),
              lseT = tensorType({c.B, c.H, c.Sq}),
              klT = c.mean ? "tensor<f32>" : lseT,
              docQT = tensorType({c.Sq}, "i32"),
              docKT = tensorType({c.Skv}, "i32");
  std::ostringstream masks, region;
  if (c.causal)
    masks << " causal";
  if (c.window)
    masks << " window " << c.window;
  if (c.lengths)
    masks << " lengths(%len : " << tensorType({c.B}, "i32") << ")";
  if (c.documents) {
    masks << " mask_captures(%dq, %dk : " << docQT << ", " << docKT << ")";
    region << " mask_mod {\n"
           << "^bb0(%b: index, %h: index, %i: index, %j: index, %a: " << docQT
           << ", %e: " << docKT << "):\n"
           << "  %di = tensor.extract %a[%i] : " << docQT << "\n"
           << "  %dj = tensor.extract %e[%j] : " << docKT << "\n"
           << "  %same = arith.cmpi eq, %di, %dj : i32\n"
           << "  attn.yield %same : i1\n}";
  }
  std::ostringstream teacherScale, distillScale;
  if (c.teacherScale) {
    teacherScale << " scale " << c.teacherScale;
    distillScale << " teacher_scale " << c.teacherScale;
  }
  std::ostringstream os;
  os << "func.func @f(%qs: " << qsT << ", %ks: " << ksT << ", %vs: " << ksT
     << ", %qt: " << qtT << ", %kt: " << ktT << ", %vt: " << ktT;
  if (c.lengths)
    os << ", %len: " << tensorType({c.B}, "i32");
  if (c.documents)
    os << ", %dq: " << docQT << ", %dk: " << docKT;
  os << ") -> (" << qsT << ", " << klT << ") {\n"
     << "  %ot, %lt = attn.attention %qt, %kt, %vt" << teacherScale.str()
     << masks.str() << " : " << qtT << ", " << ktT << ", " << ktT << " -> "
     << qtT << ", " << lseT << region.str() << "\n"
     << "  %os, %ls = attn.attention %qs, %ks, %vs" << masks.str() << " : "
     << qsT << ", " << ksT << ", " << ksT << " -> " << qsT << ", " << lseT
     << region.str() << "\n"
     << "  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt"
     << distillScale.str() << masks.str() << " : " << qsT << ", " << ksT << ", "
     << lseT << " teacher " << qtT << ", " << ktT << ", " << lseT << " -> "
     << klT << region.str() << "\n"
     << "  return %os, %kl : " << qsT << ", " << klT << "\n}\n";
  return os.str();
}

/// The largest errors a run measured (for the report of the tests' margins).
struct Errors {
  double kl = 0, output = 0, grad = 0;
};

/// Runs the forward and the backward of a case and compares the KL, O_s
/// and every float input's gradient with the reference.
Errors runCase(const DistillCase &c, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  std::string spec = specFor(c);
  SCOPED_TRACE(spec);
  std::string error;
  jit::Options options = test::testOptions();
  options.cpu = c.cpu;
  options.target = c.target;
  auto module = jit::Module::compile(spec, options, &error);
  EXPECT_TRUE(module) << error;
  if (!module)
    return {};

  const int64_t rows = c.B * c.H * c.Sq;
  Buffer qs(rows * c.Ds, c.dtype), ks(c.B * c.HkvS * c.Skv * c.Ds, c.dtype),
      vs(c.B * c.HkvS * c.Skv * c.Ds, c.dtype), qt(rows * c.Dt, c.dtype),
      kt(c.B * c.HkvT * c.Skv * c.Dt, c.dtype),
      vt(c.B * c.HkvT * c.Skv * c.Dt, c.dtype), len(c.B, "i32"),
      docQ(c.Sq, "i32"), docK(c.Skv, "i32"), os(rows * c.Ds, c.dtype),
      kl(c.mean ? 1 : rows, "f32"), ot(rows * c.Dt, c.dtype), lt(rows, "f32"),
      ls(rows, "f32");
  ref::fillRandom(qs.values.data(), qs.values.size(), seed + 1, -2, 2);
  ref::fillRandom(ks.values.data(), ks.values.size(), seed + 2, -2, 2);
  ref::fillRandom(vs.values.data(), vs.values.size(), seed + 3);
  ref::fillRandom(qt.values.data(), qt.values.size(), seed + 4, -2, 2);
  ref::fillRandom(kt.values.data(), kt.values.size(), seed + 5, -2, 2);
  ref::fillRandom(vt.values.data(), vt.values.size(), seed + 6);
  std::mt19937_64 rng(seed);
  std::vector<int64_t> lengths(c.B);
  for (int64_t b = 0; b < c.B; ++b) {
    lengths[b] = (b == 0 && c.B > 1) ? 0 : int64_t(rng() % (c.Skv + 3));
    len.values[b] = double(lengths[b]);
  }
  for (int64_t i = 0; i < c.Sq; ++i)
    docQ.values[i] = double(i * 3 / c.Sq);
  for (int64_t j = 0; j < c.Skv; ++j)
    docK.values[j] = double(j * 3 / c.Skv);
  for (Buffer *x : {&qs, &ks, &vs, &qt, &kt, &vt, &len, &docQ, &docK})
    x->pack();

  std::vector<Buffer *> inputs = {&qs, &ks, &vs, &qt, &kt, &vt};
  if (c.lengths)
    inputs.push_back(&len);
  if (c.documents)
    inputs.insert(inputs.end(), {&docQ, &docK});
  std::vector<Buffer *> results = {&os, &kl};
  // @f_fwd also returns what the backward reuses: the teacher's O and LSE
  // (in the order of the body), then the student's LSE.
  std::vector<Buffer *> saved = {&ot, &lt, &ls};
  std::vector<Buffer *> args = inputs;
  args.insert(args.end(), results.begin(), results.end());
  args.insert(args.end(), saved.begin(), saved.end());
  jit::Result status = call(*module, "f_fwd", args);
  if (test::noVulkanDevice(status)) {
    [] { GTEST_SKIP() << "no Vulkan device"; }();
    return {};
  }
  EXPECT_TRUE(status.ok()) << status.error << " status " << status.status;
  if (!status.ok())
    return {};
  for (Buffer *r : results)
    r->unpack();

  ref::AttentionShape student{c.B, c.H, c.HkvS, c.Sq, c.Skv, c.Ds, c.Ds},
      teacher{c.B, c.H, c.HkvT, c.Sq, c.Skv, c.Dt, c.Dt};
  ref::MaskSpec mask;
  mask.causal = c.causal;
  mask.window = c.window;
  if (c.lengths)
    mask.lengths = lengths.data();
  if (c.documents)
    mask.maskMod = [&](int64_t, int64_t, int64_t i, int64_t j) {
      return docQ.values[i] == docK.values[j];
    };
  // The kernels scale in f32.
  const double sScale = double(float(1.0 / std::sqrt(double(c.Ds)))),
               tScale = double(float(c.teacherScale
                                         ? c.teacherScale
                                         : 1.0 / std::sqrt(double(c.Dt))));
  ref::Distillation expected = ref::distillation(
      student, sScale, teacher, tScale, mask, qs.values.data(),
      ks.values.data(), qt.values.data(), kt.values.data());
  std::vector<double> expectedOs(os.values.size());
  ref::attentionForward(student, sScale, mask, {}, qs.values.data(),
                        ks.values.data(), vs.values.data(), expectedOs.data(),
                        nullptr);
  Errors errors;
  // The KL is computed in f32 from the inputs as rounded and the LSEs of
  // the attention kernels: a sum of differences of log-probabilities (of
  // magnitude 1 to 10), whose rounding errors do not shrink with the KL
  // (a row that sees one key has KL 0 and comes out as 5e-8): its error is
  // judged against at least 0.1 nats.
  errors.kl = c.mean ? errorOf(kl.values, {expected.meanKl}, 0.1)
                     : errorOf(kl.values, expected.kl, 0.1);
  EXPECT_LE(errors.kl, 2e-5) << "KL";
  errors.output = errorOf(os.values, expectedOs, 1e-3);
  EXPECT_LE(errors.output, c.dtype == "f32" ? 2e-5 : 1e-2) << "O_s";

  // Cotangents of O_s and of the KL.
  Buffer dOs(os.values.size(), c.dtype), dKl(kl.values.size(), "f32");
  ref::fillRandom(dOs.values.data(), dOs.values.size(), seed + 11);
  ref::fillRandom(dKl.values.data(), dKl.values.size(), seed + 12, -2, 2);
  // The mean's cotangent is shared among the rows: scaled by their number,
  // each row's share is as large as a per-row cotangent (else the KL's
  // gradients would hide below the tolerance, next to the attention's).
  if (c.mean)
    dKl.values[0] *= double(rows);
  dOs.pack();
  dKl.pack();
  Buffer dqs(qs.values.size(), c.dtype), dks(ks.values.size(), c.dtype),
      dvs(vs.values.size(), c.dtype), dqt(qt.values.size(), c.dtype),
      dkt(kt.values.size(), c.dtype), dvt(vt.values.size(), c.dtype);
  std::vector<Buffer *> bwd = args;
  bwd.insert(bwd.end(), {&dOs, &dKl, &dqs, &dks, &dvs, &dqt, &dkt, &dvt});
  for (Buffer *r : results)
    r->pack();
  status = call(*module, "f_bwd", bwd);
  EXPECT_TRUE(status.ok()) << status.error << " status " << status.status;
  if (!status.ok())
    return errors;
  for (Buffer *g : {&dqs, &dks, &dvs, &dqt, &dkt, &dvt})
    g->unpack();

  // Each side's attention backward for its dO (the teacher's is 0: its O is
  // not returned), plus the distillation's partial derivatives, plus what
  // their dLSE gives through each attention.
  std::vector<double> eqs(qs.values.size()), eks(ks.values.size()),
      evs(vs.values.size()), eqt(qt.values.size()), ekt(kt.values.size()),
      evt(vt.values.size()), zeroDOt(ot.values.size(), 0.0);
  ref::attentionBackward(student, sScale, mask, {}, qs.values.data(),
                         ks.values.data(), vs.values.data(), dOs.values.data(),
                         eqs.data(), eks.data(), evs.data());
  ref::attentionBackward(teacher, tScale, mask, {}, qt.values.data(),
                         kt.values.data(), vt.values.data(), zeroDOt.data(),
                         eqt.data(), ekt.data(), evt.data());
  ref::DistillationGrads partial = ref::distillationBackward(
      student, sScale, teacher, tScale, mask, qs.values.data(),
      ks.values.data(), qt.values.data(), kt.values.data(),
      c.mean ? nullptr : dKl.values.data(),
      c.mean ? dKl.values.data() : nullptr);
  auto add = [](std::vector<double> &to, const std::vector<double> &x) {
    for (size_t i = 0; i < to.size(); ++i)
      to[i] += x[i];
  };
  add(eqs, partial.dQs);
  add(eks, partial.dKs);
  add(eqt, partial.dQt);
  add(ekt, partial.dKt);
  ref::attentionLseBackward(student, sScale, mask, {}, qs.values.data(),
                            ks.values.data(), partial.dLseS.data(), eqs.data(),
                            eks.data());
  ref::attentionLseBackward(teacher, tScale, mask, {}, qt.values.data(),
                            kt.values.data(), partial.dLseT.data(), eqt.data(),
                            ekt.data());
  // bf16: a teacher's gradient is the sum of two bf16 tensors that partly
  // cancel (the distillation's partial derivative, g P (r + 1), and the
  // LSE's share through attn.attention_grad, -g P (KL + 1)); they err by up
  // to 1.2e-2 here.
  const double gradTolerance = c.dtype == "f32" ? 1e-4 : 3e-2;
  struct Named {
    const char *name;
    Buffer *actual;
    std::vector<double> *expected;
  };
  for (Named g : {Named{"d_qs", &dqs, &eqs}, Named{"d_ks", &dks, &eks},
                  Named{"d_vs", &dvs, &evs}, Named{"d_qt", &dqt, &eqt},
                  Named{"d_kt", &dkt, &ekt}, Named{"d_vt", &dvt, &evt}}) {
    double e = errorOf(g.actual->values, *g.expected, 1.0);
    EXPECT_LE(e, gradTolerance) << g.name;
    errors.grad = std::max(errors.grad, e);
  }
  return errors;
}

void report(const char *what, const std::vector<Errors> &runs) {
  Errors worst;
  for (const Errors &e : runs) {
    worst.kl = std::max(worst.kl, e.kl);
    worst.output = std::max(worst.output, e.output);
    worst.grad = std::max(worst.grad, e.grad);
  }
  std::printf("[ %s ] max errors: KL %.2e, O_s %.2e, gradients %.2e\n", what,
              worst.kl, worst.output, worst.grad);
}

TEST(DistillTest, PerRowKlAndGradients) {
  DistillCase c;
  c.B = 2, c.H = 4, c.HkvS = 2, c.HkvT = 4, c.Sq = 37, c.Skv = 45, c.Ds = 16,
  c.Dt = 32;
  c.causal = true;
  report("per row f32", {runCase(c, 1)});
}

/// Rows over several key blocks and key blocks over several query tiles:
/// the kernels' dQ sums over blocks and dK over tiles and query heads.
TEST(DistillTest, ManyKeyBlocksAndQueryTiles) {
  DistillCase c;
  c.B = 1, c.H = 4, c.HkvS = 2, c.HkvT = 1, c.Sq = 70, c.Skv = 300, c.Ds = 32,
  c.Dt = 16;
  report("many blocks f32", {runCase(c, 41)});
  c.causal = true;
  c.mean = true;
  c.dtype = "bf16";
  report("many blocks causal bf16 mean", {runCase(c, 42)});
  // As many KV heads on both sides: one dK pass for both.
  c.HkvT = 2, c.dtype = "f32", c.mean = false;
  report("many blocks, both sides' dK in one pass", {runCase(c, 43)});
}

/// CPUs without AVX-512 (x86-64, x86-64-v3): the kernels' generic paths.
TEST(DistillTest, GenericCpus) {
  DistillCase c;
  c.B = 1, c.H = 4, c.HkvS = 2, c.HkvT = 1, c.Sq = 40, c.Skv = 150, c.Ds = 32,
  c.Dt = 16;
  c.causal = true;
  std::vector<Errors> runs;
  for (const char *cpu : {"x86-64", "x86-64-v3"}) {
    c.cpu = cpu;
    runs.push_back(runCase(c, 61));
    c.mean = true;
    runs.push_back(runCase(c, 62));
    c.mean = false;
  }
  report("generic cpus", runs);
}

TEST(DistillTest, MeanKlAndGradients) {
  DistillCase c;
  c.B = 2, c.H = 4, c.HkvS = 1, c.HkvT = 2, c.Sq = 33, c.Skv = 40, c.Ds = 32,
  c.Dt = 16;
  c.mean = true;
  c.window = 12;
  c.teacherScale = 0.125; // a temperature
  report("mean f32", {runCase(c, 2)});
}

TEST(DistillTest, FullyMaskedRowsHaveZeroKl) {
  DistillCase c;
  c.B = 3, c.H = 2, c.HkvS = 1, c.HkvT = 2, c.Sq = 17, c.Skv = 33, c.Ds = 16,
  c.Dt = 48;
  c.lengths = true; // batch 0: no key at all
  report("lengths per row", {runCase(c, 3)});
  c.mean = true;
  report("lengths mean", {runCase(c, 4)});
}

TEST(DistillTest, Bf16) {
  DistillCase c;
  c.B = 1, c.H = 4, c.HkvS = 2, c.HkvT = 1, c.Sq = 29, c.Skv = 41, c.Ds = 16,
  c.Dt = 32;
  c.dtype = "bf16";
  c.causal = true;
  report("bf16 per row", {runCase(c, 5)});
  c.mean = true;
  report("bf16 mean", {runCase(c, 6)});
}

/// The GPU kernels through Vulkan (lavapipe in the test suite): the KL
/// and its gradients from both sides' scores a key block at a time.
TEST(DistillTest, VulkanKernels) {
  std::mt19937_64 rng(23);
  std::vector<Errors> f32, bf16;
  DistillCase fixed;
  fixed.target = jit::Target::Vulkan;
  fixed.B = 2, fixed.H = 4, fixed.HkvS = 2, fixed.HkvT = 4, fixed.Sq = 37,
  fixed.Skv = 75, fixed.Ds = 16, fixed.Dt = 32;
  fixed.causal = true, fixed.lengths = true;
  f32.push_back(runCase(fixed, 41));
  fixed.mean = true, fixed.documents = true, fixed.causal = false;
  fixed.Ds = 7, fixed.Dt = 80;
  f32.push_back(runCase(fixed, 42));
  for (int n = 0; n < 8; ++n) {
    DistillCase c;
    c.target = jit::Target::Vulkan;
    c.B = 1 + rng() % 2;
    c.HkvS = 1 + rng() % 2;
    c.HkvT = 1 + rng() % 2;
    c.H = c.HkvS * c.HkvT * (1 + rng() % 2);
    c.Sq = 1 + rng() % 50;
    c.Skv = 1 + rng() % 90;
    c.Ds = std::vector<int64_t>{1, 16, 32}[rng() % 3];
    c.Dt = std::vector<int64_t>{7, 16, 64}[rng() % 3];
    c.mean = rng() % 2 == 0;
    c.causal = rng() % 3 == 0;
    c.window = rng() % 4 == 0 ? 1 + rng() % 20 : 0;
    c.lengths = rng() % 3 == 0;
    c.documents = rng() % 4 == 0;
    c.teacherScale = rng() % 4 == 0 ? 0.1 : 0.0;
    c.dtype = rng() % 3 == 0 ? "bf16" : "f32";
    (c.dtype == "f32" ? f32 : bf16).push_back(runCase(c, 140 + n));
  }
  report("vulkan f32", f32);
  report("vulkan bf16", bf16);
}

TEST(DistillTest, RandomShapesAndMasks) {
  std::mt19937_64 rng(17);
  std::vector<Errors> f32, bf16;
  for (int n = 0; n < 10; ++n) {
    DistillCase c;
    c.B = 1 + rng() % 2;
    c.HkvS = 1 + rng() % 2;
    c.HkvT = 1 + rng() % 2;
    c.H = c.HkvS * c.HkvT * (1 + rng() % 2);
    c.Sq = 1 + rng() % 50;
    c.Skv = 1 + rng() % 60;
    c.Ds = 16 * (1 + rng() % 2);
    c.Dt = 16 * (1 + rng() % 4);
    c.mean = rng() % 2 == 0;
    c.causal = rng() % 3 == 0;
    c.window = rng() % 4 == 0 ? 1 + rng() % 20 : 0;
    c.lengths = rng() % 3 == 0;
    c.documents = rng() % 4 == 0;
    c.teacherScale = rng() % 4 == 0 ? 0.1 : 0.0;
    c.dtype = rng() % 3 == 0 ? "bf16" : "f32";
    (c.dtype == "f32" ? f32 : bf16).push_back(runCase(c, 100 + n));
  }
  report("random f32", f32);
  report("random bf16", bf16);
}

} // namespace
