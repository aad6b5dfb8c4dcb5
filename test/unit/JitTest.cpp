// The JIT API: checked calls, caches (memory, disk, corrupt entries) and
// concurrent compiles and calls.
#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>
#include <tuple>

using namespace attnc;
using test::testOptions;
namespace fs = std::filesystem;

namespace {

/// GQA attention over Q[1,4,Sq,8], K/V[1,2,Skv,8], optionally causal.
std::string spec(int64_t sq, int64_t skv, bool causal) {
  auto t = [](int64_t h, int64_t s) {
    return "tensor<1x" + std::to_string(h) + "x" + std::to_string(s) +
           "x8xf32>";
  };
  std::string lse = "tensor<1x4x" + std::to_string(sq) + "xf32>";
  return "func.func @attn(%q: " + t(4, sq) + ", %k: " + t(2, skv) +
         ", %v: " + t(2, skv) + ") -> (" + t(4, sq) + ", " + lse +
         ") {\n  %o, %lse = attn.attention %q, %k, %v" +
         (causal ? " causal" : "") + " : " + t(4, sq) + ", " + t(2, skv) +
         ", " + t(2, skv) + " -> " + t(4, sq) + ", " + lse +
         "\n  return %o, %lse : " + t(4, sq) + ", " + lse + "\n}\n";
}

/// A fresh cache directory per test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("attnc-jit-test-" + std::to_string(std::random_device()()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

jit::Options diskOptions(const TempDir &dir) {
  jit::Options options;
  options.cacheDir = dir.path.string();
  return options;
}

/// Runs the forward on random inputs and returns the max relative error
/// against the reference.
double forwardError(const jit::Module &module, int64_t sq, int64_t skv,
                    bool causal, uint64_t seed) {
  std::vector<double> q(4 * sq * 8), k(2 * skv * 8), v(2 * skv * 8);
  ref::fillRandom(q.data(), q.size(), seed);
  ref::fillRandom(k.data(), k.size(), seed + 1);
  ref::fillRandom(v.data(), v.size(), seed + 2);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()),
      vf(v.begin(), v.end()), o(4 * sq * 8), lse(4 * sq);
  jit::Result r = module.forward(
      {{qf.data(), {1, 4, sq, 8}}, {kf.data(), {1, 2, skv, 8}},
       {vf.data(), {1, 2, skv, 8}}, {o.data(), {1, 4, sq, 8}},
       {lse.data(), {1, 4, sq}}});
  if (!r.ok())
    return 1e9;
  std::vector<double> expected(o.size());
  ref::MaskSpec mask;
  mask.causal = causal;
  ref::attentionForward({1, 4, 2, sq, skv, 8, 8},
                        double(float(ref::defaultScale(8))), mask, {},
                        std::vector<double>(qf.begin(), qf.end()).data(),
                        std::vector<double>(kf.begin(), kf.end()).data(),
                        std::vector<double>(vf.begin(), vf.end()).data(),
                        expected.data(), nullptr);
  return ref::maxRelativeError(o.data(), expected.data(), o.size());
}

TEST(JitTest, CheckedCallsRejectBadArguments) {
  jit::Options options;
  options.diskCache = false;
  std::string error;
  auto module = jit::Module::compile(spec(5, 7, false), options, &error);
  ASSERT_TRUE(module) << error;
  ASSERT_NE(module->find("attn"), nullptr);
  ASSERT_NE(module->find("attn_fwd"), nullptr);
  ASSERT_NE(module->find("attn_bwd"), nullptr);
  EXPECT_EQ(module->find("attn")->args.size(), 5u);

  std::vector<float> q(4 * 5 * 8), k(2 * 7 * 8), v(k.size()), o(q.size(), 7),
      lse(4 * 5);
  std::vector<jit::TensorRef> args = {{q.data(), {1, 4, 5, 8}},
                                      {k.data(), {1, 2, 7, 8}},
                                      {v.data(), {1, 2, 7, 8}},
                                      {o.data(), {1, 4, 5, 8}},
                                      {lse.data(), {1, 4, 5}}};
  EXPECT_TRUE(module->forward(args).ok());

  auto wrongShape = args;
  wrongShape[1].shape = {1, 2, 8, 8};
  jit::Result r = module->forward(wrongShape);
  EXPECT_NE(r.error.find("argument 1 (k) must have shape [1,2,7,8], got "
                         "[1,2,8,8]"),
            std::string::npos)
      << r.error;
  auto wrongType = args;
  wrongType[0].dtype = jit::DType::BF16;
  EXPECT_NE(module->forward(wrongType).error.find("must be f32, got bf16"),
            std::string::npos);
  auto nullData = args;
  nullData[3].data = nullptr;
  EXPECT_NE(module->forward(nullData).error.find("is null"),
            std::string::npos);
  args.pop_back();
  EXPECT_NE(module->forward(args).error.find("takes 5 tensors, got 4"),
            std::string::npos);
  EXPECT_NE(module->call("nope", {}).error.find("no entry point"),
            std::string::npos);
  // Nothing was written by the rejected calls... except the one valid call.
  jit::Result unchecked = module->callUnchecked(
      "attn", {q.data(), nullptr, v.data(), o.data(), lse.data()});
  EXPECT_TRUE(unchecked.error.empty());
  EXPECT_EQ(unchecked.status, 1); // ATTNC_STATUS_NULL_ARGUMENT
}

TEST(JitTest, MemoryCacheReturnsTheSameModule) {
  jit::Options options;
  options.diskCache = false;
  auto a = jit::Module::compile(spec(3, 3, true), options);
  auto b = jit::Module::compile(spec(3, 3, true), options);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.get(), b.get());
  auto c = jit::Module::compile(spec(3, 4, true), options);
  ASSERT_TRUE(c);
  EXPECT_NE(a.get(), c.get());
}

TEST(JitTest, DiskCacheHitAndCorruptEntry) {
  TempDir dir;
  jit::Options options = diskOptions(dir);
  std::string error;
  auto first = jit::Module::compile(spec(6, 9, true), options, &error);
  ASSERT_TRUE(first) << error;
  EXPECT_FALSE(first->fromDiskCache());
  ASSERT_EQ(std::distance(fs::directory_iterator(dir.path),
                          fs::directory_iterator()),
            1);
  first.reset();
  jit::clearMemoryCache();

  auto hit = jit::Module::compile(spec(6, 9, true), options, &error);
  ASSERT_TRUE(hit) << error;
  EXPECT_TRUE(hit->fromDiskCache());
  EXPECT_LE(forwardError(*hit, 6, 9, true, 1), 1e-5);
  hit.reset();
  jit::clearMemoryCache();

  // Corrupt every byte class: a flipped byte in the object, a truncation
  // and a foreign file are detected and recompiled, never loaded.
  fs::path entry = fs::directory_iterator(dir.path)->path();
  std::string bytes;
  {
    std::ifstream in(entry, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (int variant = 0; variant < 3; ++variant) {
    std::string corrupt = bytes;
    if (variant == 0)
      corrupt[corrupt.size() / 2] ^= 0x5a;
    else if (variant == 1)
      corrupt.resize(corrupt.size() / 3);
    else
      corrupt = "not an attnc cache entry";
    {
      std::ofstream out(entry, std::ios::binary | std::ios::trunc);
      out << corrupt;
    }
    auto module = jit::Module::compile(spec(6, 9, true), options, &error);
    ASSERT_TRUE(module) << error;
    EXPECT_FALSE(module->fromDiskCache()) << "variant " << variant;
    EXPECT_LE(forwardError(*module, 6, 9, true, 2 + variant), 1e-5);
    module.reset();
    jit::clearMemoryCache();
  }
}

TEST(JitTest, ConcurrentCompilesAndCalls) {
  jit::Options options;
  options.diskCache = false;
  const int threads = 4;
  std::vector<double> errors(threads, 1e9);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      // Two threads share each spec: the same module or two equal ones.
      int64_t sq = 3 + t % 2, skv = 5;
      auto module = jit::Module::compile(spec(sq, skv, t % 2), options);
      if (!module)
        return;
      double worst = 0;
      for (int call = 0; call < 20; ++call)
        worst = std::max(worst, forwardError(*module, sq, skv, t % 2,
                                             100 * t + call));
      errors[t] = worst;
    });
  for (std::thread &thread : pool)
    thread.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_LE(errors[t], 1e-5) << "thread " << t;
}

TEST(JitTest, CpuAndThreadOptions) {
  const std::string spec =
      "func.func @k(%q: tensor<1x2x40x16xf32>) -> tensor<1x2x40x16xf32> {\n"
      "  %o, %l = attn.attention %q, %q, %q causal : tensor<1x2x40x16xf32>, "
      "tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32> -> tensor<1x2x40x16xf32>, "
      "tensor<1x2x40xf32>\n  return %o : tensor<1x2x40x16xf32>\n}\n";
  std::vector<float> q(1 * 2 * 40 * 16);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = float((i * 37) % 17) / 17.0f - 0.5f;
  auto run = [&](const jit::Options &options) {
    std::string error;
    auto module = jit::Module::compile(spec, options, &error);
    EXPECT_TRUE(module) << error;
    std::vector<float> o(q.size());
    if (module)
      EXPECT_TRUE(module->callUnchecked("k", {q.data(), o.data()}).ok());
    return o;
  };
  std::vector<float> reference = run(testOptions());
  // A generic CPU and a one-thread limit change the code, not the result
  // beyond rounding (the task order is fixed).
  jit::Options generic = testOptions();
  generic.cpu = "x86-64";
  jit::Options oneThread = testOptions();
  oneThread.threads = 1;
  for (const jit::Options &options : {generic, oneThread}) {
    std::vector<float> o = run(options);
    for (size_t i = 0; i < o.size(); ++i)
      ASSERT_NEAR(o[i], reference[i], 1e-5) << "element " << i;
  }
  // JIT code runs here: a CPU with features this host lacks is refused.
  jit::Options future = testOptions();
  future.cpu = "diamondrapids";
  std::string error;
  EXPECT_FALSE(jit::Module::compile(spec, future, &error));
  EXPECT_NE(error.find("this host lacks"), std::string::npos) << error;
  jit::Options unknown = testOptions();
  unknown.cpu = "no-such-cpu";
  EXPECT_FALSE(jit::Module::compile(spec, unknown, &error));
  EXPECT_NE(error.find("unknown CPU 'no-such-cpu'"), std::string::npos)
      << error;
}

/// A score_mod with math.rsqrt on a CPU without AVX: upstream's rsqrt
/// approximation is AVX's vrsqrtps, which LLVM could not select there (the
/// compile aborted); it is 1 / sqrt instead, as exact as the AVX-512 code.
TEST(JitTest, GenericCpuScoreModRsqrt) {
  const std::string spec =
      "func.func @k(%q: tensor<1x2x24x16xf32>) -> tensor<1x2x24x16xf32> {\n"
      "  %o, %l = attn.attention %q, %q, %q causal : tensor<1x2x24x16xf32>, "
      "tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32> -> tensor<1x2x24x16xf32>, "
      "tensor<1x2x24xf32> score_mod {\n"
      "  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):\n"
      "    %one = arith.constant 1.0 : f32\n"
      "    %s2 = arith.mulf %s, %s : f32\n"
      "    %t = arith.addf %s2, %one : f32\n"
      "    %r = math.rsqrt %t : f32\n"
      "    %m = arith.mulf %s, %r : f32\n"
      "    attn.yield %m : f32\n"
      "  }\n  return %o : tensor<1x2x24x16xf32>\n}\n";
  std::vector<float> q(2 * 24 * 16);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = float((i * 37) % 17) / 4.0f - 2.0f;
  std::vector<std::vector<float>> outputs;
  for (const char *cpu : {"native", "x86-64", "x86-64-v3"}) {
    jit::Options options = testOptions();
    options.cpu = cpu;
    std::string error;
    auto module = jit::Module::compile(spec, options, &error);
    ASSERT_TRUE(module) << cpu << ": " << error;
    std::vector<float> o(q.size());
    ASSERT_TRUE(module->callUnchecked("k", {q.data(), o.data()}).ok()) << cpu;
    outputs.push_back(o);
  }
  for (size_t c = 1; c < outputs.size(); ++c)
    for (size_t i = 0; i < q.size(); ++i)
      ASSERT_NEAR(outputs[c][i], outputs[0][i], 1e-5)
          << "CPU " << c << " element " << i;
}

/// The backward accumulates every gradient in a fixed order: dQ over the
/// key tiles of each split, the splits in order, dK/dV over query tiles and
/// heads, the slopes' partial rows in task order, a bias table read at its
/// keys by the one task that owns each key. Any thread count gives the same
/// bits (grouped heads, float captures, several key tiles; causal with one
/// task per (batch, KV head), and 2100 keys without a mask, whose tasks
/// are key splits over every pair: key_tasks).
TEST(JitTest, BackwardIsBitwiseDeterministicForAnyThreadCount) {
  for (auto [skv, mask] : {std::pair<int, std::string>(100, " causal"),
                           std::pair<int, std::string>(2100, "")}) {
    const std::string q = "tensor<2x4x100x16xf32>",
                      kv = "tensor<2x2x" + std::to_string(skv) + "x16xf32>",
                      l = "tensor<2x4x100xf32>",
                      bt = "tensor<4x100x" + std::to_string(skv) + "xf32>";
    const std::string spec =
        "func.func @k(%q: " + q + ", %k: " + kv + ", %v: " + kv +
        ", %s: tensor<4xf32>, %u: " + bt + ") -> (" + q + ", " + l +
        ") {\n"
        "  %o, %l = attn.attention %q, %k, %v" +
        mask +
        " score_captures(%s, %u : "
        "tensor<4xf32>, " +
        bt + ") : " + q + ", " + kv + ", " + kv + " -> " + q + ", " + l +
        " score_mod {\n"
        "  ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, "
        "%t: tensor<4xf32>, %w: " +
        bt +
        "):\n"
        "    %sl = tensor.extract %t[%h] : tensor<4xf32>\n"
        "    %bv = tensor.extract %w[%h, %i, %j] : " +
        bt +
        "\n"
        "    %d = arith.subi %j, %i : index\n"
        "    %di = arith.index_cast %d : index to i64\n"
        "    %df = arith.sitofp %di : i64 to f32\n"
        "    %bias = arith.mulf %sl, %df : f32\n"
        "    %xb = arith.addf %x, %bv : f32\n"
        "    %r = arith.addf %xb, %bias : f32\n"
        "    attn.yield %r : f32\n  }\n"
        "  return %o, %l : " +
        q + ", " + l + "\n}\n";
    auto fill = [](size_t n, unsigned seed) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i)
        x[i] = float((i * 2654435761u + seed * 97u) % 1000) / 1000.0f - 0.5f;
      return x;
    };
    size_t nq = 2 * 4 * 100 * 16, nkv = 2 * 2 * size_t(skv) * 16,
           nl = 2 * 4 * 100, nb = 4 * 100 * size_t(skv);
    auto qv = fill(nq, 1), kvK = fill(nkv, 2), kvV = fill(nkv, 3),
         slopes = fill(4, 4), dO = fill(nq, 5), dL = fill(nl, 6),
         table = fill(nb, 7);
    for (float &slope : slopes)
      slope *= 0.01f; // keeps 2100 keys' biases in range
    auto run = [&](int threads) {
      jit::Options options = testOptions();
      options.threads = threads;
      std::string error;
      auto module = jit::Module::compile(spec, options, &error);
      EXPECT_TRUE(module) << error;
      std::vector<float> o(nq), lse(nl), dq(nq), dk(nkv), dv(nkv), ds(4),
          dt(nb);
      if (module) {
        EXPECT_TRUE(module
                        ->callUnchecked("k", {qv.data(), kvK.data(), kvV.data(),
                                              slopes.data(), table.data(),
                                              o.data(), lse.data()})
                        .ok());
        EXPECT_TRUE(
            module
                ->callUnchecked("k_bwd",
                                {qv.data(), kvK.data(), kvV.data(),
                                 slopes.data(), table.data(), o.data(),
                                 lse.data(), dO.data(), dL.data(), dq.data(),
                                 dk.data(), dv.data(), ds.data(), dt.data()})
                .ok());
      }
      return std::vector<std::vector<float>>{dq, dk, dv, ds, dt};
    };
    std::vector<std::vector<float>> one = run(1);
    for (int threads : {2, 3}) {
      std::vector<std::vector<float>> many = run(threads);
      for (size_t g = 0; g < one.size(); ++g)
        EXPECT_EQ(std::memcmp(one[g].data(), many[g].data(),
                              one[g].size() * sizeof(float)),
                  0)
            << "gradient " << g << " with " << threads << " threads, "
            << skv << " keys";
    }
  }
}

/// A decoding step that the plan splits over its keys (one KV head, 5000
/// keys: four key ranges, merged in order) gives the same bits on 1, 2 and
/// 3 threads.
TEST(JitTest, SplitKeysAreBitwiseDeterministicForAnyThreadCount) {
  const std::string q = "tensor<1x8x1x16xf32>", kv = "tensor<1x1x5000x16xf32>",
                    l = "tensor<1x8x1xf32>";
  const std::string spec = "func.func @k(%q: " + q + ", %k: " + kv +
                           ", %v: " + kv + ") -> (" + q + ", " + l +
                           ") {\n  %o, %l = attn.attention %q, %k, %v : " + q +
                           ", " + kv + ", " + kv + " -> " + q + ", " + l +
                           "\n  return %o, %l : " + q + ", " + l + "\n}\n";
  std::vector<double> scratch(5000 * 16);
  std::vector<float> qv(8 * 16), kvK(5000 * 16), kvV(5000 * 16);
  for (auto [data, seed] : {std::pair{&qv, 1}, {&kvK, 2}, {&kvV, 3}}) {
    ref::fillRandom(scratch.data(), data->size(), seed, -3.0, 3.0);
    std::copy(scratch.begin(), scratch.begin() + data->size(), data->begin());
  }
  auto run = [&](int threads) {
    jit::Options options = testOptions();
    options.threads = threads;
    options.backward = false;
    std::string error;
    auto module = jit::Module::compile(spec, options, &error);
    EXPECT_TRUE(module) << error;
    std::vector<float> o(8 * 16), lse(8);
    if (module)
      EXPECT_TRUE(module
                      ->callUnchecked("k", {qv.data(), kvK.data(), kvV.data(),
                                            o.data(), lse.data()})
                      .ok());
    o.insert(o.end(), lse.begin(), lse.end());
    return o;
  };
  std::vector<float> one = run(1);
  for (int threads : {2, 3})
    EXPECT_EQ(run(threads), one) << threads << " threads";
}

/// A score_mod that divides by (40 - j): zero only at j = 40, a key past
/// Skv = 40 that the 16-lane region code still computes for; the kernel
/// must not trap there (integer division by zero) and must match a direct
/// evaluation everywhere else.
TEST(JitTest, RegionIntegerDivisionInPaddingLanes) {
  const int64_t S = 40, D = 16;
  const std::string t = "tensor<1x1x40x16xf32>";
  const std::string spec =
      "func.func @k(%q: " + t + ") -> " + t + " {\n"
      "  %o, %l = attn.attention %q, %q, %q : " + t + ", " + t + ", " + t +
      " -> " + t + ", tensor<1x1x40xf32> score_mod {\n"
      "  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):\n"
      "    %c40 = arith.constant 40 : index\n"
      "    %d = arith.subi %c40, %j : index\n"
      "    %x = arith.divui %i, %d : index\n"
      "    %xi = arith.index_cast %x : index to i64\n"
      "    %xf = arith.sitofp %xi : i64 to f32\n"
      "    %w = arith.constant 0.01 : f32\n"
      "    %bias = arith.mulf %xf, %w : f32\n"
      "    %r = arith.addf %s, %bias : f32\n"
      "    attn.yield %r : f32\n  }\n  return %o : " + t + "\n}\n";
  std::string error;
  auto module = jit::Module::compile(spec, testOptions(), &error);
  ASSERT_TRUE(module) << error;
  std::vector<float> q(S * D), o(S * D);
  for (size_t k = 0; k < q.size(); ++k)
    q[k] = float((k * 29) % 13) / 13.0f - 0.5f;
  ASSERT_TRUE(module->callUnchecked("k", {q.data(), o.data()}).ok());
  for (int64_t i = 0; i < S; ++i) {
    std::vector<double> p(S);
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j < S; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += double(q[i * D + d]) * q[j * D + d];
      p[j] = dot * double(float(0.25)) + 0.01 * double(i / (S - j));
      max = std::max(max, p[j]);
    }
    for (double &x : p)
      sum += (x = std::exp(x - max));
    for (int64_t d = 0; d < D; ++d) {
      double expected = 0;
      for (int64_t j = 0; j < S; ++j)
        expected += p[j] / sum * q[j * D + d];
      ASSERT_NEAR(o[i * D + d], expected, 1e-5) << "row " << i;
    }
  }
}

/// One spec text, compiled for two sequence lengths through Options::sizes.
TEST(JitTest, SizesAreSubstituted) {
  const std::string t = "tensor<1x2x${S}x16xf32>";
  const std::string spec =
      "func.func @k(%q: " + t + ") -> " + t + " {\n"
      "  %o, %l = attn.attention %q, %q, %q causal : " + t + ", " + t + ", " +
      t + " -> " + t + ", tensor<1x2x${S}xf32>\n  return %o : " + t + "\n}\n";
  for (int64_t S : {16, 40}) {
    jit::Options options = testOptions();
    options.sizes = {{"S", S}};
    std::string error;
    auto module = jit::Module::compile(spec, options, &error);
    ASSERT_TRUE(module) << error;
    const jit::EntryPoint *k = module->find("k");
    ASSERT_TRUE(k);
    EXPECT_EQ(k->args[0].shape, (std::vector<int64_t>{1, 2, S, 16}));
    std::vector<float> q(2 * S * 16, 0.5f), o(q.size());
    EXPECT_TRUE(module->forward({{q.data(), {1, 2, S, 16}},
                                 {o.data(), {1, 2, S, 16}}})
                    .ok());
    EXPECT_NEAR(o.back(), 0.5f, 1e-6);
  }
  std::string error;
  EXPECT_FALSE(jit::Module::compile(spec, testOptions(), &error));
  EXPECT_NE(error.find("line 1: size placeholder '${S}' has no value"),
            std::string::npos)
      << error;
}

TEST(JitTest, CompileFileReportsUnreadableFile) {
  std::string error;
  EXPECT_FALSE(jit::Module::compileFile("/nonexistent/spec.mlir", {}, &error));
  EXPECT_NE(error.find("cannot read '/nonexistent/spec.mlir'"),
            std::string::npos);
}

/// A caller that reuses one error string sees it empty after a success:
/// a failure's message does not outlive it (compile, a memory-cache hit,
/// compileFile).
TEST(JitTest, SuccessClearsAnEarlierError) {
  std::string error;
  EXPECT_FALSE(jit::Module::compile("func.func @f(", testOptions(), &error));
  ASSERT_FALSE(error.empty());
  auto compiled = jit::Module::compile(spec(5, 6, true), testOptions(), &error);
  EXPECT_TRUE(compiled) << error;
  EXPECT_EQ(error, "");

  EXPECT_FALSE(jit::Module::compileFile("/nonexistent/spec.mlir", {}, &error));
  ASSERT_FALSE(error.empty());
  auto hit = jit::Module::compile(spec(5, 6, true), testOptions(), &error);
  EXPECT_EQ(hit, compiled);
  EXPECT_EQ(error, "");

  TempDir dir;
  std::string path = (dir.path / "spec.mlir").string();
  std::ofstream(path) << spec(5, 6, true);
  EXPECT_FALSE(jit::Module::compile("${S}", testOptions(), &error));
  ASSERT_FALSE(error.empty());
  EXPECT_TRUE(jit::Module::compileFile(path, testOptions(), &error)) << error;
  EXPECT_EQ(error, "");
}

} // namespace

// Context-parallel ("ring") attention: the keys split across two calls on
// separately compiled entry points, their (O, LSE) merged by an exported
// attn.combine, equal one call over all the keys up to f32 rounding.
/// Sequences of random tokens for decoding tests, one per batch entry:
/// each one's q [H, T, D], k and v [Hkv, T, D], and the float64
/// reference's full attention over it under `mask`; `compare` checks a
/// step's outputs against that reference.
struct DecodeSequences {
  int64_t H, Hkv, D;
  std::vector<int64_t> total;
  std::vector<std::vector<double>> qs, ks, vs, expected;
  double worst = 0; // the largest relative error compared
  int64_t compared = 0;

  DecodeSequences(int64_t H, int64_t Hkv, int64_t D,
                  std::vector<int64_t> lengths, const ref::MaskSpec &mask)
      : H(H), Hkv(Hkv), D(D), total(std::move(lengths)) {
    size_t B = total.size();
    qs.resize(B), ks.resize(B), vs.resize(B), expected.resize(B);
    for (size_t b = 0; b < B; ++b) {
      qs[b].resize(H * total[b] * D);
      ks[b].resize(Hkv * total[b] * D);
      vs[b].resize(Hkv * total[b] * D);
      ref::fillRandom(qs[b].data(), qs[b].size(), 10 + b);
      ref::fillRandom(ks[b].data(), ks[b].size(), 20 + b);
      ref::fillRandom(vs[b].data(), vs[b].size(), 30 + b);
      std::vector<double> lse(H * total[b]);
      expected[b].resize(qs[b].size());
      ref::attentionForward({1, H, Hkv, total[b], total[b], D, D},
                            double(float(ref::defaultScale(D))), mask, {},
                            qs[b].data(), ks[b].data(), vs[b].data(),
                            expected[b].data(), lse.data());
    }
  }
  /// Element (g, p, d) of sequence b's keys or values.
  float key(int64_t b, int64_t g, int64_t p, int64_t d) const {
    return float(ks[b][(g * total[b] + p) * D + d]);
  }
  float value(int64_t b, int64_t g, int64_t p, int64_t d) const {
    return float(vs[b][(g * total[b] + p) * D + d]);
  }
  /// q [B, H, n, D]: each sequence's queries at positions [len - n, len)
  /// (a negative position repeats the first).
  std::vector<float> queries(const std::vector<int32_t> &len, int64_t n) const {
    std::vector<float> q(total.size() * H * n * D);
    for (size_t b = 0; b < total.size(); ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < D; ++d) {
            int64_t p = std::max<int64_t>(0, len[b] - n + i);
            q[((b * H + h) * n + i) * D + d] =
                float(qs[b][(h * total[b] + p) * D + d]);
          }
    return q;
  }
  /// o [B, H, n, D] against the reference's rows [from, from + n) of the
  /// sequences that have them.
  void compare(const std::vector<float> &o, int64_t from, int64_t n) {
    for (size_t b = 0; b < total.size(); ++b) {
      if (from >= total[b])
        continue;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < D; ++d) {
            double e = expected[b][(h * total[b] + from + i) * D + d];
            double a = o[((b * H + h) * n + i) * D + d];
            worst = std::max(worst, std::fabs(a - e) / (1 + std::fabs(e)));
            ++compared;
          }
    }
  }
};

/// A KV cache served by one compiled kernel per query count: a prefill
/// chunk of 7 tokens, then decoding steps of one token, each appended to
/// the cache (capacity 40) by the host before the call that reads it, with
/// two sequences of different lengths in one batch. Every output row
/// matches the float64 reference's full attention over the final sequence
/// at that token's position, causal and with a sliding window.
TEST(JitTest, CacheStepsMatchOneFullAttention) {
  const int64_t B = 2, H = 4, Hkv = 2, D = 8, cap = 40, chunk = 7;
  const int64_t total[B] = {30, 19};
  for (std::string mask : {"causal", "window 5"}) {
    SCOPED_TRACE(mask);
    auto t = [](int64_t h, int64_t s) {
      return "tensor<2x" + std::to_string(h) + "x" + std::to_string(s) +
             "x8xf32>";
    };
    auto step = [&](const std::string &name, int64_t sq) {
      std::string lse = "tensor<2x4x" + std::to_string(sq) + "xf32>";
      return "func.func @" + name + "(%q: " + t(4, sq) + ", %k: " +
             t(2, cap) + ", %v: " + t(2, cap) +
             ", %len: tensor<2xi32>) -> (" + t(4, sq) + ", " + lse +
             ") {\n  %o, %lse = attn.attention %q, %k, %v " + mask +
             " cache lengths(%len : tensor<2xi32>) : " + t(4, sq) + ", " +
             t(2, cap) + ", " + t(2, cap) + " -> " + t(4, sq) + ", " + lse +
             "\n  return %o, %lse : " + t(4, sq) + ", " + lse + "\n}\n";
    };
    jit::Options options = testOptions();
    options.backward = false;
    std::string error;
    auto module = jit::Module::compile(step("prefill", chunk) +
                                           step("decode", 1),
                                       options, &error);
    ASSERT_TRUE(module) << error;

    ref::MaskSpec m;
    m.causal = mask == "causal";
    m.window = mask == "causal" ? 0 : 5;
    DecodeSequences seqs(H, Hkv, D, {total[0], total[1]}, m);
    std::vector<float> kc(B * Hkv * cap * D, 0.0f), vc(kc.size(), 0.0f);
    std::vector<int32_t> len(B, 0);
    // Appends tokens [from, from + n) of every sequence that has them, then
    // runs `name` over the last n positions of each and compares them.
    auto advance = [&](const char *name, int64_t from, int64_t n) {
      for (int64_t b = 0; b < B; ++b) {
        int64_t have = std::min(n, std::max<int64_t>(0, total[b] - from));
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t p = from; p < from + have; ++p)
            for (int64_t d = 0; d < D; ++d) {
              kc[((b * Hkv + g) * cap + p) * D + d] = seqs.key(b, g, p, d);
              vc[((b * Hkv + g) * cap + p) * D + d] = seqs.value(b, g, p, d);
            }
        len[b] = int32_t(std::min(from + have, total[b]));
      }
      // (A finished sequence's rows repeat its last queries, unchecked.)
      std::vector<float> q = seqs.queries(len, n), o(q.size()), lse(B * H * n);
      jit::Result r = module->call(
          name, {{q.data(), {B, H, n, D}},
                 {kc.data(), {B, Hkv, cap, D}},
                 {vc.data(), {B, Hkv, cap, D}},
                 {len.data(), {B}, jit::DType::I32},
                 {o.data(), {B, H, n, D}},
                 {lse.data(), {B, H, n}}});
      ASSERT_TRUE(r.ok()) << r.error;
      seqs.compare(o, from, n);
    };
    advance("prefill", 0, chunk);
    for (int64_t from = chunk; from < std::max(total[0], total[1]); ++from)
      advance("decode", from, 1);
    EXPECT_EQ(seqs.compared, H * D * (total[0] + total[1]));
    EXPECT_LT(seqs.worst, 1e-5);
  }
}

/// A cache's lengths are checked before the kernel runs: one past the
/// capacity or negative returns ATTNC_STATUS_BAD_SIZE and writes nothing,
/// in the forward and in the backward; 0 and the capacity itself run.
TEST(JitTest, CacheLengthsPastTheCapacityReturnBadSize) {
  const std::string q = "tensor<2x2x1x8xf32>", kv = "tensor<2x1x40x8xf32>",
                    l = "tensor<2x2x1xf32>";
  const std::string spec =
      "func.func @step(%q: " + q + ", %k: " + kv + ", %v: " + kv +
      ", %len: tensor<2xi32>) -> " + q +
      " {\n  %o, %l = attn.attention %q, %k, %v causal cache lengths(%len : "
      "tensor<2xi32>) : " +
      q + ", " + kv + ", " + kv + " -> " + q + ", " + l + "\n  return %o : " +
      q + "\n}\n";
  std::string error;
  auto module = jit::Module::compile(spec, testOptions(), &error);
  ASSERT_TRUE(module) << error;
  std::vector<float> qv(2 * 2 * 8, 0.5f), kv1(2 * 40 * 8, 0.25f), o(qv.size()),
      dq(qv.size()), dk(kv1.size()), dv(kv1.size()), lse(4);
  for (auto [a, b, expected] :
       {std::tuple<int32_t, int32_t, int32_t>{5, 41, ATTNC_STATUS_BAD_SIZE},
        {-1, 3, ATTNC_STATUS_BAD_SIZE},
        {0, 40, ATTNC_STATUS_OK}}) {
    std::vector<int32_t> len = {a, b};
    std::fill(o.begin(), o.end(), 7.0f);
    std::fill(dq.begin(), dq.end(), 7.0f);
    jit::Result fwd = module->callUnchecked(
        "step", {qv.data(), kv1.data(), kv1.data(), len.data(), o.data()});
    EXPECT_EQ(fwd.status, expected) << a << ", " << b;
    // The backward's inputs: those of @step, its O, the saved LSE and dO.
    jit::Result bwd = module->callUnchecked(
        "step_bwd", {qv.data(), kv1.data(), kv1.data(), len.data(), o.data(),
                     lse.data(), qv.data(), dq.data(), dk.data(), dv.data()});
    EXPECT_EQ(bwd.status, expected) << a << ", " << b;
    if (expected != ATTNC_STATUS_OK) {
      EXPECT_EQ(o, std::vector<float>(o.size(), 7.0f));
      EXPECT_EQ(dq, std::vector<float>(dq.size(), 7.0f));
    }
  }
}

/// Decoding through kernels that append their own keys and values
/// (attn.append) to a KV cache, contiguous or paged: a prefill chunk, then
/// one token at a time, two sequences of different lengths in one batch.
/// Every output matches the float64 reference's full causal attention
/// over the final sequences, and the cache then holds exactly each
/// sequence's keys and values where the layout puts them (bitwise),
/// nothing else of it written. On the CPU and through Vulkan (whose checked
/// calls download the caches the kernels update in place).
TEST(JitTest, AppendedStepsMatchOneFullAttention) {
  const int64_t B = 2, H = 4, Hkv = 2, D = 32, cap = 40, chunk = 7;
  const int64_t page = 8, pages = 11, perSeq = cap / page;
  const int64_t total[B] = {30, 19};
  // Sequence b's page m: a shuffled table over a pool with spare pages.
  const std::vector<int32_t> table = {3, 9, 0, 6, 10, 2, 8, 5, 1, 4};
  for (auto [target, paged] :
       {std::pair(jit::Target::Cpu, false), std::pair(jit::Target::Cpu, true),
        std::pair(jit::Target::Vulkan, false),
        std::pair(jit::Target::Vulkan, true)}) {
    bool vulkan = target == jit::Target::Vulkan;
    SCOPED_TRACE(std::string(paged ? "paged" : "contiguous") +
                 (vulkan ? ", vulkan" : ""));
    auto t = [](int64_t a, int64_t h, int64_t s) {
      return "tensor<" + std::to_string(a) + "x" + std::to_string(h) + "x" +
             std::to_string(s) + "x32xf32>";
    };
    std::string cache = paged ? t(pages, Hkv, page) : t(B, Hkv, cap);
    std::string tableArg = paged ? ", %table: tensor<2x5xi32>" : "";
    std::string pagesOf = paged ? " pages(%table : tensor<2x5xi32>)" : "";
    auto step = [&](const std::string &name, int64_t sq) {
      std::string rows = t(B, Hkv, sq), q = t(B, H, sq);
      std::string lse = "tensor<2x4x" + std::to_string(sq) + "xf32>";
      auto append = [&](const char *to, const char *from, const char *in) {
        return std::string("  ") + to + " = attn.append " + from + ", " + in +
               " lengths(%len : tensor<2xi32>)" + pagesOf + " : " + rows +
               " into " + cache + "\n";
      };
      return "func.func @" + name + "(%q: " + q + ", %kn: " + rows +
             ", %vn: " + rows + ", %k: " + cache + ", %v: " + cache +
             ", %len: tensor<2xi32>" + tableArg + ") -> (" + q + ", " + lse +
             ") {\n" + append("%k1", "%kn", "%k") + append("%v1", "%vn", "%v") +
             "  %o, %lse = attn.attention %q, %k1, %v1 causal cache "
             "lengths(%len : tensor<2xi32>)" +
             pagesOf + " : " + q + ", " + cache + ", " + cache + " -> " + q +
             ", " + lse + "\n  return %o, %lse : " + q + ", " + lse + "\n}\n";
    };
    jit::Options options = testOptions();
    options.backward = false;
    options.target = target;
    std::string error;
    auto module = jit::Module::compile(
        step("prefill", chunk) + step("decode", 1), options, &error);
    ASSERT_TRUE(module) << error;

    ref::MaskSpec causal;
    causal.causal = true;
    DecodeSequences seqs(H, Hkv, D, {total[0], total[1]}, causal);
    // Where position p of sequence b, head g, lies in the cache.
    auto at = [&](int64_t b, int64_t g, int64_t p) {
      if (!paged)
        return ((b * Hkv + g) * cap + p) * D;
      return ((table[b * perSeq + p / page] * Hkv + g) * page + p % page) * D;
    };
    const float untouched = 7.0f;
    std::vector<float> kc(paged ? pages * Hkv * page * D : B * Hkv * cap * D,
                          untouched),
        vc(kc.size(), untouched);
    std::vector<int32_t> len(B, 0);
    // Runs `name` on tokens [from, from + n) of every sequence that has them
    // (their keys and values as the new rows) and compares its outputs.
    auto advance = [&](const char *name, int64_t from, int64_t n) {
      std::vector<float> kn(B * Hkv * n * D, 0.0f), vn(kn.size(), 0.0f);
      for (int64_t b = 0; b < B; ++b) {
        int64_t have = std::min(n, std::max<int64_t>(0, total[b] - from));
        len[b] = int32_t(std::min(from + have, total[b]));
        // A finished sequence appends nothing (its length stays, its
        // last n rows are written again with what they hold).
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t d = 0; d < D; ++d) {
              int64_t p = len[b] - n + i;
              if (p < 0)
                continue;
              kn[((b * Hkv + g) * n + i) * D + d] = seqs.key(b, g, p, d);
              vn[((b * Hkv + g) * n + i) * D + d] = seqs.value(b, g, p, d);
            }
      }
      std::vector<float> q = seqs.queries(len, n), o(q.size()), lse(B * H * n);
      std::vector<void *> args = {q.data(),  kn.data(),  vn.data(), kc.data(),
                                  vc.data(), len.data(), o.data(),  lse.data()};
      if (paged)
        args.insert(args.begin() + 6, const_cast<int32_t *>(table.data()));
      // A checked call: on Vulkan the tensors go to the device and back.
      const jit::EntryPoint *entry = module->find(name);
      std::vector<jit::TensorRef> tensors;
      for (size_t k = 0; k < args.size(); ++k)
        tensors.push_back(
            {args[k], entry->args[k].shape, entry->args[k].dtype});
      jit::Result r = module->call(name, tensors);
      if (test::noVulkanDevice(r))
        GTEST_SKIP() << "no Vulkan device";
      ASSERT_TRUE(r.ok()) << r.error;
      seqs.compare(o, from, n);
    };
    advance("prefill", 0, chunk);
    if (IsSkipped())
      return;
    for (int64_t from = chunk; from < std::max(total[0], total[1]); ++from)
      advance("decode", from, 1);
    EXPECT_EQ(seqs.compared, H * D * (total[0] + total[1]));
    EXPECT_LT(seqs.worst, 1e-5);
    // The cache: each sequence's keys and values, and the rest untouched.
    std::vector<float> kExpected(kc.size(), untouched),
        vExpected(vc.size(), untouched);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t p = 0; p < total[b]; ++p)
          for (int64_t d = 0; d < D; ++d) {
            kExpected[at(b, g, p) + d] = seqs.key(b, g, p, d);
            vExpected[at(b, g, p) + d] = seqs.value(b, g, p, d);
          }
    EXPECT_EQ(kc, kExpected);
    EXPECT_EQ(vc, vExpected);

    // A length past the capacity (or a table entry outside the pool)
    // returns ATTNC_STATUS_BAD_SIZE and writes nothing: neither the cache
    // nor the output. (On GPU targets, where the lengths and the table are
    // on the device, such rows are not written, with no status.)
    if (vulkan)
      continue;
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> bad = {
        {{5, int32_t(cap + 1)}, table}, {{-1, 3}, table}};
    if (paged) {
      std::vector<int32_t> outside = table;
      outside[7] = int32_t(pages);
      bad.push_back({{5, 3}, outside});
    }
    for (auto &[lengths, entries] : bad) {
      std::vector<float> q(B * H * D, 0.5f), o(q.size(), untouched), lse(B * H),
          kn(B * Hkv * D, 0.25f), before = kc;
      std::vector<void *> args = {q.data(),  kn.data(), kn.data(),
                                  kc.data(), vc.data(), lengths.data(),
                                  o.data(),  lse.data()};
      if (paged)
        args.insert(args.begin() + 6, entries.data());
      jit::Result r = module->callUnchecked("decode", args);
      EXPECT_EQ(r.status, ATTNC_STATUS_BAD_SIZE);
      EXPECT_EQ(kc, before);
      EXPECT_EQ(o, std::vector<float>(o.size(), untouched));
    }
  }
}

TEST(JitTest, CombineOfSplitCallsMatchesOneCall) {
  auto t = [](int64_t h, int64_t s, int64_t d) {
    return "tensor<1x" + std::to_string(h) + "x" + std::to_string(s) + "x" +
           std::to_string(d) + "xf32>";
  };
  const int64_t sq = 9, skv1 = 20, skv2 = 27, skv = skv1 + skv2;
  const std::string o = t(4, sq, 8),
                    lse = "tensor<1x4x" + std::to_string(sq) + "xf32>";
  auto part = [&](const std::string &name, int64_t keys) {
    return "func.func @" + name + "(%q: " + t(4, sq, 8) +
           ", %k: " + t(2, keys, 8) + ", %v: " + t(2, keys, 8) + ") -> (" + o +
           ", " + lse +
           ") {\n  %o, %lse = attn.attention %q, %k, %v : " + t(4, sq, 8) +
           ", " + t(2, keys, 8) + ", " + t(2, keys, 8) + " -> " + o + ", " +
           lse + "\n  return %o, %lse : " + o + ", " + lse + "\n}\n";
  };
  std::string text =
      part("first", skv1) + part("second", skv2) + part("all", skv) +
      "func.func @merge(%o1: " + o + ", %o2: " + o + ", %l1: " + lse +
      ", %l2: " + lse + ") -> (" + o + ", " + lse +
      ") {\n  %o, %l = attn.combine %o1, %o2 lse %l1, %l2 : " + o + ", " + o +
      " lse " + lse + ", " + lse + " -> " + o + ", " + lse +
      "\n  return %o, %l : " + o + ", " + lse + "\n}\n";
  jit::Options options = testOptions();
  options.backward = false;
  std::string error;
  auto module = jit::Module::compile(text, options, &error);
  ASSERT_TRUE(module) << error;

  std::vector<float> q(4 * sq * 8), k(2 * skv * 8), v(k.size());
  std::vector<double> scratch(k.size());
  for (auto [data, seed] : {std::pair{&q, 1}, {&k, 2}, {&v, 3}}) {
    ref::fillRandom(scratch.data(), data->size(), seed);
    std::copy(scratch.begin(), scratch.begin() + data->size(), data->begin());
  }
  // K and V of each KV head split at key skv1.
  auto keys = [&](const std::vector<float> &x, int64_t from, int64_t count) {
    std::vector<float> part;
    for (int64_t g = 0; g < 2; ++g)
      part.insert(part.end(), x.begin() + (g * skv + from) * 8,
                  x.begin() + (g * skv + from + count) * 8);
    return part;
  };
  std::vector<float> k1 = keys(k, 0, skv1), v1 = keys(v, 0, skv1),
                     k2 = keys(k, skv1, skv2), v2 = keys(v, skv1, skv2);
  std::vector<float> o1(q.size()), o2(q.size()), oAll(q.size()),
      oMerged(q.size()), l1(4 * sq), l2(4 * sq), lAll(4 * sq), lMerged(4 * sq);
  auto call = [&](const char *name, std::vector<jit::TensorRef> args) {
    jit::Result r = module->call(name, args);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error << " status " << r.status;
  };
  const std::vector<int64_t> oShape = {1, 4, sq, 8}, lShape = {1, 4, sq};
  auto merge = [&] {
    call("merge", {{o1.data(), oShape},
                   {o2.data(), oShape},
                   {l1.data(), lShape},
                   {l2.data(), lShape},
                   {oMerged.data(), oShape},
                   {lMerged.data(), lShape}});
  };
  call("first", {{q.data(), oShape},
                 {k1.data(), {1, 2, skv1, 8}},
                 {v1.data(), {1, 2, skv1, 8}},
                 {o1.data(), oShape},
                 {l1.data(), lShape}});
  call("second", {{q.data(), oShape},
                  {k2.data(), {1, 2, skv2, 8}},
                  {v2.data(), {1, 2, skv2, 8}},
                  {o2.data(), oShape},
                  {l2.data(), lShape}});
  merge();
  call("all", {{q.data(), oShape},
               {k.data(), {1, 2, skv, 8}},
               {v.data(), {1, 2, skv, 8}},
               {oAll.data(), oShape},
               {lAll.data(), lShape}});
  std::vector<double> oRef(q.size()), lRef(4 * sq);
  ref::attentionForward(
      {1, 4, 2, sq, skv, 8, 8}, double(float(ref::defaultScale(8))), {}, {},
      std::vector<double>(q.begin(), q.end()).data(),
      std::vector<double>(k.begin(), k.end()).data(),
      std::vector<double>(v.begin(), v.end()).data(), oRef.data(), lRef.data());
  std::vector<double> oAllD(oAll.begin(), oAll.end()),
      lAllD(lAll.begin(), lAll.end());
  EXPECT_LT(ref::maxRelativeError(oMerged.data(), oAllD.data(), q.size()),
            1e-6);
  EXPECT_LT(ref::maxRelativeError(lMerged.data(), lAllD.data(), 4 * sq), 1e-6);
  EXPECT_LT(ref::maxRelativeError(oMerged.data(), oRef.data(), q.size()), 1e-6);
  EXPECT_LT(ref::maxRelativeError(lMerged.data(), lRef.data(), 4 * sq), 1e-6);

  // A row no part saw merges to O = 0, LSE = -inf; a NaN LSE makes its row
  // NaN; a row only one part saw is that part's.
  const float inf = std::numeric_limits<float>::infinity();
  l1[0] = l2[0] = -inf;
  l1[1] = std::nanf("");
  l2[2] = -inf;
  merge();
  EXPECT_EQ(lMerged[0], -inf);
  EXPECT_TRUE(std::isnan(lMerged[1]));
  EXPECT_EQ(lMerged[2], l1[2]);
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(oMerged[c], 0.0f);
    EXPECT_TRUE(std::isnan(oMerged[8 + c]));
    EXPECT_FLOAT_EQ(oMerged[16 + c], o1[16 + c]);
  }
}
