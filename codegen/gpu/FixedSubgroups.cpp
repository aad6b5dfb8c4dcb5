// attn-gpu-fixed-subgroups: the portable kernels' subgroup queries and
// reductions for a target whose subgroups have one known size (an NVIDIA
// warp: 32 lanes), which convert-gpu-to-nvvm needs: it lowers neither
// gpu.subgroup_size nor gpu.subgroup_id, and gpu.subgroup_reduce only for
// i32. The reductions become upstream's butterfly shuffles.
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUFIXEDSUBGROUPS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct SubgroupSizePattern : OpRewritePattern<gpu::SubgroupSizeOp> {
  SubgroupSizePattern(MLIRContext *context, int64_t size)
      : OpRewritePattern(context), size(size) {}
  LogicalResult matchAndRewrite(gpu::SubgroupSizeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<arith::ConstantIndexOp>(op, size);
    return success();
  }
  int64_t size;
};

/// The invocations divided by the size, rounded up.
struct NumSubgroupsPattern : OpRewritePattern<gpu::NumSubgroupsOp> {
  NumSubgroupsPattern(MLIRContext *context, int64_t size)
      : OpRewritePattern(context), size(size) {}
  LogicalResult matchAndRewrite(gpu::NumSubgroupsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dim = [&](gpu::Dimension d) {
      return gpu::BlockDimOp::create(rewriter, loc, d).getResult();
    };
    Value invocations = arith::MulIOp::create(
        rewriter, loc,
        arith::MulIOp::create(rewriter, loc, dim(gpu::Dimension::x),
                              dim(gpu::Dimension::y)),
        dim(gpu::Dimension::z));
    rewriter.replaceOpWithNewOp<arith::CeilDivUIOp>(
        op, invocations, arith::ConstantIndexOp::create(rewriter, loc, size));
    return success();
  }
  int64_t size;
};

struct AttnGpuFixedSubgroupsPass
    : attnc::impl::AttnGpuFixedSubgroupsBase<AttnGpuFixedSubgroupsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (size < 1 || !llvm::isPowerOf2_64(size)) {
      emitError(getOperation()->getLoc())
          << "attn-gpu-fixed-subgroups: size must be a power of two";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<SubgroupSizePattern, NumSubgroupsPattern>(&getContext(),
                                                           size);
    // The linear invocation index over gpu.subgroup_size (the constant).
    populateGpuSubgroupIdPatterns(patterns);
    populateGpuLowerSubgroupReduceToShufflePatterns(patterns, size,
                                                    /*shuffleBitwidth=*/32);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
