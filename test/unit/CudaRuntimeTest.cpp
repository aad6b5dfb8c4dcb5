// The CUDA runtime (runtime/Cuda.c). Without a driver: creation fails with
// NO_DEVICE, whatever library ATTNC_CUDA_LIBRARY names (none, the toolkit's
// stub, not a driver), and every entry point takes a null context. With a
// device (cc 8.0 or newer for the kernels): memory round trips and kernels
// of a hand-written PTX image, launched the way generated code launches
// them; skipped without one, unless ATTNC_REQUIRE_CUDA=1.
#include "attnc/cuda.h"
#include "attnc/runtime.h"

#include "gtest/gtest.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

// Sets (or, for null, unsets) an environment variable for a scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    const char *old = std::getenv(name);
    had = old != nullptr;
    if (had)
      saved = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  bool had = false;
  std::string saved;
};

bool exists(const char *path) {
  struct stat info;
  return stat(path, &info) == 0;
}

// The toolkit's stub libcuda (its cuInit fails with CUDA_ERROR_STUB_LIBRARY).
constexpr const char *kStubLibrary = "/usr/local/cuda/lib64/stubs/libcuda.so";

TEST(CudaRuntimeNoDriver, MissingLibraryIsNoDevice) {
  ScopedEnv env("ATTNC_CUDA_LIBRARY", "/nonexistent/attnc/libcuda.so.1");
  attnc_cuda_context *ctx = reinterpret_cast<attnc_cuda_context *>(&ctx);
  EXPECT_EQ(attnc_cuda_context_create(0, &ctx), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr);
  std::string why = attnc_cuda_load_error();
  EXPECT_NE(why.find("/nonexistent/attnc/libcuda.so.1"), std::string::npos)
      << why;
  // The same again; and a null output pointer.
  EXPECT_EQ(attnc_cuda_context_create(3, &ctx), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(attnc_cuda_context_create(0, nullptr), ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_STRNE(attnc_cuda_load_error(), "");
}

TEST(CudaRuntimeNoDriver, StubLibraryIsNoDevice) {
  if (!exists(kStubLibrary))
    GTEST_SKIP() << "no " << kStubLibrary;
  ScopedEnv env("ATTNC_CUDA_LIBRARY", kStubLibrary);
  attnc_cuda_context *ctx = reinterpret_cast<attnc_cuda_context *>(&ctx);
  EXPECT_EQ(attnc_cuda_context_create(0, &ctx), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr);
  std::string why = attnc_cuda_load_error();
  EXPECT_EQ(why.rfind("cuInit: ", 0), 0u) << why;
}

TEST(CudaRuntimeNoDriver, LibraryWithoutTheDriverApiIsNoDevice) {
  ScopedEnv env("ATTNC_CUDA_LIBRARY", "libc.so.6");
  attnc_cuda_context *ctx = reinterpret_cast<attnc_cuda_context *>(&ctx);
  EXPECT_EQ(attnc_cuda_context_create(0, &ctx), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_STREQ(attnc_cuda_load_error(), "libc.so.6 has no cuInit");
}

TEST(CudaRuntimeNoDriver, NullContext) {
  attnc_cuda_context_destroy(nullptr);
  EXPECT_STREQ(attnc_cuda_device_name(nullptr), "");
  EXPECT_EQ(attnc_cuda_compute_capability(nullptr), 0);
  EXPECT_STREQ(attnc_cuda_last_error(nullptr), "");
  EXPECT_EQ(attnc_cuda_alloc(nullptr, 16), nullptr);
  attnc_cuda_free(nullptr, nullptr);
  int word = 0;
  EXPECT_EQ(attnc_cuda_upload(nullptr, &word, &word, sizeof word),
            ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_EQ(attnc_cuda_download(nullptr, &word, &word, sizeof word),
            ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_EQ(attnc_cuda_synchronize(nullptr, nullptr),
            ATTNC_STATUS_NULL_ARGUMENT);
  void *args[] = {&word};
  attnc_cuda_launch(nullptr, nullptr, "", "kernel", 1, 1, 1, 1, 1, 1, 0, 1,
                    args);
  EXPECT_EQ(attnc_cuda_scratch(nullptr, nullptr, 16), nullptr);
  attnc_cuda_release(nullptr, nullptr, &word);
  EXPECT_EQ(attnc_cuda_finish(nullptr), ATTNC_STATUS_NULL_ARGUMENT);
}

// ---- With a device ----

// add_one(data): data[i] += 1 for i < grid * block (x only).
// sub(out, a, b): out[i] = a[i] - b[i], likewise.
const char kPtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry add_one(.param .u64 data)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<5>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [data];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
  ret;
}

.visible .entry sub(.param .u64 out, .param .u64 a, .param .u64 b)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<11>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [a];
  ld.param.u64 %rd3, [b];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd4, %r4, 4;
  cvta.to.global.u64 %rd5, %rd2;
  add.s64 %rd6, %rd5, %rd4;
  cvta.to.global.u64 %rd7, %rd3;
  add.s64 %rd8, %rd7, %rd4;
  cvta.to.global.u64 %rd9, %rd1;
  add.s64 %rd10, %rd9, %rd4;
  ld.global.f32 %f1, [%rd6];
  ld.global.f32 %f2, [%rd8];
  sub.f32 %f3, %f1, %f2;
  st.global.f32 [%rd10], %f3;
  ret;
}
)";

// PTX that does not assemble.
const char kBadPtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry broken(.param .u64 data)
{
  frobnicate.f32 %f1;
  ret;
}
)";

bool cudaRequired() {
  const char *env = std::getenv("ATTNC_REQUIRE_CUDA");
  return env && std::strcmp(env, "1") == 0;
}

constexpr uint32_t kBlock = 128, kGrid = 8, kN = kBlock * kGrid;
constexpr uint64_t kBytes = kN * sizeof(float);

class CudaRuntime : public ::testing::Test {
protected:
  void SetUp() override {
    int status = attnc_cuda_context_create(0, &ctx);
    if (status == ATTNC_STATUS_NO_DEVICE && !cudaRequired())
      GTEST_SKIP() << "no CUDA device (ATTNC_REQUIRE_CUDA=1 fails here): "
                   << attnc_cuda_load_error();
    ASSERT_EQ(status, ATTNC_STATUS_OK)
        << attnc_status_string(status) << ": " << attnc_cuda_load_error();
    ASSERT_NE(ctx, nullptr);
    EXPECT_STREQ(attnc_cuda_load_error(), "");
  }
  void TearDown() override {
    for (void *p : allocations)
      attnc_cuda_free(ctx, p);
    attnc_cuda_context_destroy(ctx);
  }

  // Device memory holding `values`, freed after the test.
  void *upload(const std::vector<float> &values) {
    uint64_t bytes = values.size() * sizeof(float);
    void *p = attnc_cuda_alloc(ctx, bytes);
    EXPECT_NE(p, nullptr) << attnc_cuda_last_error(ctx);
    allocations.push_back(p);
    EXPECT_EQ(attnc_cuda_upload(ctx, p, values.data(), bytes), ATTNC_STATUS_OK);
    return p;
  }
  std::vector<float> download(const void *p, size_t n = kN) {
    std::vector<float> values(n);
    EXPECT_EQ(attnc_cuda_synchronize(ctx, nullptr), ATTNC_STATUS_OK)
        << attnc_cuda_last_error(ctx);
    EXPECT_EQ(attnc_cuda_download(ctx, values.data(), p, n * sizeof(float)),
              ATTNC_STATUS_OK);
    return values;
  }
  // The kernels are PTX for sm_80.
  bool canRunKernels() { return attnc_cuda_compute_capability(ctx) >= 80; }
  void addOne(void *data, uint32_t shared = 0) {
    void *args[] = {data};
    attnc_cuda_launch(ctx, nullptr, kPtx, "add_one", kGrid, 1, 1, kBlock, 1, 1,
                      shared, 1, args);
  }

  attnc_cuda_context *ctx = nullptr;
  std::vector<void *> allocations;
};

std::vector<float> iota(float start, float step, size_t n = kN) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i)
    values[i] = start + step * float(i);
  return values;
}

TEST_F(CudaRuntime, DescribesItsDevice) {
  EXPECT_STRNE(attnc_cuda_device_name(ctx), "");
  EXPECT_GE(attnc_cuda_compute_capability(ctx), 30);
  EXPECT_STREQ(attnc_cuda_last_error(ctx), "");
  std::printf("device: %s, compute capability %d\n",
              attnc_cuda_device_name(ctx), attnc_cuda_compute_capability(ctx));
  // A second context on the same device is independent of the first.
  attnc_cuda_context *other = nullptr;
  ASSERT_EQ(attnc_cuda_context_create(0, &other), ATTNC_STATUS_OK);
  EXPECT_STREQ(attnc_cuda_device_name(other), attnc_cuda_device_name(ctx));
  attnc_cuda_context_destroy(other);
  // No such device.
  EXPECT_EQ(attnc_cuda_context_create(-1, &other), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(attnc_cuda_context_create(1 << 20, &other), ATTNC_STATUS_NO_DEVICE);
  EXPECT_EQ(other, nullptr);
  EXPECT_STRNE(attnc_cuda_load_error(), "");
}

TEST_F(CudaRuntime, UploadDownloadRoundTrip) {
  EXPECT_EQ(attnc_cuda_alloc(ctx, 0), nullptr);
  void *p = attnc_cuda_alloc(ctx, 4096);
  ASSERT_NE(p, nullptr);
  std::vector<uint8_t> in(4096), out(4096, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = uint8_t(i * 7 + 3);
  ASSERT_EQ(attnc_cuda_upload(ctx, p, in.data(), in.size()), ATTNC_STATUS_OK);
  ASSERT_EQ(attnc_cuda_download(ctx, out.data(), p, out.size()),
            ATTNC_STATUS_OK);
  EXPECT_EQ(in, out);
  // Nothing to copy; null pointers.
  EXPECT_EQ(attnc_cuda_upload(ctx, p, nullptr, 0), ATTNC_STATUS_OK);
  EXPECT_EQ(attnc_cuda_upload(ctx, nullptr, in.data(), 1),
            ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_EQ(attnc_cuda_download(ctx, nullptr, p, 1),
            ATTNC_STATUS_NULL_ARGUMENT);
  EXPECT_EQ(attnc_cuda_synchronize(ctx, nullptr), ATTNC_STATUS_OK);
  attnc_cuda_free(ctx, p);
  attnc_cuda_free(ctx, nullptr);
  // Far more than any device has.
  EXPECT_EQ(attnc_cuda_alloc(ctx, uint64_t(1) << 50), nullptr);
  EXPECT_STRNE(attnc_cuda_last_error(ctx), "");
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK); // not sticky
}

TEST_F(CudaRuntime, LaunchesPtxKernels) {
  if (!canRunKernels())
    GTEST_SKIP() << "the test kernels need compute capability 8.0";
  void *data = upload(iota(0, 1));
  addOne(data);
  addOne(data); // the cached function
  void *a = upload(iota(10, 3)), *b = upload(iota(1, 1));
  void *out = upload(std::vector<float>(kN, 0));
  void *args[] = {out, a, b};
  attnc_cuda_launch(ctx, nullptr, kPtx, "sub", kGrid, 1, 1, kBlock, 1, 1, 0, 3,
                    args);
  // An empty grid launches nothing, whatever its arguments.
  attnc_cuda_launch(ctx, nullptr, kPtx, "no_such_kernel", 0, 1, 1, kBlock, 1, 1,
                    0, 3, nullptr);
  ASSERT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK)
      << attnc_cuda_last_error(ctx);
  EXPECT_EQ(download(data), iota(2, 1));
  EXPECT_EQ(download(out), iota(9, 2));
  EXPECT_STREQ(attnc_cuda_last_error(ctx), "");
}

TEST_F(CudaRuntime, LargeDynamicSharedMemory) {
  // Above 48 KiB a kernel must opt in; sm_80 has up to 163 KiB.
  if (!canRunKernels())
    GTEST_SKIP() << "the test kernels need compute capability 8.0";
  void *data = upload(iota(0, 1));
  addOne(data, 64 * 1024);
  addOne(data, 96 * 1024);
  addOne(data, 64 * 1024);
  ASSERT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK)
      << attnc_cuda_last_error(ctx);
  EXPECT_EQ(download(data), iota(3, 1));
  // More than any device has.
  addOne(data, 1u << 30);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_DEVICE_ERROR);
  EXPECT_STRNE(attnc_cuda_last_error(ctx), "");
}

TEST_F(CudaRuntime, ScratchAndRelease) {
  if (!canRunKernels())
    GTEST_SKIP() << "the test kernels need compute capability 8.0";
  EXPECT_EQ(attnc_cuda_scratch(ctx, nullptr, 0), nullptr);
  void *scratch = attnc_cuda_scratch(ctx, nullptr, kBytes);
  ASSERT_NE(scratch, nullptr) << attnc_cuda_last_error(ctx);
  void *data = upload(iota(5, -1));
  // scratch = data - data = 0, then scratch += 1, then data = data - scratch.
  void *zero[] = {scratch, data, data};
  attnc_cuda_launch(ctx, nullptr, kPtx, "sub", kGrid, 1, 1, kBlock, 1, 1, 0, 3,
                    zero);
  addOne(scratch);
  void *back[] = {data, data, scratch};
  attnc_cuda_launch(ctx, nullptr, kPtx, "sub", kGrid, 1, 1, kBlock, 1, 1, 0, 3,
                    back);
  attnc_cuda_release(ctx, nullptr, scratch);
  attnc_cuda_release(ctx, nullptr, nullptr);
  ASSERT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK)
      << attnc_cuda_last_error(ctx);
  EXPECT_EQ(download(data), iota(4, -1));
  // Out of memory is kept as the context's error.
  EXPECT_EQ(attnc_cuda_scratch(ctx, nullptr, uint64_t(1) << 50), nullptr);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK);
}

TEST_F(CudaRuntime, MissingKernelIsSticky) {
  if (!canRunKernels())
    GTEST_SKIP() << "the test kernels need compute capability 8.0";
  void *data = upload(iota(0, 1));
  void *scratch = attnc_cuda_scratch(ctx, nullptr, kBytes);
  ASSERT_NE(scratch, nullptr);
  void *args[] = {data};
  attnc_cuda_launch(ctx, nullptr, kPtx, "no_such_kernel", kGrid, 1, 1, kBlock,
                    1, 1, 0, 1, args);
  std::string message = attnc_cuda_last_error(ctx);
  EXPECT_NE(message.find("cuModuleGetFunction(no_such_kernel)"),
            std::string::npos)
      << message;
  // Later launches and scratch do nothing; a release still frees.
  addOne(data);
  EXPECT_EQ(attnc_cuda_scratch(ctx, nullptr, kBytes), nullptr);
  attnc_cuda_release(ctx, nullptr, scratch);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_DEVICE_ERROR);
  EXPECT_EQ(attnc_cuda_last_error(ctx), message);
  EXPECT_EQ(download(data), iota(0, 1));
  // Cleared by finish.
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK);
  addOne(data);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK);
  EXPECT_EQ(download(data), iota(1, 1));
  // A null image or kernel name is a compiler bug.
  attnc_cuda_launch(ctx, nullptr, nullptr, "add_one", 1, 1, 1, 1, 1, 1, 0, 1,
                    args);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_INTERNAL);
}

TEST_F(CudaRuntime, BadPtxKeepsTheJitLog) {
  void *args[] = {nullptr};
  attnc_cuda_launch(ctx, nullptr, kBadPtx, "broken", 1, 1, 1, 1, 1, 1, 0, 1,
                    args);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_DEVICE_ERROR);
  std::string message = attnc_cuda_last_error(ctx);
  EXPECT_EQ(message.rfind("cuModuleLoadDataEx: ", 0), 0u) << message;
  std::printf("%s\n", message.c_str());
}

TEST_F(CudaRuntime, LeavesTheCurrentContextAlone) {
  if (!canRunKernels())
    GTEST_SKIP() << "the test kernels need compute capability 8.0";
  // The calling thread's current context, from the driver itself.
  const char *path = std::getenv("ATTNC_CUDA_LIBRARY");
  void *library =
      dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr);
  using GetCurrent = int (*)(void **);
  auto getCurrent =
      reinterpret_cast<GetCurrent>(dlsym(library, "cuCtxGetCurrent"));
  ASSERT_NE(getCurrent, nullptr);
  void *before = reinterpret_cast<void *>(&before), *after = nullptr;
  ASSERT_EQ(getCurrent(&before), 0);
  void *data = upload(iota(0, 1));
  addOne(data);
  EXPECT_EQ(attnc_cuda_finish(ctx), ATTNC_STATUS_OK);
  EXPECT_EQ(download(data), iota(1, 1));
  ASSERT_EQ(getCurrent(&after), 0);
  EXPECT_EQ(before, after);
  dlclose(library);
}

} // namespace
