// A paged KV cache (attn.attention's `pages`): K and V as pools of pages
// and a block table per sequence, read through the table by the kernels,
// against the float64 reference over the gathered pages and against the
// same attention over a contiguous cache.
#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

using namespace attnc;

namespace {

using test::Buffer;
using test::tensorType;
using test::testOptions;

struct PagedCase {
  int64_t B = 1, H = 1, Hkv = 1, Sq = 1, D = 16, Dv = 16;
  int64_t pageSize = 16, pages = 4, tableColumns = 2; // N, M
  std::string dtype = "f32";
  bool causal = true;
  int64_t window = 0;
  bool alibi = false; // a score_mod over a captured slope per head
  jit::Target target = jit::Target::Cpu;
  std::string cpu = "native";

  int64_t capacity() const { return tableColumns * pageSize; }
  std::string describe() const {
    std::ostringstream os;
    os << "B=" << B << " H=" << H << " Hkv=" << Hkv << " Sq=" << Sq
       << " D=" << D << " Dv=" << Dv << " P=" << pageSize << " N=" << pages
       << " M=" << tableColumns << " " << dtype << (causal ? " causal" : "")
       << " window=" << window << (alibi ? " alibi" : "") << " cpu=" << cpu
       << (target == jit::Target::Vulkan ? " vulkan" : "");
    return os.str();
  }
};

/// The spec: @kernel(q, k, v, len, [table], [slopes]) -> (O, LSE), paged
/// (k and v pools of pages) or over the contiguous cache they gather to.
std::string specFor(const PagedCase &c, bool paged) {
  int64_t keys = paged ? c.pageSize : c.capacity();
  int64_t first = paged ? c.pages : c.B;
  std::string qT = tensorType({c.B, c.H, c.Sq, c.D}, c.dtype),
              kT = tensorType({first, c.Hkv, keys, c.D}, c.dtype),
              vT = tensorType({first, c.Hkv, keys, c.Dv}, c.dtype),
              oT = tensorType({c.B, c.H, c.Sq, c.Dv}, c.dtype),
              lseT = tensorType({c.B, c.H, c.Sq}, "f32"),
              lenT = tensorType({c.B}, "i32"),
              tableT = tensorType({c.B, c.tableColumns}, "i32"),
              slopeT = tensorType({c.H}, "f32");
  std::ostringstream os;
  os << "func.func @kernel(%q: " << qT << ", %k: " << kT << ", %v: " << vT
     << ", %len: " << lenT;
  if (paged)
    os << ", %table: " << tableT;
  if (c.alibi)
    os << ", %slopes: " << slopeT;
  os << ") -> (" << oT << ", " << lseT << ") {\n"
     << "  %o, %lse = attn.attention %q, %k, %v" << (c.causal ? " causal" : "");
  if (c.window)
    os << " window " << c.window;
  os << " cache lengths(%len : " << lenT << ")";
  if (paged)
    os << " pages(%table : " << tableT << ")";
  if (c.alibi)
    os << " score_captures(%slopes : " << slopeT << ")";
  os << " : " << qT << ", " << kT << ", " << vT << " -> " << oT << ", "
     << lseT;
  if (c.alibi)
    os << " score_mod {\n"
       << "^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: "
       << slopeT << "):\n"
       << "  %sl = tensor.extract %m[%h] : " << slopeT << "\n"
       << "  %d = arith.subi %j, %i : index\n"
       << "  %di = arith.index_cast %d : index to i64\n"
       << "  %df = arith.sitofp %di : i64 to f32\n"
       << "  %bias = arith.mulf %sl, %df : f32\n"
       << "  %r = arith.addf %s, %bias : f32\n"
       << "  attn.yield %r : f32\n}";
  os << "\n  return %o, %lse : " << oT << ", " << lseT << "\n}\n";
  return os.str();
}

std::shared_ptr<const jit::Module> compile(const PagedCase &c, bool paged) {
  jit::Options options = testOptions();
  options.backward = false;
  options.target = c.target;
  options.cpu = c.cpu;
  std::string error;
  auto module = jit::Module::compile(specFor(c, paged), options, &error);
  EXPECT_TRUE(module) << error;
  return module;
}

double toleranceFor(const std::string &dtype) {
  return dtype == "f32" ? 1e-5 : dtype == "f16" ? 4e-3 : 2e-2;
}

/// The inputs of one case: pools of random values, each batch's pages a
/// random choice among the pool's (some shared between batches, as a
/// shared prefix would be), random lengths from 0 to the capacity.
struct PagedInputs {
  Buffer q, kPool, vPool, lengths, table, slopes;
  std::vector<int64_t> lengths64, table64;
  PagedInputs(const PagedCase &c, uint64_t seed)
      : q(c.B * c.H * c.Sq * c.D, c.dtype),
        kPool(c.pages * c.Hkv * c.pageSize * c.D, c.dtype),
        vPool(c.pages * c.Hkv * c.pageSize * c.Dv, c.dtype),
        lengths(c.B, "i32"), table(c.B * c.tableColumns, "i32"),
        slopes(c.H, "f32") {
    ref::fillRandom(q.values.data(), q.values.size(), seed + 1, -2, 2);
    ref::fillRandom(kPool.values.data(), kPool.values.size(), seed + 2, -2, 2);
    ref::fillRandom(vPool.values.data(), vPool.values.size(), seed + 3);
    ref::fillRandom(slopes.values.data(), slopes.values.size(), seed + 4, -0.5,
                    0.5);
    std::mt19937_64 rng(seed);
    for (int64_t b = 0; b < c.B; ++b) {
      std::vector<int64_t> order(c.pages);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (int64_t m = 0; m < c.tableColumns; ++m)
        table64.push_back(order[m % c.pages]);
      lengths64.push_back(b == 0 && c.B > 2 ? 0
                          : b == 1          ? c.capacity()
                                   : int64_t(rng() % (c.capacity() + 1)));
    }
    for (size_t n = 0; n < table64.size(); ++n)
      table.values[n] = double(table64[n]);
    for (int64_t b = 0; b < c.B; ++b)
      lengths.values[b] = double(lengths64[b]);
    for (Buffer *x : {&q, &kPool, &vPool, &lengths, &table, &slopes})
      x->pack();
  }

  /// @kernel of `module` on q, k, v, lengths, the table (when `paged`) and
  /// the slopes (with c.alibi), writing o and lse.
  jit::Result call(const jit::Module &module, const PagedCase &c, Buffer &k,
                   Buffer &v, bool paged, Buffer &o, Buffer &lse) {
    std::vector<Buffer *> args = {&q, &k, &v, &lengths};
    if (paged)
      args.push_back(&table);
    if (c.alibi)
      args.push_back(&slopes);
    args.insert(args.end(), {&o, &lse});
    return test::call(module, "kernel", args);
  }

  /// K and V as the contiguous caches the table makes of the pools.
  std::pair<std::vector<double>, std::vector<double>>
  gathered(const PagedCase &c) const {
    return {
        ref::gatherPages(c.pages, c.Hkv, c.pageSize, c.D, c.B, c.tableColumns,
                         kPool.values.data(), table64.data()),
        ref::gatherPages(c.pages, c.Hkv, c.pageSize, c.Dv, c.B, c.tableColumns,
                         vPool.values.data(), table64.data())};
  }
};

/// Runs a case: the paged kernel against the reference and (on the CPU)
/// bitwise against the same kernel over the contiguous cache.
void runCase(const PagedCase &c, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  SCOPED_TRACE(specFor(c, true));
  auto paged = compile(c, true);
  ASSERT_TRUE(paged);
  PagedInputs in(c, seed);
  Buffer o(c.B * c.H * c.Sq * c.Dv, c.dtype), lse(c.B * c.H * c.Sq, "f32");
  jit::Result status = in.call(*paged, c, in.kPool, in.vPool, true, o, lse);
  ASSERT_TRUE(status.error.empty()) << status.error;
  ASSERT_EQ(status.status, 0);
  o.unpack();
  lse.unpack();

  int64_t S = c.capacity();
  auto [keys, values] = in.gathered(c);
  ref::MaskSpec mask;
  mask.causal = c.causal;
  mask.window = c.window;
  mask.cache = true;
  mask.sq = c.Sq;
  mask.skv = S;
  mask.lengths = in.lengths64.data();
  ref::ScoreMod mod;
  if (c.alibi)
    mod.apply = [&](double s, int64_t, int64_t h, int64_t i, int64_t j) {
      return s + in.slopes.values[h] * double(j - i);
    };
  std::vector<double> wantO(o.values.size()), wantLse(lse.values.size());
  ref::attentionForward({c.B, c.H, c.Hkv, c.Sq, S, c.D, c.Dv},
                        ref::defaultScale(c.D), mask, mod, in.q.values.data(),
                        keys.data(), values.data(), wantO.data(),
                        wantLse.data());
  EXPECT_LE(test::errorOf(o.values, wantO, 1.0), toleranceFor(c.dtype));
  EXPECT_LE(test::errorOf(lse.values, wantLse, 1.0), toleranceFor(c.dtype));

  if (c.target != jit::Target::Cpu)
    return;
  // The same attention over the contiguous cache: the same kernel, the
  // same results (bf16 chunks of 4 rows or more take AMX tiles over
  // either, where the CPU has them).
  auto contiguous = compile(c, false);
  ASSERT_TRUE(contiguous);
  Buffer k(keys.size(), c.dtype), v(values.size(), c.dtype),
      o2(o.values.size(), c.dtype), lse2(lse.values.size(), "f32");
  k.values = keys;
  v.values = values;
  k.pack();
  v.pack();
  status = in.call(*contiguous, c, k, v, false, o2, lse2);
  ASSERT_TRUE(status.error.empty()) << status.error;
  ASSERT_EQ(status.status, 0);
  EXPECT_EQ(o.bytes, o2.bytes);
  EXPECT_EQ(lse.bytes, lse2.bytes);
}

} // namespace

/// Decoding steps and prefill chunks over paged caches: pages of 1 to 256
/// tokens (smaller and larger than the kernels' key blocks, not powers of
/// two too), GQA and MHA, causal and windows, a score_mod, every dtype,
/// head dimensions that are and are not multiples of 16, the
/// AVX-512 BF16 dot products and plain AVX-512.
TEST(PagedCache, MatchesTheReferenceAndTheContiguousCache) {
  std::mt19937_64 rng(20261203);
  auto pick = [&](std::initializer_list<int64_t> xs) {
    return *(xs.begin() + rng() % xs.size());
  };
  for (int n = 0; n < 16; ++n) {
    PagedCase c;
    c.B = pick({1, 2, 3});
    c.Hkv = pick({1, 2});
    c.H = c.Hkv * pick({1, 4});
    c.Sq = pick({1, 1, 5, 16, 40});
    c.pageSize = pick({1, 7, 16, 32, 256});
    c.tableColumns = std::max<int64_t>(
        1, pick({40, 100, 300, 700}) / c.pageSize);
    c.pages = c.tableColumns + pick({0, 3});
    c.D = pick({16, 24, 64, 128});
    c.Dv = pick({16, 64});
    c.dtype = n % 4 == 1 ? "bf16" : n % 4 == 3 ? "f16" : "f32";
    c.causal = n % 3 != 2;
    c.window = c.causal && n % 2 ? 0 : pick({1, 20, 64});
    c.alibi = rng() % 3 == 0;
    if (n % 8 == 5)
      c.cpu = "native,-avx512bf16";
    runCase(c, 2000 + n);
  }
}

/// Split-KV over a paged cache: few (batch, KV head) pairs and long
/// caches take the plan's key splits, each reading its pages.
TEST(PagedCache, SplitKeys) {
  for (int n = 0; n < 3; ++n) {
    PagedCase c;
    c.H = 4;
    c.Hkv = n == 2 ? 4 : 1;
    c.Sq = n == 1 ? 16 : 1;
    c.pageSize = n == 0 ? 16 : 256;
    c.tableColumns = 4096 / c.pageSize;
    c.pages = c.tableColumns + 5;
    c.D = 64;
    c.Dv = 64;
    c.dtype = n == 1 ? "bf16" : "f32";
    c.window = n == 2 ? 3000 : 0;
    runCase(c, 2100 + n);
  }
}

/// The kernels for CPUs without AVX-512 (AVX2's x86-64-v3, and generic
/// x86-64) read paged caches too.
TEST(PagedCache, WithoutAvx512) {
  int n = 0;
  for (const char *cpu : {"x86-64-v3", "x86-64"})
    for (const char *dtype : {"f32", "bf16"}) {
      PagedCase c;
      c.B = 2;
      c.Hkv = 2;
      c.H = 8;
      c.Sq = n % 2 ? 1 : 9;
      c.pageSize = 16;
      c.tableColumns = 5;
      c.pages = 12;
      c.D = 24;
      c.Dv = 32;
      c.dtype = dtype;
      c.window = n == 3 ? 20 : 0;
      c.cpu = cpu;
      runCase(c, 2700 + n++);
    }
}

/// The Vulkan target's flash kernel reads a paged cache through its table
/// (the key block's rows staged page by page): MHA and GQA, decoding and
/// chunks, windows, an ALiBi score_mod, f32 and bf16, against the
/// reference over the gathered pages.
TEST(PagedCache, Vulkan) {
  for (int n = 0; n < 3; ++n) {
    PagedCase c;
    c.B = 2;
    c.Hkv = n == 0 ? 2 : 1;
    c.H = n == 0 ? 2 : 4;
    c.Sq = n == 1 ? 1 : 3;
    c.pageSize = n == 2 ? 5 : 8;
    c.tableColumns = 5;
    c.pages = 11;
    c.window = n == 1 ? 6 : 0;
    c.alibi = n == 2;
    c.dtype = n == 2 ? "bf16" : "f32";
    c.target = jit::Target::Vulkan;
    SCOPED_TRACE(c.describe());
    auto paged = compile(c, true);
    ASSERT_TRUE(paged);
    PagedInputs in(c, 2200 + n);
    Buffer o(c.B * c.H * c.Sq * c.Dv, c.dtype), lse(c.B * c.H * c.Sq, "f32");
    jit::Result status = in.call(*paged, c, in.kPool, in.vPool, true, o, lse);
    const char *require = std::getenv("ATTNC_REQUIRE_VULKAN");
    if (status.error.empty() && status.status == ATTNC_STATUS_NO_DEVICE &&
        !(require && std::string(require) == "1"))
      GTEST_SKIP() << "no Vulkan device";
    runCase(c, 2200 + n);
  }
}

/// Rows of a cache past a sequence's length are never seen, whatever they
/// hold: NaN there (uninitialized memory may read as NaN) leaves every
/// output finite and equal to the reference's over zeros, for a paged
/// cache (each sequence its own pages, the rest of the pool NaN too) and a
/// contiguous one, on the f32 kernel, the AVX-512 BF16 dot products and
/// (bf16 chunks of 4 rows or more, on CPUs with AMX) AMX tiles, and on the
/// Vulkan target's flash kernel.
TEST(PagedCache, RowsPastTheLengthsMayHoldNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int n = 0; n < 8; ++n) {
    PagedCase c;
    c.B = 3;
    c.Hkv = 2;
    c.H = 4;
    c.Sq = n < 2 ? 1 : n < 4 ? 16 : n < 6 ? 64 : 3;
    c.pageSize = 16;
    c.tableColumns = 6;
    c.pages = c.B * c.tableColumns + 2;
    c.D = 64;
    c.Dv = 64;
    c.dtype = n % 2 ? "bf16" : "f32";
    // The last two on the Vulkan target's flash kernel. (lavapipe gave 0
    // for p = 0 times NaN: staging rows past the length passed there too;
    // a device that keeps NaN would fail it.)
    if (n >= 6)
      c.target = jit::Target::Vulkan;
    bool paged = n < 4 || n == 6;
    SCOPED_TRACE(c.describe() + (paged ? " paged" : " contiguous"));
    auto module = compile(c, paged);
    ASSERT_TRUE(module);
    PagedInputs in(c, 2400 + n);
    // Sequence b's pages are b M .. b M + M - 1, its lengths below the
    // capacity (not a multiple of the page size or of 32).
    for (int64_t b = 0; b < c.B; ++b) {
      in.lengths64[b] = std::max<int64_t>(c.Sq, 37 + 11 * b);
      in.lengths.values[b] = double(in.lengths64[b]);
      for (int64_t m = 0; m < c.tableColumns; ++m) {
        in.table64[b * c.tableColumns + m] = b * c.tableColumns + m;
        in.table.values[b * c.tableColumns + m] =
            double(b * c.tableColumns + m);
      }
    }
    int64_t S = c.capacity();
    auto [keys, values] = in.gathered(c);
    // The rows no query sees: zeros for the reference, NaN for the kernel.
    std::vector<double> kNaN = keys, vNaN = values;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t g = 0; g < c.Hkv; ++g)
        for (int64_t j = in.lengths64[b]; j < S; ++j) {
          size_t row = size_t((b * c.Hkv + g) * S + j);
          std::fill_n(keys.begin() + row * c.D, c.D, 0.0);
          std::fill_n(values.begin() + row * c.Dv, c.Dv, 0.0);
          std::fill_n(kNaN.begin() + row * c.D, c.D, nan);
          std::fill_n(vNaN.begin() + row * c.Dv, c.Dv, nan);
        }
    Buffer k(0, c.dtype), v(0, c.dtype);
    if (paged) {
      k = in.kPool;
      v = in.vPool;
      // Pool rows: page p = b M + m holds sequence b's tokens from m P.
      for (int64_t p = 0; p < c.pages; ++p)
        for (int64_t g = 0; g < c.Hkv; ++g)
          for (int64_t r = 0; r < c.pageSize; ++r) {
            int64_t b = p / c.tableColumns,
                    j = p % c.tableColumns * c.pageSize + r;
            if (b < c.B && j < in.lengths64[b])
              continue;
            size_t row = size_t((p * c.Hkv + g) * c.pageSize + r);
            std::fill_n(k.values.begin() + row * c.D, c.D, nan);
            std::fill_n(v.values.begin() + row * c.Dv, c.Dv, nan);
          }
    } else {
      k = Buffer(kNaN.size(), c.dtype);
      v = Buffer(vNaN.size(), c.dtype);
      k.values = kNaN;
      v.values = vNaN;
    }
    k.pack();
    v.pack();
    in.lengths.pack();
    in.table.pack();
    Buffer o(c.B * c.H * c.Sq * c.Dv, c.dtype), lse(c.B * c.H * c.Sq, "f32");
    jit::Result status = in.call(*module, c, k, v, paged, o, lse);
    const char *require = std::getenv("ATTNC_REQUIRE_VULKAN");
    if (c.target == jit::Target::Vulkan && status.error.empty() &&
        status.status == ATTNC_STATUS_NO_DEVICE &&
        !(require && std::string(require) == "1"))
      continue; // no Vulkan device
    ASSERT_TRUE(status.error.empty()) << status.error;
    ASSERT_EQ(status.status, 0);
    o.unpack();
    ref::MaskSpec mask;
    mask.causal = true;
    mask.cache = true;
    mask.sq = c.Sq;
    mask.skv = S;
    mask.lengths = in.lengths64.data();
    std::vector<double> wantO(o.values.size()), wantLse(lse.values.size());
    ref::attentionForward({c.B, c.H, c.Hkv, c.Sq, S, c.D, c.Dv},
                          ref::defaultScale(c.D), mask, {},
                          in.q.values.data(), keys.data(), values.data(),
                          wantO.data(), wantLse.data());
    EXPECT_LE(test::errorOf(o.values, wantO, 1.0), toleranceFor(c.dtype));
  }
}

/// Bad inputs return ATTNC_STATUS_BAD_SIZE and write nothing: a block-table
/// entry outside the pool (negative or past it), used or not, and a length
/// past the capacity.
TEST(PagedCache, BadTablesAndLengthsReturnBadSize) {
  PagedCase c;
  c.B = 2;
  c.H = 2;
  c.pageSize = 16;
  c.tableColumns = 3;
  c.pages = 4;
  auto paged = compile(c, true);
  ASSERT_TRUE(paged);
  for (int n = 0; n < 4; ++n) {
    PagedInputs in(c, 2300 + n);
    if (n == 0)
      in.table.values[1] = -1;
    if (n == 1)
      in.table.values[5] = double(c.pages);
    if (n == 2)
      in.lengths.values[1] = double(c.capacity() + 1);
    in.table.pack();
    in.lengths.pack();
    Buffer o(c.B * c.H * c.Sq * c.Dv, c.dtype), lse(c.B * c.H * c.Sq, "f32");
    std::fill(o.bytes.begin(), o.bytes.end(), 0x5a);
    std::fill(lse.bytes.begin(), lse.bytes.end(), 0x5a);
    jit::Result status = in.call(*paged, c, in.kPool, in.vPool, true, o, lse);
    ASSERT_TRUE(status.error.empty()) << status.error;
    if (n == 3) {
      // (The same inputs, all in range.)
      EXPECT_EQ(status.status, 0);
      continue;
    }
    EXPECT_EQ(status.status, ATTNC_STATUS_BAD_SIZE) << "case " << n;
    EXPECT_TRUE(std::all_of(o.bytes.begin(), o.bytes.end(),
                            [](uint8_t x) { return x == 0x5a; }));
    EXPECT_TRUE(std::all_of(lse.bytes.begin(), lse.bytes.end(),
                            [](uint8_t x) { return x == 0x5a; }));
  }
}

/// A paged cache has no gradient: the backward is refused with a located
/// error that says how to compile without it.
TEST(PagedCache, BackwardIsRefused) {
  PagedCase c;
  jit::Options options = testOptions();
  std::string error;
  auto module = jit::Module::compile(specFor(c, true), options, &error);
  EXPECT_FALSE(module);
  EXPECT_NE(error.find("paged KV cache, which has no gradient"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("no-backward"), std::string::npos) << error;
}
