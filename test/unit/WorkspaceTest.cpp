// The runtime's scratch memory (runtime/Workspace.c): freed blocks of 1 MiB
// or more are handed to later requests they fit, within a byte limit, and
// kernels allocate through it.
#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "test/unit/TestUtil.h"

#include "gtest/gtest.h"

#include <atomic>
#include <csetjmp>
#include <cstring>
#include <vector>

using namespace attnc;

namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(WorkspaceTest, LargeBlocksAreReusedSmallOnesAreNot) {
  attnc_workspace_release();
  void *small = _mlir_memref_to_llvm_alloc(4096);
  ASSERT_NE(small, nullptr);
  std::memset(small, 1, 4096);
  _mlir_memref_to_llvm_free(small);
  EXPECT_EQ(attnc_workspace_release(), 0);

  void *big = _mlir_memref_to_llvm_alloc(2 * kMiB);
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, 2 * kMiB);
  _mlir_memref_to_llvm_free(big);
  // Fits (at most twice the request): the same block.
  void *again = _mlir_memref_to_llvm_alloc(1 * kMiB + 1);
  EXPECT_EQ(again, big);
  // Taken: a second request gets a block of its own.
  void *other = _mlir_memref_to_llvm_alloc(1 * kMiB + 1);
  EXPECT_NE(other, big);
  _mlir_memref_to_llvm_free(other);
  _mlir_memref_to_llvm_free(again);
  // The smallest block that fits; none fits a larger request.
  void *tiny = _mlir_memref_to_llvm_alloc(kMiB);
  EXPECT_EQ(tiny, other);
  void *huge = _mlir_memref_to_llvm_alloc(3 * kMiB);
  EXPECT_NE(huge, big);
  _mlir_memref_to_llvm_free(tiny);
  _mlir_memref_to_llvm_free(huge);
  EXPECT_EQ(attnc_workspace_release(),
            int64_t((1 * kMiB + 1) + 2 * kMiB + 3 * kMiB));
  EXPECT_EQ(attnc_workspace_release(), 0);
}

TEST(WorkspaceTest, NoBlockServesLessThanHalfItsSize) {
  attnc_workspace_release();
  void *four = _mlir_memref_to_llvm_alloc(4 * kMiB);
  _mlir_memref_to_llvm_free(four);
  void *less = _mlir_memref_to_llvm_alloc(2 * kMiB - 1);
  EXPECT_NE(less, four);
  void *half = _mlir_memref_to_llvm_alloc(2 * kMiB);
  EXPECT_EQ(half, four);
  _mlir_memref_to_llvm_free(less);
  _mlir_memref_to_llvm_free(half);
  EXPECT_EQ(attnc_workspace_release(), int64_t(4 * kMiB + 2 * kMiB - 1));
}

TEST(WorkspaceTest, TheOldestBlocksMakeRoomWithinTheLimit) {
  // 256 MB by default: of three 100 MB blocks the oldest is freed.
  attnc_workspace_release();
  std::vector<void *> blocks;
  for (int i = 0; i < 3; ++i)
    blocks.push_back(_mlir_memref_to_llvm_alloc(100 * kMiB));
  for (void *block : blocks)
    _mlir_memref_to_llvm_free(block);
  EXPECT_EQ(attnc_workspace_release(), int64_t(200 * kMiB));
  // A block above the limit is never kept.
  _mlir_memref_to_llvm_free(_mlir_memref_to_llvm_alloc(300 * kMiB));
  EXPECT_EQ(attnc_workspace_release(), 0);
}

TEST(WorkspaceTest, KernelsAllocateTheirScratchThroughIt) {
  // S=512, D=64, 8 heads: the forward packs K (1 MiB) and the backward
  // transposes Q and dO; after the calls their blocks stay cached.
  const std::string t = "tensor<1x8x512x64xf32>";
  const std::string spec =
      "func.func @k(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> " + t +
      " {\n  %o, %l = attn.attention %q, %k, %v : " + t + ", " + t + ", " + t +
      " -> " + t + ", tensor<1x8x512xf32>\n  return %o : " + t + "\n}\n";
  std::string error;
  jit::Options options = test::testOptions();
  auto module = jit::Module::compile(spec, options, &error);
  ASSERT_TRUE(module) << error;
  std::vector<float> q(8 * 512 * 64, 0.25f), o(q.size());
  attnc_workspace_release();
  ASSERT_TRUE(
      module->callUnchecked("k", {q.data(), q.data(), q.data(), o.data()})
          .ok());
  EXPECT_GE(attnc_workspace_release(), int64_t(kMiB));
  for (float x : o)
    ASSERT_FLOAT_EQ(x, 0.25f);
}

/// What a failed call's parallel tasks had allocated is freed as its entry
/// point leaves (runtime/Arena.h): tasks on the caller and on the pool's
/// workers each keep a 2 MiB block, then one task's allocation fails. The
/// kept blocks end in the cache, where attnc_workspace_release finds them;
/// leaked, it would find none.
struct FailingTasks {
  std::atomic<int64_t> kept{0};
};

void keepOrFail(void *ctx, int64_t begin, int64_t end) {
  auto *tasks = static_cast<FailingTasks *>(ctx);
  for (int64_t t = begin; t < end; ++t) {
    if (t == 5)
      _mlir_memref_to_llvm_alloc(uint64_t(1) << 62); // fails: no return
    if (_mlir_memref_to_llvm_alloc(2 * kMiB))
      ++tasks->kept;
  }
}

TEST(WorkspaceTest, AFailedCallFreesWhatItsTasksAllocated) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer's malloc aborts on the failing request "
                  "(as out-of-memory.test, unsupported under ASan)";
#endif
#endif
  attnc_set_num_threads(2);
  for (int round = 0; round < 4; ++round) {
    attnc_workspace_release();
    FailingTasks tasks;
    alignas(16) char frame[ATTNC_KERNEL_FRAME_BYTES];
    attnc_kernel_enter(frame);
    bool failed = setjmp(*reinterpret_cast<std::jmp_buf *>(frame)) != 0;
    if (!failed)
      attnc_parallel_for(16, keepOrFail, &tasks);
    attnc_kernel_leave(frame);
    EXPECT_TRUE(failed);
    EXPECT_GT(tasks.kept.load(), 0);
    EXPECT_EQ(attnc_workspace_release(), tasks.kept.load() * int64_t(2 * kMiB))
        << "round " << round;
  }
  attnc_set_num_threads(0);
}

} // namespace
