// attn-lower-gpu: attn.attention(_grad), attn.attention_stats(_grad) and
// attn.distill(_grad) as
// target-neutral GPU flash kernels (FlashGpu.h), as their GPU plans say.
#include "codegen/Passes.h"
#include "codegen/gpu/FlashGpu.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNLOWERGPU
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnLowerGpuPass : attnc::impl::AttnLowerGpuBase<AttnLowerGpuPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Appends first: the unfused lowering's loops of row copies would run
    // on the host, over device buffers.
    SmallVector<attnc::attn::AppendOp> appends;
    getOperation().walk(
        [&](attnc::attn::AppendOp op) { appends.push_back(op); });
    for (attnc::attn::AppendOp op : appends)
      (void)attnc::lowerToFlashGpu(rewriter, op);
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<attnc::attn::AttentionOp, attnc::attn::AttentionGradOp,
              attnc::attn::AttentionStatsOp, attnc::attn::AttentionStatsGradOp,
              attnc::attn::DistillOp, attnc::attn::DistillGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      auto plan = dyn_cast_or_null<attnc::attn::GpuPlanAttr>(
          attnc::attn::getTilePlan(op));
      // attn-plan-gpu-tiles gives no plan to ops whose tiles do not fit:
      // they keep the unfused lowering.
      if (!plan)
        continue;
      LogicalResult lowered = failure();
      if (auto fwd = dyn_cast<attnc::attn::AttentionOp>(op))
        lowered = attnc::lowerToFlashGpu(rewriter, fwd, plan);
      else if (auto stats = dyn_cast<attnc::attn::AttentionStatsOp>(op))
        lowered = attnc::lowerToFlashGpu(rewriter, stats, plan);
      else if (auto statsGrad = dyn_cast<attnc::attn::AttentionStatsGradOp>(op))
        lowered = attnc::lowerToFlashGpu(rewriter, statsGrad, plan);
      else if (auto distill = dyn_cast<attnc::attn::DistillOp>(op))
        lowered = attnc::lowerToFlashGpu(rewriter, distill, plan);
      else if (auto distillGrad = dyn_cast<attnc::attn::DistillGradOp>(op))
        lowered = attnc::lowerToFlashGpu(rewriter, distillGrad, plan);
      else
        lowered = attnc::lowerToFlashGpu(
            rewriter, cast<attnc::attn::AttentionGradOp>(op), plan);
      (void)lowered; // uncovered ops keep the unfused lowering
    }
    unrollInnerLoops();
  }

  /// Unrolls the kernels' innermost loops of constant trip count (dot
  /// products over D, sums over a key block) by up to 16: fewer branches on
  /// GPUs, and on lavapipe kernels stay under llvmpipe's cap on loop
  /// iterations per invocation (65535 back edges: past it, it leaves loops
  /// early and the results are wrong, with no error).
  void unrollInnerLoops() {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](gpu::LaunchOp launch) {
      launch.walk([&](scf::ForOp loop) {
        bool innermost =
            loop.getBody()
                ->walk([](scf::ForOp) { return WalkResult::interrupt(); })
                .wasInterrupted() == false;
        if (innermost && loop.getStaticTripCount())
          loops.push_back(loop);
      });
    });
    for (scf::ForOp loop : loops) {
      uint64_t trips = loop.getStaticTripCount()->getZExtValue();
      if (trips <= 16)
        (void)loopUnrollFull(loop);
      else
        (void)loopUnrollByFactor(loop, 16);
    }
  }
};

} // namespace
