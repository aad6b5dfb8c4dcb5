// attn-lower-to-linalg: attn ops -> linalg on tensors, one step per op.
#include "codegen/LinalgBuilders.h"
#include "codegen/Passes.h"
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNLOWERTOLINALG
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;
using namespace attnc::attn;

namespace {

/// The mask conditions of an attn.mask or attn.attention op.
template <typename OpTy>
MaskConditions maskConditionsOf(OpTy op, ValueRange captures) {
  MaskConditions mask;
  mask.causal = op.getCausal();
  mask.window = op.getWindow();
  mask.lengths = op.getLengths();
  if (!op.getMaskMod().empty())
    mask.maskMod = &op.getMaskMod();
  mask.captures = captures;
  return mask;
}

struct LowerProjection : OpRewritePattern<ProjectionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ProjectionOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildProjection(rewriter, op.getLoc(),
                                           op.getInput(), op.getWeight(),
                                           op.getResult().getType()));
    return success();
  }
};

struct LowerMerge : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildMerge(rewriter, op.getLoc(), op.getInput(),
                                      op.getWeight(),
                                      op.getResult().getType()));
    return success();
  }
};

struct LowerScores : OpRewritePattern<ScoresOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoresOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildScores(rewriter, op.getLoc(), op.getQuery(),
                                       op.getKey()));
    return success();
  }
};

struct LowerScale : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScaleOp op,
                                PatternRewriter &rewriter) const override {
    // The pass resolves default factors before any scores op is rewritten.
    FloatAttr factor = op.getFactorAttr();
    if (!factor)
      return rewriter.notifyMatchFailure(op, "factor not resolved");
    rewriter.replaceOp(op, buildScale(rewriter, op.getLoc(), op.getScores(),
                                      factor.getValueAsDouble()));
    return success();
  }
};

struct LowerScoreMod : OpRewritePattern<ScoreModOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoreModOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildScoreMod(rewriter, op.getLoc(), op.getScores(),
                                         op.getBody(), op.getCaptures()));
    return success();
  }
};

struct LowerMask : OpRewritePattern<MaskOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MaskOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildMask(rewriter, op.getLoc(), op.getScores(),
                                     maskConditionsOf(op, op.getCaptures())));
    return success();
  }
};

struct LowerSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, buildSoftmax(rewriter, op.getLoc(), op.getScores()).first);
    return success();
  }
};

struct LowerApply : OpRewritePattern<ApplyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ApplyOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildApply(rewriter, op.getLoc(), op.getProbs(),
                                      op.getValue(),
                                      op.getResult().getType()));
    return success();
  }
};

/// The fused op, unfused: the same steps as the graph ops, plus LSE.
struct LowerAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value scores = buildScores(rewriter, loc, op.getQuery(), op.getKey());
    scores = buildScale(rewriter, loc, scores, op.getEffectiveScale());
    if (!op.getScoreMod().empty())
      scores = buildScoreMod(rewriter, loc, scores, op.getScoreMod(),
                             op.getScoreCaptures());
    scores = buildMask(rewriter, loc, scores,
                       maskConditionsOf(op, op.getMaskCaptures()));
    auto [probs, lse] = buildSoftmax(rewriter, loc, scores);
    Value output = buildApply(rewriter, loc, probs, op.getValue(),
                              op.getOutput().getType());
    rewriter.replaceOp(op, {output, lse});
    return success();
  }
};

struct AttnLowerToLinalgPass
    : attnc::impl::AttnLowerToLinalgBase<AttnLowerToLinalgPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Resolve 1/sqrt(D) while every scale op still sees its attn.scores.
    module.walk([](ScaleOp op) {
      op.setFactorAttr(Builder(op).getF64FloatAttr(op.getEffectiveFactor()));
    });
    // Kernel inputs are read-only: bufferization must never write into them.
    module.walk([](func::FuncOp func) {
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (isa<TensorType>(func.getArgument(i).getType()))
          func.setArgAttr(i, bufferization::BufferizationDialect::
                                 kWritableAttrName,
                          BoolAttr::get(func.getContext(), false));
    });

    RewritePatternSet patterns(&getContext());
    patterns.add<LowerProjection, LowerMerge, LowerScores, LowerScale,
                 LowerScoreMod, LowerMask, LowerSoftmax, LowerApply,
                 LowerAttention>(&getContext());
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    WalkResult left = module.walk([](Operation *op) {
      if (isa<AttnDialect>(op->getDialect())) {
        op->emitOpError("could not be lowered to linalg");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
