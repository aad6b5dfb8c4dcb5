// A spec's dynamic batch (`?` first dimensions): one compiled kernel for
// every batch size, computing each entry as the spec compiled for a batch
// of 1 computes it (bitwise), with the statuses of bad calls and nothing
// written by them.
#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "test/unit/TestUtil.h"
#include "tools/reference/Reference.h"

#include "gtest/gtest.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace attnc;
using test::testOptions;

namespace {

/// `text` with every "${B}" replaced by `batch`.
std::string withBatch(std::string text, const std::string &batch) {
  for (size_t at; (at = text.find("${B}")) != std::string::npos;)
    text.replace(at, 4, batch);
  return text;
}

/// Random bytes of `entry`'s tensors at batch size `batch`: floats in
/// [-1, 1) in their dtype, integers (lengths) in [0, maxInt]; outputs
/// filled with a sentinel.
std::vector<std::vector<uint8_t>> randomTensors(const jit::EntryPoint &entry,
                                                int64_t batch, int64_t maxInt,
                                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint8_t>> tensors;
  for (const jit::TensorSpec &arg : entry.args) {
    std::vector<uint8_t> bytes(arg.numBytes(batch), 0x5a);
    int64_t n = arg.numElements(batch);
    for (int64_t e = 0; e < n && !arg.isOutput; ++e) {
      double x = double(rng() >> 11) / double(1ull << 53) * 2 - 1;
      if (arg.dtype == jit::DType::F32) {
        float f = float(x);
        std::memcpy(&bytes[4 * e], &f, 4);
      } else if (arg.dtype == jit::DType::BF16) {
        uint16_t bits = ref::floatToBFloat16(float(x));
        std::memcpy(&bytes[2 * e], &bits, 2);
      } else {
        int32_t value = int32_t(rng() % uint64_t(maxInt + 1));
        std::memcpy(&bytes[4 * e], &value, 4);
      }
    }
    tensors.push_back(std::move(bytes));
  }
  return tensors;
}

/// Calls `name` of the dynamic module on `tensors` (a checked call: the
/// batch comes from their shapes), then `name` of the static module (the
/// spec at a batch of 1) once per entry on its slices, into a copy of the
/// outputs; expects both to succeed and every output to be the same bytes.
void expectSameAsPerEntry(const jit::Module &dynamic,
                          const jit::Module &perEntry, const std::string &name,
                          std::vector<std::vector<uint8_t>> &tensors,
                          int64_t batch) {
  SCOPED_TRACE(name + " at batch " + std::to_string(batch));
  const jit::EntryPoint &entry = *dynamic.find(name);
  std::vector<std::vector<uint8_t>> expected = tensors;
  std::vector<jit::TensorRef> refs;
  jit::EntryPoint concrete = entry.atBatch(batch);
  for (size_t k = 0; k < tensors.size(); ++k)
    refs.push_back(
        {tensors[k].data(), concrete.args[k].shape, concrete.args[k].dtype});
  jit::Result result = dynamic.call(name, refs);
  ASSERT_TRUE(result.ok()) << result.error << " status " << result.status;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<void *> slices;
    for (size_t k = 0; k < expected.size(); ++k)
      slices.push_back(expected[k].data() + (entry.args[k].batched()
                                                 ? b * entry.args[k].numBytes()
                                                 : 0));
    jit::Result one = perEntry.callUnchecked(name, slices);
    ASSERT_TRUE(one.ok()) << one.error << " status " << one.status;
  }
  for (size_t k = 0; k < tensors.size(); ++k)
    if (entry.args[k].isOutput)
      EXPECT_TRUE(tensors[k] == expected[k]) << "output " << entry.args[k].name;
}

/// bf16 GQA, causal, per-batch key lengths and a per-(batch, head) bias
/// read at [b, h]: its gradient has the batch too.
const char *kBiasSpec = R"(
func.func @f(%q: tensor<${B}x4x70x64xbf16>, %k: tensor<${B}x2x90x64xbf16>,
             %v: tensor<${B}x2x90x48xbf16>, %len: tensor<${B}xi32>,
             %bias: tensor<${B}x4xf32>) -> tensor<${B}x4x70x48xbf16> {
  %o, %lse = attn.attention %q, %k, %v causal lengths(%len : tensor<${B}xi32>)
      score_captures(%bias : tensor<${B}x4xf32>)
      : tensor<${B}x4x70x64xbf16>, tensor<${B}x2x90x64xbf16>, tensor<${B}x2x90x48xbf16>
        -> tensor<${B}x4x70x48xbf16>, tensor<${B}x4x70xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<${B}x4xf32>):
    %x = tensor.extract %c[%b, %h] : tensor<${B}x4xf32>
    %r = arith.addf %s, %x : f32
    attn.yield %r : f32
  }
  return %o : tensor<${B}x4x70x48xbf16>
}
)";

/// f32 with a sliding window and no integer inputs: its entries may run on
/// threads of their own.
const char *kWindowSpec = R"(
func.func @f(%q: tensor<${B}x4x70x32xf32>, %k: tensor<${B}x4x90x32xf32>,
             %v: tensor<${B}x4x90x32xf32>) -> tensor<${B}x4x70x32xf32> {
  %o, %lse = attn.attention %q, %k, %v causal window 40
      : tensor<${B}x4x70x32xf32>, tensor<${B}x4x90x32xf32>, tensor<${B}x4x90x32xf32>
        -> tensor<${B}x4x70x32xf32>, tensor<${B}x4x70xf32>
  return %o : tensor<${B}x4x70x32xf32>
}
)";

/// The spec of `text` with a dynamic batch against it at a batch of 1:
/// @f, then @f_fwd and @f_bwd on @f_fwd's results.
void checkEveryEntry(const std::string &text, int64_t maxInt) {
  SCOPED_TRACE(text);
  std::string error;
  auto dynamic =
      jit::Module::compile(withBatch(text, "?"), testOptions(), &error);
  ASSERT_TRUE(dynamic) << error;
  auto perEntry =
      jit::Module::compile(withBatch(text, "1"), testOptions(), &error);
  ASSERT_TRUE(perEntry) << error;
  ASSERT_TRUE(dynamic->find("f")->batched());
  EXPECT_EQ(dynamic->find("f")->args[0].shape[0], jit::kDynamicBatch);
  // On 2 threads, 1 and 3 entries run in turn (each on both threads), 5
  // on threads of their own (attn-batch-entries: from 2 per thread) unless
  // integer inputs have the batch (then from 4 per thread: 9 entries).
  attnc_set_num_threads(2);
  for (int64_t batch : {1, 3, 5, 9}) {
    auto f = randomTensors(*dynamic->find("f"), batch, maxInt, batch);
    expectSameAsPerEntry(*dynamic, *perEntry, "f", f, batch);
    auto fwd = randomTensors(*dynamic->find("f_fwd"), batch, maxInt, 7);
    expectSameAsPerEntry(*dynamic, *perEntry, "f_fwd", fwd, batch);
    auto bwd = randomTensors(*dynamic->find("f_bwd"), batch, maxInt, 8);
    for (size_t k = 0; k < fwd.size(); ++k)
      bwd[k] = fwd[k];
    expectSameAsPerEntry(*dynamic, *perEntry, "f_bwd", bwd, batch);
  }
  attnc_set_num_threads(0);
}

TEST(DynamicBatchTest, EveryEntryAsTheKernelOfOneEntry) {
  checkEveryEntry(kBiasSpec, 90);
  checkEveryEntry(kWindowSpec, 0);
}

/// A score capture without the batch (ALiBi slopes per head): its gradient
/// is the sum over the entries, in f32 in entry order, of what the kernel of
/// one entry gives (bitwise), and 0 for a batch of 0.
TEST(DynamicBatchTest, GradientsWithoutTheBatchAreSummedOverIt) {
  const char *spec = R"(
func.func @f(%q: tensor<${B}x4x33x16xf32>, %k: tensor<${B}x2x50x16xf32>,
             %v: tensor<${B}x2x50x16xf32>, %slopes: tensor<4xf32>)
    -> tensor<${B}x4x33x16xf32> {
  %o, %lse = attn.attention %q, %k, %v causal score_captures(%slopes : tensor<4xf32>)
      : tensor<${B}x4x33x16xf32>, tensor<${B}x2x50x16xf32>, tensor<${B}x2x50x16xf32>
        -> tensor<${B}x4x33x16xf32>, tensor<${B}x4x33xf32>
      score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<4xf32>):
    %m = tensor.extract %c[%h] : tensor<4xf32>
    %ji = arith.subi %j, %i : index
    %d = arith.index_cast %ji : index to i32
    %df = arith.sitofp %d : i32 to f32
    %t = arith.mulf %m, %df : f32
    %r = arith.addf %s, %t : f32
    attn.yield %r : f32
  }
  return %o : tensor<${B}x4x33x16xf32>
}
)";
  std::string error;
  auto dynamic =
      jit::Module::compile(withBatch(spec, "?"), testOptions(), &error);
  ASSERT_TRUE(dynamic) << error;
  auto perEntry =
      jit::Module::compile(withBatch(spec, "1"), testOptions(), &error);
  ASSERT_TRUE(perEntry) << error;
  const jit::EntryPoint &bwd = *dynamic->find("f_bwd");
  // q, k, v, slopes, o, lse, d_o; d_q, d_k, d_v, d_slopes.
  ASSERT_EQ(bwd.args.size(), 11u);
  EXPECT_FALSE(bwd.args[10].batched());
  for (int64_t batch : {3, 0}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto tensors = randomTensors(bwd, batch, 0, 11);
    std::vector<float> sum(4, 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      // (Its d_q, d_k and d_v slices are written again by the call below.)
      std::vector<uint8_t> part(16);
      std::vector<void *> slices;
      for (size_t k = 0; k < tensors.size(); ++k)
        slices.push_back(
            k == 10
                ? part.data()
                : tensors[k].data() +
                      (bwd.args[k].batched() ? b * bwd.args[k].numBytes() : 0));
      jit::Result one = perEntry->callUnchecked("f_bwd", slices);
      ASSERT_TRUE(one.ok()) << one.error << " status " << one.status;
      for (int h = 0; h < 4; ++h) {
        float x;
        std::memcpy(&x, &part[4 * h], 4);
        sum[h] += x;
      }
    }
    std::vector<void *> args;
    for (auto &t : tensors)
      args.push_back(t.data());
    args.push_back(reinterpret_cast<void *>(batch));
    jit::Result result = dynamic->callUnchecked("f_bwd", args);
    ASSERT_TRUE(result.ok()) << result.error << " status " << result.status;
    std::vector<float> got(4);
    std::memcpy(got.data(), tensors[10].data(), 16);
    EXPECT_EQ(got, sum);
  }
}

/// Decoding over a KV cache with a dynamic batch: the capacity's check
/// covers every entry before any is computed, in turn or in parallel.
TEST(DynamicBatchTest, BadCallsReturnTheirStatusAndWriteNothing) {
  const char *spec = R"(
func.func @step(%q: tensor<?x2x1x16xf32>, %k: tensor<?x1x40x16xf32>,
                %v: tensor<?x1x40x16xf32>, %len: tensor<?xi32>)
    -> tensor<?x2x1x16xf32> {
  %o, %l = attn.attention %q, %k, %v causal cache lengths(%len : tensor<?xi32>)
      : tensor<?x2x1x16xf32>, tensor<?x1x40x16xf32>, tensor<?x1x40x16xf32>
        -> tensor<?x2x1x16xf32>, tensor<?x2x1xf32>
  return %o : tensor<?x2x1x16xf32>
}
)";
  jit::Options options = testOptions();
  options.backward = false;
  std::string error;
  auto module = jit::Module::compile(spec, options, &error);
  ASSERT_TRUE(module) << error;
  const int64_t batch = 5;
  std::vector<float> q(batch * 2 * 16, 0.5f), kv(batch * 40 * 16, 0.25f),
      o(q.size());
  auto call = [&](std::vector<int32_t> len, int64_t n, void *qData) {
    std::fill(o.begin(), o.end(), 7.0f);
    return module
        ->callUnchecked("step", {qData, kv.data(), kv.data(), len.data(),
                                 o.data(), reinterpret_cast<void *>(n)})
        .status;
  };
  auto untouched = [&] { return o == std::vector<float>(o.size(), 7.0f); };
  // The last entry's length is past the capacity: nothing is written.
  attnc_set_num_threads(2);
  for (int64_t n : {int64_t(3), batch}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    std::vector<int32_t> over(batch, 5);
    over[n - 1] = 41;
    EXPECT_EQ(call(over, n, q.data()), ATTNC_STATUS_BAD_SIZE);
    EXPECT_TRUE(untouched());
    EXPECT_EQ(call({5, -1, 3, 4, 5}, n, q.data()), ATTNC_STATUS_BAD_SIZE);
    EXPECT_TRUE(untouched());
    EXPECT_EQ(call({5, 6, 7, 8, 9}, n, nullptr), ATTNC_STATUS_NULL_ARGUMENT);
    EXPECT_TRUE(untouched());
  }
  EXPECT_EQ(call({5, 6, 7}, -1, q.data()), ATTNC_STATUS_BAD_SIZE);
  EXPECT_TRUE(untouched());
  // A batch of 0 computes nothing; entries past the batch are not read.
  EXPECT_EQ(call({}, 0, nullptr), ATTNC_STATUS_OK);
  EXPECT_TRUE(untouched());
  for (int64_t n : {2, 4}) {
    std::vector<int32_t> len(batch, 40);
    len[n] = 99;
    EXPECT_EQ(call(len, n, q.data()), ATTNC_STATUS_OK);
    EXPECT_FALSE(std::equal(o.begin(), o.begin() + n * 2 * 16,
                            std::vector<float>(n * 2 * 16, 7.0f).begin()));
    EXPECT_TRUE(std::equal(o.begin() + n * 2 * 16, o.end(),
                           std::vector<float>(o.size(), 7.0f).begin()));
  }
  attnc_set_num_threads(0);
  // A checked call reads the batch from the shapes, which must agree.
  jit::Result mismatch = module->call("step", {{q.data(), {3, 2, 1, 16}},
                                               {kv.data(), {2, 1, 40, 16}},
                                               {kv.data(), {3, 1, 40, 16}},
                                               {o.data(), {3}, jit::DType::I32},
                                               {o.data(), {3, 2, 1, 16}}});
  EXPECT_NE(mismatch.error.find("must have shape [3,1,40,16] (its first "
                                "dimension the batch"),
            std::string::npos)
      << mismatch.error;
  // An unchecked call takes the batch after the tensors.
  jit::Result count = module->callUnchecked("step", {q.data()});
  EXPECT_NE(count.error.find("takes 6 arguments (a buffer per tensor, then "
                             "the batch size)"),
            std::string::npos)
      << count.error;
}

} // namespace
