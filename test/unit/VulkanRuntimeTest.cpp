// The Vulkan runtime (runtime/Vulkan.c), driven the way generated code
// drives it: kernels compiled from Inputs/axpy.mlir and Inputs/half.mlir by
// MLIR's own SPIR-V pipeline, dispatched with attnc_vk_dispatch and waited
// for with attnc_vk_finish. ctest runs them on Mesa's lavapipe (a CPU
// Vulkan device, see CMakeLists.txt); without a device they are skipped,
// unless ATTNC_REQUIRE_VULKAN=1.
#include "attnc/runtime.h"
#include "attnc/vulkan.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

// A SPIR-V binary built from Inputs/ (ATTNC_TEST_SHADER_DIR).
std::vector<uint32_t> readSpirv(const std::string &name) {
  std::ifstream in(std::string(ATTNC_TEST_SHADER_DIR) + "/" + name,
                   std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

// Statics, like the blobs of a kernel object: the runtime caches pipelines
// by their address.
const std::vector<uint32_t> &axpySpirv() {
  static const std::vector<uint32_t> words = readSpirv("axpy.spv");
  return words;
}
const std::vector<uint32_t> &halfSpirv() {
  static const std::vector<uint32_t> words = readSpirv("half.spv");
  return words;
}

bool vulkanRequired() {
  const char *env = std::getenv("ATTNC_REQUIRE_VULKAN");
  return env && std::strcmp(env, "1") == 0;
}

constexpr uint32_t kN = 1000;                   // axpy's length
constexpr uint64_t kBytes = kN * sizeof(float); // one axpy operand

class VulkanRuntime : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_GT(axpySpirv().size(), 5u)
        << "no axpy.spv in " << ATTNC_TEST_SHADER_DIR;
    int status = attnc_vk_context_create(&ctx);
    if (status == ATTNC_STATUS_NO_DEVICE && !vulkanRequired())
      GTEST_SKIP() << "no Vulkan device (ATTNC_REQUIRE_VULKAN=1 fails here)";
    ASSERT_EQ(status, ATTNC_STATUS_OK) << attnc_status_string(status);
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override { attnc_vk_context_destroy(ctx); }

  // A buffer holding `values`.
  attnc_vk_buffer *buffer(const std::vector<float> &values) {
    uint64_t bytes = values.size() * sizeof(float);
    attnc_vk_buffer *b = attnc_vk_buffer_create(ctx, bytes);
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(attnc_vk_upload(b, values.data(), bytes), ATTNC_STATUS_OK);
    return b;
  }
  std::vector<float> download(const attnc_vk_buffer *b, size_t n) {
    std::vector<float> values(n);
    EXPECT_EQ(attnc_vk_download(b, values.data(), n * sizeof(float)),
              ATTNC_STATUS_OK);
    return values;
  }
  // Records out = 2 x + y, as generated code would.
  void axpy(attnc_vk_buffer *x, attnc_vk_buffer *y, attnc_vk_buffer *out,
            uint64_t outBytes = kBytes) {
    attnc_vk_buffer *buffers[] = {x, y, out};
    uint64_t bytes[] = {kBytes, kBytes, outBytes};
    attnc_vk_dispatch(ctx, axpySpirv().data(), axpySpirv().size(), "axpy",
                      (kN + 63) / 64, 1, 1, 3, buffers, bytes);
  }

  attnc_vk_context *ctx = nullptr;
};

std::vector<float> iota(float start, float step, size_t n = kN) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i)
    values[i] = start + step * float(i);
  return values;
}

TEST_F(VulkanRuntime, DescribesItsDevice) {
  EXPECT_STRNE(attnc_vk_device_name(ctx), "");
  uint32_t size = attnc_vk_subgroup_size(ctx);
  EXPECT_GE(size, 1u);
  EXPECT_LE(size, 128u);
  EXPECT_EQ(size & (size - 1), 0u);
  std::printf("device: %s, subgroup size %u\n", attnc_vk_device_name(ctx),
              size);
  if (const char *want = std::getenv("ATTNC_TEST_SUBGROUP_SIZE"))
    EXPECT_EQ(size, uint32_t(std::atoi(want)));
  // A second context is independent of the first.
  attnc_vk_context *other = nullptr;
  ASSERT_EQ(attnc_vk_context_create(&other), ATTNC_STATUS_OK);
  EXPECT_STREQ(attnc_vk_device_name(other), attnc_vk_device_name(ctx));
  attnc_vk_context_destroy(other);
  attnc_vk_context_destroy(nullptr);
  EXPECT_EQ(attnc_vk_context_create(nullptr), ATTNC_STATUS_NULL_ARGUMENT);
}

TEST_F(VulkanRuntime, UploadDownloadRoundTrip) {
  EXPECT_EQ(attnc_vk_buffer_create(ctx, 0), nullptr);
  EXPECT_EQ(attnc_vk_buffer_create(nullptr, 16), nullptr);
  attnc_vk_buffer *b = attnc_vk_buffer_create(ctx, 4096);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(attnc_vk_buffer_size(b), 4096u);
  std::vector<uint8_t> in(4096), out(4096, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = uint8_t(i * 7 + 3);
  ASSERT_EQ(attnc_vk_upload(b, in.data(), in.size()), ATTNC_STATUS_OK);
  ASSERT_EQ(attnc_vk_download(b, out.data(), out.size()), ATTNC_STATUS_OK);
  EXPECT_EQ(in, out);
  // A prefix; more than the buffer holds; null pointers.
  std::vector<uint8_t> prefix(100, 0);
  ASSERT_EQ(attnc_vk_download(b, prefix.data(), 100), ATTNC_STATUS_OK);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), in.begin()));
  std::vector<uint8_t> big(4097);
  EXPECT_EQ(attnc_vk_upload(b, big.data(), 4097), ATTNC_STATUS_BAD_BUFFER);
  EXPECT_EQ(attnc_vk_download(b, big.data(), 4097), ATTNC_STATUS_BAD_BUFFER);
  EXPECT_EQ(attnc_vk_upload(nullptr, in.data(), 1), ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_EQ(attnc_vk_download(b, nullptr, 1), ATTNC_STATUS_NULL_ARGUMENT);
  attnc_vk_buffer_destroy(b);
  attnc_vk_buffer_destroy(nullptr);
  // Left alive: the context frees it.
  EXPECT_NE(attnc_vk_buffer_create(ctx, 1 << 20), nullptr);
}

TEST_F(VulkanRuntime, AxpyIsExact) {
  std::vector<float> x = iota(-250.0f, 0.5f), y = iota(3.0f, -1.0f);
  attnc_vk_buffer *bx = buffer(x), *by = buffer(y);
  attnc_vk_buffer *out = attnc_vk_buffer_create(ctx, kBytes);
  axpy(bx, by, out);
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  std::vector<float> result = download(out, kN);
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(result[i], 2.0f * x[i] + y[i]) << "at " << i;
  // Again, from the cached pipeline, with new inputs.
  x = iota(1.0f, 0.25f);
  attnc_vk_upload(bx, x.data(), kBytes);
  axpy(bx, by, out);
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  result = download(out, kN);
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(result[i], 2.0f * x[i] + y[i]) << "at " << i;
}

// Workgroup memory, a barrier and subgroup reductions; ctest runs it again
// with lavapipe's subgroups of 4 and 16 (LP_NATIVE_VECTOR_WIDTH).
TEST_F(VulkanRuntime, BlockSumsUseBarriersAndSubgroups) {
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int(i * 37 % 101) - 50);
  attnc_vk_buffer *bx = buffer(x), *sums = attnc_vk_buffer_create(ctx, 64),
                  *info = attnc_vk_buffer_create(ctx, 4);
  attnc_vk_buffer *buffers[] = {bx, sums, info};
  uint64_t bytes[] = {4096, 64, 4};
  attnc_vk_dispatch(ctx, axpySpirv().data(), axpySpirv().size(), "block_sums",
                    16, 1, 1, 3, buffers, bytes);
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  std::vector<float> result = download(sums, 16);
  for (int w = 0; w < 16; ++w) {
    float expected = 0;
    for (int i = 0; i < 64; ++i)
      expected += x[64 * w + i];
    EXPECT_EQ(result[w], expected) << "workgroup " << w;
  }
  int32_t size = 0;
  attnc_vk_download(info, &size, 4);
  EXPECT_EQ(uint32_t(size), attnc_vk_subgroup_size(ctx));
  if (const char *want = std::getenv("ATTNC_TEST_SUBGROUP_SIZE"))
    EXPECT_EQ(size, std::atoi(want));
}

TEST_F(VulkanRuntime, DispatchesSeeEarlierWrites) {
  std::vector<float> x = iota(-3.0f, 0.5f), y = iota(7.0f, 0.25f);
  attnc_vk_buffer *bx = buffer(x), *by = buffer(y),
                  *t = attnc_vk_buffer_create(ctx, kBytes),
                  *out = attnc_vk_buffer_create(ctx, kBytes);
  axpy(bx, by, t);  // t = 2 x + y
  axpy(t, by, out); // out = 2 t + y
  axpy(by, by, bx); // overwrites x, which the first dispatch read
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  std::vector<float> result = download(out, kN), newX = download(bx, kN);
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_EQ(result[i], 2.0f * (2.0f * x[i] + y[i]) + y[i]) << "at " << i;
    ASSERT_EQ(newX[i], 3.0f * y[i]) << "at " << i;
  }
}

// More descriptor sets than a pool holds, each dispatch reading what the
// one before wrote (acc += 2 * 0.5), over several finishes.
TEST_F(VulkanRuntime, ManyDispatchesInOneFinish) {
  attnc_vk_buffer *half = buffer(std::vector<float>(kN, 0.5f)),
                  *acc = buffer(std::vector<float>(kN, 0.0f));
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < 600; ++i)
      axpy(half, acc, acc);
    ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
    std::vector<float> result = download(acc, kN);
    for (uint32_t i = 0; i < kN; ++i)
      ASSERT_EQ(result[i], 600.0f * round) << "at " << i;
  }
}

TEST_F(VulkanRuntime, BadBufferIsAStickyError) {
  std::vector<float> x = iota(1.0f, 1.0f), y = iota(0.0f, 2.0f);
  attnc_vk_buffer *bx = buffer(x), *by = buffer(y);
  attnc_vk_buffer *out = buffer(std::vector<float>(kN, -1.0f));
  attnc_vk_buffer *small = attnc_vk_buffer_create(ctx, kBytes - 4);
  // Recorded before the error: dropped with the rest of the call.
  axpy(bx, by, out);
  axpy(bx, by, small);
  EXPECT_EQ(attnc_vk_scratch(ctx, 64), nullptr); // nothing after an error
  axpy(bx, by, out);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_BAD_BUFFER);
  EXPECT_EQ(download(out, kN), std::vector<float>(kN, -1.0f));
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK); // cleared

  // A null buffer, one of another context, a null context.
  axpy(bx, nullptr, out);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_BAD_BUFFER);
  attnc_vk_context *other = nullptr;
  ASSERT_EQ(attnc_vk_context_create(&other), ATTNC_STATUS_OK);
  attnc_vk_buffer *foreign = attnc_vk_buffer_create(other, kBytes);
  axpy(bx, by, foreign);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_BAD_BUFFER);
  EXPECT_EQ(attnc_vk_finish(other), ATTNC_STATUS_OK);
  attnc_vk_context_destroy(other);
  attnc_vk_buffer *buffers[] = {bx, by, out};
  uint64_t bytes[] = {kBytes, kBytes, kBytes};
  attnc_vk_dispatch(nullptr, axpySpirv().data(), axpySpirv().size(), "axpy", 16,
                    1, 1, 3, buffers, bytes);
  EXPECT_EQ(attnc_vk_finish(nullptr), ATTNC_STATUS_NULL_ARGUMENT);

  // Works again.
  axpy(bx, by, out);
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  std::vector<float> result = download(out, kN);
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(result[i], 2.0f * x[i] + y[i]) << "at " << i;
}

// A kernel whose loops lavapipe cut short stores a nonzero word in the
// trap: finish reports it once and clears it.
TEST_F(VulkanRuntime, TrapReportsCutLoops) {
  attnc_vk_buffer *trap = attnc_vk_trap(ctx);
  ASSERT_NE(trap, nullptr);
  EXPECT_EQ(attnc_vk_trap(ctx), trap); // one per context
  EXPECT_EQ(attnc_vk_trap(nullptr), nullptr);
  EXPECT_EQ(download(trap, 1), std::vector<float>(1, 0.0f));
  std::vector<float> x = iota(1.0f, 1.0f), y = iota(0.0f, 2.0f);
  attnc_vk_buffer *bx = buffer(x), *by = buffer(y), *out = buffer(y);
  axpy(bx, by, out);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  uint32_t cut = 1;
  ASSERT_EQ(attnc_vk_upload(trap, &cut, sizeof cut), ATTNC_STATUS_OK);
  axpy(bx, by, out);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_DEVICE_LIMIT);
  EXPECT_EQ(download(trap, 1), std::vector<float>(1, 0.0f));
  axpy(bx, by, out);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
}

TEST_F(VulkanRuntime, WorkgroupCounts) {
  // An empty grid records nothing, whatever the buffers.
  attnc_vk_dispatch(ctx, axpySpirv().data(), axpySpirv().size(), "axpy", 0, 1,
                    1, 3, nullptr, nullptr);
  attnc_vk_dispatch(ctx, axpySpirv().data(), axpySpirv().size(), "axpy", 4, 1,
                    0, 3, nullptr, nullptr);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  // More workgroups than the device allows.
  attnc_vk_buffer *b = buffer(std::vector<float>(kN, 1.0f));
  attnc_vk_buffer *buffers[] = {b, b, b};
  uint64_t bytes[] = {kBytes, kBytes, kBytes};
  attnc_vk_dispatch(ctx, axpySpirv().data(), axpySpirv().size(), "axpy",
                    UINT32_MAX, 1, 1, 3, buffers, bytes);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_BAD_SIZE);
  // Not SPIR-V: a compiler bug.
  uint32_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  attnc_vk_dispatch(ctx, junk, 8, "axpy", 1, 1, 1, 3, buffers, bytes);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_INTERNAL);
  EXPECT_STREQ(attnc_status_string(ATTNC_STATUS_BAD_BUFFER),
               "a buffer is too small or belongs to another context");
}

TEST_F(VulkanRuntime, ScratchIsReleasedAtFinish) {
  std::vector<float> x = iota(2.0f, 0.125f), y = iota(-1.0f, 0.5f);
  attnc_vk_buffer *bx = buffer(x), *by = buffer(y),
                  *out = attnc_vk_buffer_create(ctx, kBytes);
  EXPECT_EQ(attnc_vk_scratch(ctx, 0), nullptr);
  EXPECT_EQ(attnc_vk_scratch(nullptr, 16), nullptr);
  for (int call = 0; call < 3; ++call) {
    attnc_vk_buffer *t = attnc_vk_scratch(ctx, kBytes);
    ASSERT_NE(t, nullptr);
    axpy(bx, by, t);
    attnc_vk_release(ctx, t); // still used below: freed at finish
    axpy(t, by, out);
    attnc_vk_release(ctx, nullptr);
    ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
    std::vector<float> result = download(out, kN);
    for (uint32_t i = 0; i < kN; ++i)
      ASSERT_EQ(result[i], 2.0f * (2.0f * x[i] + y[i]) + y[i]) << "at " << i;
  }
  // Destroying a buffer that recorded work uses runs that work first.
  attnc_vk_buffer *t = attnc_vk_buffer_create(ctx, kBytes);
  axpy(bx, by, t);
  attnc_vk_buffer_destroy(t);
  EXPECT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
}

// IEEE half-precision bits of a float that has an exact f16 value, and back.
uint16_t toHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  if ((bits & 0x7fffffffu) == 0)
    return uint16_t(sign);
  int exponent = int((bits >> 23) & 0xff) - 127 + 15;
  return uint16_t(sign | uint32_t(exponent) << 10 | (bits >> 13 & 0x3ffu));
}
float fromHalf(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  float magnitude = exponent
                        ? std::ldexp(float(1024 + (h & 0x3ff)), exponent - 25)
                        : std::ldexp(float(h & 0x3ff), -24);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// f16 storage, arithmetic and subgroup reductions: the device features the
// runtime enables.
TEST_F(VulkanRuntime, HalfPrecision) {
  std::vector<uint16_t> x(64);
  for (int i = 0; i < 64; ++i)
    x[i] = toHalf(float(i % 16) - 6.0f);
  attnc_vk_buffer *bx = attnc_vk_buffer_create(ctx, 128),
                  *out = attnc_vk_buffer_create(ctx, 128),
                  *total = attnc_vk_buffer_create(ctx, 2);
  attnc_vk_upload(bx, x.data(), 128);
  attnc_vk_buffer *buffers[] = {bx, out, total};
  uint64_t bytes[] = {128, 128, 2};
  attnc_vk_dispatch(ctx, halfSpirv().data(), halfSpirv().size(), "half_square",
                    1, 1, 1, 3, buffers, bytes);
  ASSERT_EQ(attnc_vk_finish(ctx), ATTNC_STATUS_OK);
  std::vector<uint16_t> result(64);
  uint16_t sum = 0;
  attnc_vk_download(out, result.data(), 128);
  attnc_vk_download(total, &sum, 2);
  for (int i = 0; i < 64; ++i) {
    float v = fromHalf(x[i]);
    EXPECT_EQ(fromHalf(result[i]), v * v + 0.5f) << "at " << i;
  }
  // Subgroup 0 is invocations 0 .. size-1 (so on lavapipe).
  float expected = 0;
  for (uint32_t i = 0; i < attnc_vk_subgroup_size(ctx); ++i)
    expected += 2.0f * fromHalf(x[i]);
  EXPECT_EQ(fromHalf(sum), expected);
}

// No driver: the loader finds no ICD. Run in a child process, which sets
// its own environment before creating its first context.
TEST(VulkanRuntimeNoDevice, NoDriverMeansNoDevice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("VK_ICD_FILENAMES", "/nonexistent/attnc_icd.json", 1);
        setenv("VK_DRIVER_FILES", "/nonexistent/attnc_icd.json", 1);
        unsetenv("VK_ADD_DRIVER_FILES");
        attnc_vk_context *ctx = reinterpret_cast<attnc_vk_context *>(8);
        int status = attnc_vk_context_create(&ctx);
        std::_Exit(ctx ? 100 : status);
      },
      ::testing::ExitedWithCode(ATTNC_STATUS_NO_DEVICE), "");
}

// A device index past the last device.
TEST(VulkanRuntimeNoDevice, DeviceIndexOutOfRange) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ATTNC_VULKAN_DEVICE", "64", 1);
        attnc_vk_context *ctx = reinterpret_cast<attnc_vk_context *>(8);
        int status = attnc_vk_context_create(&ctx);
        std::_Exit(ctx ? 100 : status);
      },
      ::testing::ExitedWithCode(ATTNC_STATUS_NO_DEVICE), "");
}

} // namespace
