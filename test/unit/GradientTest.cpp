// Gradients of compiled f_bwd kernels against the float64 reference and
// against central finite differences of the float64 forward.
#include "attnc/jit.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>

using namespace attnc;

namespace {

using test::testOptions;
std::string tensor(std::initializer_list<int64_t> shape,
                   const char *dtype = "f32") {
  return test::tensorType(shape, dtype);
}

std::vector<float> toFloat(const std::vector<double> &v) {
  return std::vector<float>(v.begin(), v.end());
}
std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// A random scalar expression over the score s and a captured per-head
/// value c, printed as score_mod ops and evaluated in float64.
class RandomExpression {
public:
  explicit RandomExpression(uint64_t seed) : rng(seed) {}

  /// Emits the ops into `body` and returns the SSA name of the value.
  std::string build(int depth) {
    unsigned choice = depth == 0 ? rng() % 3 : rng() % 14;
    switch (choice) {
    case 0:
      eval.push_back([](double s, double) { return s; });
      return "%s";
    case 1:
      eval.push_back([](double, double c) { return c; });
      return "%c";
    case 2: {
      double value = double(int(rng() % 9) - 4) / 4.0;
      std::string name = fresh();
      body << name << " = arith.constant " << std::showpoint << value
           << std::noshowpoint << " : f32\n";
      eval.push_back([value](double, double) { return value; });
      return name;
    }
    default:
      break;
    }
    static const char *binary[] = {"arith.addf", "arith.subf", "arith.mulf",
                                   "arith.maximumf", "arith.minimumf"};
    std::string a = build(depth - 1);
    auto fa = eval.back();
    if (choice < 8) {
      std::string b = build(depth - 1);
      auto fb = eval.back();
      std::string name = fresh();
      const char *op = binary[choice - 3];
      body << name << " = " << op << " " << a << ", " << b << " : f32\n";
      eval.push_back([=](double s, double c) {
        double x = fa(s, c), y = fb(s, c);
        switch (choice) {
        case 3:
          return x + y;
        case 4:
          return x - y;
        case 5:
          return x * y;
        case 6:
          return std::max(x, y);
        default:
          return std::min(x, y);
        }
      });
      return name;
    }
    std::string name = fresh();
    switch (choice) {
    case 8: { // a / (1 + a*a)
      std::string sq = fresh(), one = fresh(), den = fresh();
      body << sq << " = arith.mulf " << a << ", " << a << " : f32\n"
           << one << " = arith.constant 1.0 : f32\n"
           << den << " = arith.addf " << one << ", " << sq << " : f32\n"
           << name << " = arith.divf " << a << ", " << den << " : f32\n";
      eval.push_back([=](double s, double c) {
        double x = fa(s, c);
        return x / (1 + x * x);
      });
      return name;
    }
    case 9: { // log(1 + a*a) and sqrt(1 + a*a)
      std::string sq = fresh(), one = fresh(), arg = fresh();
      bool useLog = rng() % 2;
      body << sq << " = arith.mulf " << a << ", " << a << " : f32\n"
           << one << " = arith.constant 1.0 : f32\n"
           << arg << " = arith.addf " << one << ", " << sq << " : f32\n"
           << name << " = " << (useLog ? "math.log " : "math.sqrt ") << arg
           << " : f32\n";
      eval.push_back([=](double s, double c) {
        double x = fa(s, c);
        return useLog ? std::log(1 + x * x) : std::sqrt(1 + x * x);
      });
      return name;
    }
    case 10: { // exp(tanh(a)) keeps the exponent bounded
      std::string t = fresh();
      body << t << " = math.tanh " << a << " : f32\n"
           << name << " = math.exp " << t << " : f32\n";
      eval.push_back(
          [=](double s, double c) { return std::exp(std::tanh(fa(s, c))); });
      return name;
    }
    case 11:
      body << name << " = arith.negf " << a << " : f32\n";
      eval.push_back([=](double s, double c) { return -fa(s, c); });
      return name;
    case 12:
      body << name << " = math.tanh " << a << " : f32\n";
      eval.push_back([=](double s, double c) { return std::tanh(fa(s, c)); });
      return name;
    default: { // select(a > 0, a, a * c)
      std::string zero = fresh(), cond = fresh(), alt = fresh();
      body << zero << " = arith.constant 0.0 : f32\n"
           << cond << " = arith.cmpf ogt, " << a << ", " << zero << " : f32\n"
           << alt << " = arith.mulf " << a << ", %c : f32\n"
           << name << " = arith.select " << cond << ", " << a << ", " << alt
           << " : f32\n";
      eval.push_back([=](double s, double c) {
        double x = fa(s, c);
        return x > 0 ? x : x * c;
      });
      return name;
    }
    }
  }

  std::ostringstream body;
  std::vector<std::function<double(double, double)>> eval;

private:
  std::string fresh() { return "%t" + std::to_string(counter++); }
  std::mt19937_64 rng;
  int counter = 0;
};

/// Central differences of a scalar function in float64.
double derivative(const std::function<double(double)> &f, double x) {
  const double h = 1e-6;
  return (f(x + h) - f(x - h)) / (2 * h);
}

/// Random compositions of every differentiable score_mod op, over a captured
/// per-head value, checked against the reference backward.
TEST(GradientTest, RandomScoreModCompositions) {
  const int64_t B = 1, H = 4, Hkv = 2, Sq = 6, Skv = 9;
  for (int n = 0; n < 24; ++n) {
    // Head dims of 16 from n = 16 on: the flash kernels evaluate the region
    // and its reverse sweep on 16 lanes and accumulate d cap per task.
    const int64_t D = n < 16 ? 5 : 16, Dv = n < 16 ? 3 : 16;
    RandomExpression expr(1000 + n);
    std::string result = expr.build(3);
    auto f = expr.eval.back();
    bool causal = n % 2;
    std::string qT = tensor({B, H, Sq, D}), kT = tensor({B, Hkv, Skv, D}),
                vT = tensor({B, Hkv, Skv, Dv}), oT = tensor({B, H, Sq, Dv}),
                lT = tensor({B, H, Sq}), cT = tensor({H});
    std::ostringstream spec;
    spec << "func.func @k(%q: " << qT << ", %k: " << kT << ", %v: " << vT
         << ", %cap: " << cT << ") -> " << oT << " {\n"
         << "  %o, %lse = attn.attention %q, %k, %v"
         << (causal ? " causal" : "") << " score_captures(%cap : " << cT
         << ") : " << qT << ", " << kT << ", " << vT << " -> " << oT << ", "
         << lT << " score_mod {\n"
         << "^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %cs: "
         << cT << "):\n  %c = tensor.extract %cs[%h] : " << cT << "\n"
         << expr.body.str() << "  attn.yield " << result << " : f32\n}\n"
         << "  return %o : " << oT << "\n}\n";
    SCOPED_TRACE(spec.str());
    std::string kernelsError;
    auto kernels =
        jit::Module::compile(spec.str(), testOptions(), &kernelsError);
    ASSERT_TRUE(kernels) << kernelsError;

    std::vector<double> q(B * H * Sq * D), k(B * Hkv * Skv * D),
        v(B * Hkv * Skv * Dv), cap(H), dO(B * H * Sq * Dv);
    ref::fillRandom(q.data(), q.size(), 10 * n + 1, -2, 2);
    ref::fillRandom(k.data(), k.size(), 10 * n + 2, -2, 2);
    ref::fillRandom(v.data(), v.size(), 10 * n + 3);
    ref::fillRandom(cap.data(), cap.size(), 10 * n + 4);
    ref::fillRandom(dO.data(), dO.size(), 10 * n + 5);
    auto qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), cf = toFloat(cap),
         dOf = toFloat(dO);
    q = toDouble(qf), k = toDouble(kf), v = toDouble(vf), cap = toDouble(cf),
    dO = toDouble(dOf);
    std::vector<float> o(dO.size()), lse(B * H * Sq), dq(q.size()),
        dk(k.size()), dv(v.size()), dcap(H);
    // @k returns O only, so @k_fwd saves the LSE for @k_bwd.
    auto status =
        kernels->callUnchecked("k_fwd", {qf.data(), kf.data(), vf.data(),
                                         cf.data(), o.data(), lse.data()});
    ASSERT_TRUE(status.ok()) << status.error;
    status = kernels->callUnchecked("k_bwd", {qf.data(), kf.data(), vf.data(),
                                              cf.data(), o.data(), lse.data(),
                                              dOf.data(), dq.data(), dk.data(),
                                              dv.data(), dcap.data()});
    ASSERT_TRUE(status.error.empty()) << status.error;
    ASSERT_EQ(status.status, 0);

    ref::MaskSpec mask;
    mask.causal = causal;
    ref::ScoreMod mod;
    std::vector<double> expectedCap(H, 0.0);
    mod.apply = [&](double s, int64_t, int64_t h, int64_t, int64_t) {
      return f(s, cap[h]);
    };
    mod.dScore = [&](double s, int64_t, int64_t h, int64_t, int64_t) {
      return derivative([&](double x) { return f(x, cap[h]); }, s);
    };
    mod.accumulateCaptureGrad = [&](double s, int64_t, int64_t h, int64_t,
                                    int64_t, double g) {
      expectedCap[h] +=
          g * derivative([&](double x) { return f(s, x); }, cap[h]);
    };
    std::vector<double> eq(q.size()), ek(k.size()), ev(v.size());
    double scale = double(float(ref::defaultScale(D)));
    ref::attentionBackward({B, H, Hkv, Sq, Skv, D, Dv}, scale, mask, mod,
                           q.data(), k.data(), v.data(), dO.data(), eq.data(),
                           ek.data(), ev.data());
    EXPECT_LE(ref::maxRelativeError(dq.data(), eq.data(), eq.size()), 1e-4);
    EXPECT_LE(ref::maxRelativeError(dk.data(), ek.data(), ek.size()), 1e-4);
    EXPECT_LE(ref::maxRelativeError(dv.data(), ev.data(), ev.size()), 1e-4);
    // A score_mod that does not depend on the score shifts whole rows, which
    // softmax ignores: the exact capture gradient is then 0, so the error is
    // relative to max(|expected|, 1).
    double capError = 0, capScale = 1;
    for (int64_t h = 0; h < H; ++h) {
      capError = std::max(capError, std::fabs(dcap[h] - expectedCap[h]));
      capScale = std::max(capScale, std::fabs(expectedCap[h]));
    }
    EXPECT_LE(capError / capScale, 1e-4) << "d capture";
  }
}

/// The whole loss sum(O * dO) + sum(LSE * dLSE), differentiated by central
/// differences of the float64 forward: GQA, Sq != Skv, causal, key padding
/// and ALiBi slopes as a captured input.
TEST(GradientTest, FiniteDifferencesOfTheForward) {
  const int64_t B = 2, H = 2, Hkv = 1, Sq = 4, Skv = 5, D = 3, Dv = 2;
  std::string qT = tensor({B, H, Sq, D}), kT = tensor({B, Hkv, Skv, D}),
              vT = tensor({B, Hkv, Skv, Dv}), oT = tensor({B, H, Sq, Dv}),
              lT = tensor({B, H, Sq}), sT = tensor({H}),
              nT = tensor({B}, "i32");
  std::string spec =
      "func.func @k(%q: " + qT + ", %k: " + kT + ", %v: " + vT +
      ", %len: " + nT + ", %sl: " + sT + ") -> (" + oT + ", " + lT +
      ") {\n  %o, %lse = attn.attention %q, %k, %v causal lengths(%len : " +
      nT + ") score_captures(%sl : " + sT + ") : " + qT + ", " + kT + ", " +
      vT + " -> " + oT + ", " + lT +
      " score_mod {\n^bb0(%s: f32, %b: index, %h: index, %i: index, %j: "
      "index, %c: " +
      sT + "):\n  %m = tensor.extract %c[%h] : " + sT +
      "\n  %d = arith.subi %j, %i : index\n"
      "  %di = arith.index_cast %d : index to i64\n"
      "  %df = arith.sitofp %di : i64 to f32\n"
      "  %bias = arith.mulf %m, %df : f32\n"
      "  %r = arith.addf %s, %bias : f32\n  attn.yield %r : f32\n}\n"
      "  return %o, %lse : " +
      oT + ", " + lT + "\n}\n";
  std::string kernelsError;
  auto kernels = jit::Module::compile(spec, testOptions(), &kernelsError);
  ASSERT_TRUE(kernels) << kernelsError;

  std::vector<double> q(B * H * Sq * D), k(B * Hkv * Skv * D),
      v(B * Hkv * Skv * Dv), slopes(H), dO(B * H * Sq * Dv), dL(B * H * Sq);
  ref::fillRandom(q.data(), q.size(), 1, -2, 2);
  ref::fillRandom(k.data(), k.size(), 2, -2, 2);
  ref::fillRandom(v.data(), v.size(), 3);
  ref::fillRandom(slopes.data(), slopes.size(), 4);
  ref::fillRandom(dO.data(), dO.size(), 5);
  ref::fillRandom(dL.data(), dL.size(), 6);
  std::vector<std::vector<double> *> inputs = {&q, &k, &v, &slopes, &dO, &dL};
  for (auto *input : inputs)
    *input = toDouble(toFloat(*input));
  int32_t lengths[B] = {5, 2};
  int64_t lengths64[B] = {5, 2};

  auto qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), sf = toFloat(slopes),
       dOf = toFloat(dO), dLf = toFloat(dL);
  std::vector<float> o(dO.size()), lse(dL.size()), dq(q.size()), dk(k.size()),
      dv(v.size()), dslopes(H);
  auto status =
      kernels->callUnchecked("k", {qf.data(), kf.data(), vf.data(), lengths,
                                   sf.data(), o.data(), lse.data()});
  ASSERT_TRUE(status.ok()) << status.error;
  status = kernels->callUnchecked(
      "k_bwd", {qf.data(), kf.data(), vf.data(), lengths, sf.data(), o.data(),
                lse.data(), dOf.data(), dLf.data(), dq.data(), dk.data(),
                dv.data(), dslopes.data()});
  ASSERT_TRUE(status.error.empty()) << status.error;
  ASSERT_EQ(status.status, 0);

  double scale = double(float(ref::defaultScale(D)));
  auto loss = [&]() {
    ref::MaskSpec mask;
    mask.causal = true;
    mask.lengths = lengths64;
    ref::ScoreMod mod;
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + slopes[h] * double(j - i);
    };
    std::vector<double> out(dO.size()), l(dL.size());
    ref::attentionForward({B, H, Hkv, Sq, Skv, D, Dv}, scale, mask, mod,
                          q.data(), k.data(), v.data(), out.data(), l.data());
    double total = 0;
    for (size_t i = 0; i < out.size(); ++i)
      total += out[i] * dO[i];
    for (size_t i = 0; i < l.size(); ++i)
      total += l[i] * dL[i];
    return total;
  };
  auto check = [&](std::vector<double> &x, const std::vector<float> &grad,
                   const char *name) {
    std::vector<double> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      double saved = x[i], h = 1e-5;
      x[i] = saved + h;
      double up = loss();
      x[i] = saved - h;
      double down = loss();
      x[i] = saved;
      expected[i] = (up - down) / (2 * h);
    }
    EXPECT_LE(ref::maxRelativeError(grad.data(), expected.data(), x.size()),
              1e-4)
        << name;
  };
  check(q, dq, "dQ");
  check(k, dk, "dK");
  check(v, dv, "dV");
  check(slopes, dslopes, "d slopes");
}

/// Projections, attention and the output projection: every weight's and
/// the input's gradient, with the projected Q/K/V saved by f_fwd.
TEST(GradientTest, ProjectionsAndMerge) {
  const int64_t B = 2, S = 7, E = 12, H = 3, D = 4;
  std::string xT = tensor({B, S, E}), wT = tensor({E, H * D}),
              woT = tensor({H * D, E}), hT = tensor({B, H, S, D}),
              sT = tensor({B, H, S, S});
  std::ostringstream spec;
  spec << "func.func @layer(%x: " << xT << ", %wq: " << wT << ", %wk: " << wT
       << ", %wv: " << wT << ", %wo: " << woT << ") -> " << xT << " {\n";
  for (const char *name : {"q", "k", "v"})
    spec << "  %" << name << " = attn.projection %x, %w" << name << " : " << xT
         << ", " << wT << " -> " << hT << "\n";
  spec << "  %s = attn.scores %q, %k : " << hT << ", " << hT << " -> " << sT
       << "\n  %t = attn.scale %s : " << sT
       << "\n  %m = attn.mask %t causal : " << sT
       << "\n  %p = attn.softmax %m : " << sT
       << "\n  %o = attn.apply %p, %v : " << sT << ", " << hT << " -> " << hT
       << "\n  %y = attn.merge %o, %wo : " << hT << ", " << woT << " -> " << xT
       << "\n  return %y : " << xT << "\n}\n";
  // Fused, f_fwd also saves the attention's O and LSE (the flash backward
  // needs them); unfused, it saves only the projections.
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    jit::Options options = testOptions();
    options.fuse = fuse;
    std::string kernelsError;
    auto kernels = jit::Module::compile(spec.str(), options, &kernelsError);
    ASSERT_TRUE(kernels) << kernelsError;

    std::vector<double> x(B * S * E), wq(E * H * D), wk(wq.size()),
        wv(wq.size()), wo(H * D * E), dy(x.size());
    ref::fillRandom(x.data(), x.size(), 1);
    ref::fillRandom(wq.data(), wq.size(), 2, -0.5, 0.5);
    ref::fillRandom(wk.data(), wk.size(), 3, -0.5, 0.5);
    ref::fillRandom(wv.data(), wv.size(), 4, -0.5, 0.5);
    ref::fillRandom(wo.data(), wo.size(), 5, -0.5, 0.5);
    ref::fillRandom(dy.data(), dy.size(), 6);
    for (auto *t : {&x, &wq, &wk, &wv, &wo, &dy})
      *t = toDouble(toFloat(*t));
    auto xf = toFloat(x), wqf = toFloat(wq), wkf = toFloat(wk),
         wvf = toFloat(wv), wof = toFloat(wo), dyf = toFloat(dy);
    std::vector<float> y(x.size()), savedQ(B * H * S * D),
        savedK(savedQ.size()), savedV(savedQ.size()), dx(x.size()),
        dwq(wq.size()), dwk(wk.size()), dwv(wv.size()), dwo(wo.size());
    std::vector<float> savedO(savedQ.size()), savedLse(B * H * S);
    std::vector<void *> saved = {savedQ.data(), savedK.data(), savedV.data()};
    if (fuse)
      saved.insert(saved.end(), {savedO.data(), savedLse.data()});
    std::vector<void *> fwdArgs = {xf.data(),  wqf.data(), wkf.data(),
                                   wvf.data(), wof.data(), y.data()};
    fwdArgs.insert(fwdArgs.end(), saved.begin(), saved.end());
    auto status = kernels->callUnchecked("layer_fwd", fwdArgs);
    ASSERT_TRUE(status.ok()) << status.error;
    std::vector<void *> bwdArgs = {xf.data(),  wqf.data(), wkf.data(),
                                   wvf.data(), wof.data(), y.data()};
    bwdArgs.insert(bwdArgs.end(), saved.begin(), saved.end());
    bwdArgs.insert(bwdArgs.end(), {dyf.data(), dx.data(), dwq.data(),
                                   dwk.data(), dwv.data(), dwo.data()});
    status = kernels->callUnchecked("layer_bwd", bwdArgs);
    ASSERT_TRUE(status.error.empty()) << status.error;
    ASSERT_EQ(status.status, 0);

    std::vector<double> q(savedQ.size()), k(q.size()), v(q.size()), o(q.size()),
        dO(q.size()), dQ(q.size()), dK(q.size()), dV(q.size()),
        eDx(x.size(), 0.0), eDwq(wq.size()), eDwk(wk.size()), eDwv(wv.size()),
        eDwo(wo.size());
    ref::projection(B, S, E, H, D, x.data(), wq.data(), q.data());
    ref::projection(B, S, E, H, D, x.data(), wk.data(), k.data());
    ref::projection(B, S, E, H, D, x.data(), wv.data(), v.data());
    EXPECT_LE(ref::maxRelativeError(savedQ.data(), q.data(), q.size()), 1e-5);
    ref::MaskSpec mask;
    mask.causal = true;
    double scale = double(float(ref::defaultScale(D)));
    ref::attentionForward({B, H, H, S, S, D, D}, scale, mask, {}, q.data(),
                          k.data(), v.data(), o.data(), nullptr);
    ref::mergeBackward(B, H, S, D, E, o.data(), wo.data(), dy.data(), dO.data(),
                       eDwo.data());
    ref::attentionBackward({B, H, H, S, S, D, D}, scale, mask, {}, q.data(),
                           k.data(), v.data(), dO.data(), dQ.data(), dK.data(),
                           dV.data());
    ref::projectionBackward(B, S, E, H, D, x.data(), wq.data(), dQ.data(),
                            eDx.data(), eDwq.data());
    ref::projectionBackward(B, S, E, H, D, x.data(), wk.data(), dK.data(),
                            eDx.data(), eDwk.data());
    ref::projectionBackward(B, S, E, H, D, x.data(), wv.data(), dV.data(),
                            eDx.data(), eDwv.data());
    EXPECT_LE(ref::maxRelativeError(dx.data(), eDx.data(), eDx.size()), 1e-4);
    EXPECT_LE(ref::maxRelativeError(dwq.data(), eDwq.data(), eDwq.size()),
              1e-4);
    EXPECT_LE(ref::maxRelativeError(dwk.data(), eDwk.data(), eDwk.size()),
              1e-4);
    EXPECT_LE(ref::maxRelativeError(dwv.data(), eDwv.data(), eDwv.size()),
              1e-4);
    EXPECT_LE(ref::maxRelativeError(dwo.data(), eDwo.data(), eDwo.size()),
              1e-4);
  }
}

TEST(GradientTest, OpWithoutRuleIsALocatedError) {
  std::string kernelsError;
  auto kernels = jit::Module::compile(
      "func.func @k(%q: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {\n"
      "  %o, %l = attn.attention %q, %q, %q : tensor<1x1x2x2xf32>, "
      "tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>, "
      "tensor<1x1x2xf32> score_mod {\n"
      "  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):\n"
      "    %r = math.atan %s : f32\n"
      "    attn.yield %r : f32\n  }\n"
      "  return %o : tensor<1x1x2x2xf32>\n}\n",
      testOptions(), &kernelsError);
  ASSERT_FALSE(kernels);
  std::string message = kernelsError;
  EXPECT_NE(message.find("spec.mlir:4:10: error: 'math.atan' op has no "
                         "gradient rule"),
            std::string::npos)
      << message;
  // Without the backward, the same spec compiles.
  jit::Options forwardOnly;
  forwardOnly.backward = false;
  std::string forwardError;
  auto forward = jit::Module::compile(
      "func.func @k(%q: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {\n"
      "  %o, %l = attn.attention %q, %q, %q : tensor<1x1x2x2xf32>, "
      "tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>, "
      "tensor<1x1x2xf32> score_mod {\n"
      "  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):\n"
      "    %r = math.atan %s : f32\n"
      "    attn.yield %r : f32\n  }\n"
      "  return %o : tensor<1x1x2x2xf32>\n}\n",
      forwardOnly, &forwardError);
  EXPECT_TRUE(forward) << forwardError;
}

} // namespace
