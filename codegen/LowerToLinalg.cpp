// attn-lower-to-linalg: attn ops -> linalg on tensors, one step per op.
#include "codegen/LinalgBuilders.h"
#include "codegen/Passes.h"
#include "dialect/AttnOps.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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
  mask.varlen = varlenOf(op);
  mask.cache = isCache(op);
  if (!op.getMaskMod().empty())
    mask.maskMod = &op.getMaskMod();
  mask.captures = captures;
  return mask;
}

/// The score options of an op with attention's: scale, score_mod, masks.
template <typename OpTy> ScoreInputs scoreInputsOf(OpTy op) {
  ScoreInputs inputs;
  inputs.query = op.getQuery();
  inputs.key = op.getKey();
  inputs.scale = op.getEffectiveScale();
  if (!op.getScoreMod().empty())
    inputs.scoreMod = &op.getScoreMod();
  inputs.scoreCaptures = op.getScoreCaptures();
  inputs.mask = maskConditionsOf(op, op.getMaskCaptures());
  return inputs;
}

/// attn.mask's own options: those of the shared conditions plus zero_fill.
MaskConditions maskConditionsOf(MaskOp op) {
  MaskConditions mask = maskConditionsOf(op, op.getCaptures());
  mask.zeroFill = op.getZeroFill();
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

struct LowerAppend : OpRewritePattern<AppendOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AppendOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildAppend(rewriter, op.getLoc(), op.getRows(),
                                       op.getCache(), op.getLengths(),
                                       op.getPages()));
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
                                     maskConditionsOf(op)));
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
    Value key = op.getKey(), value = op.getValue();
    if (Value table = op.getPages()) {
      key = buildGatheredPages(rewriter, loc, key, table);
      value = buildGatheredPages(rewriter, loc, value, table);
    }
    Value scores = buildScores(rewriter, loc, op.getQuery(), key);
    scores = buildScale(rewriter, loc, scores, op.getEffectiveScale());
    if (!op.getScoreMod().empty())
      scores = buildScoreMod(rewriter, loc, scores, op.getScoreMod(),
                             op.getScoreCaptures());
    scores = buildMask(rewriter, loc, scores,
                       maskConditionsOf(op, op.getMaskCaptures()));
    auto [probs, lse] = buildSoftmax(rewriter, loc, scores);
    Value output =
        buildApply(rewriter, loc, probs, value, op.getOutput().getType());
    rewriter.replaceOp(op, {output, lse});
    return success();
  }
};

struct LowerTransposedApply : OpRewritePattern<TransposedApplyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposedApplyOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildTransposedApply(rewriter, op.getLoc(),
                                                op.getLhs(), op.getRhs(),
                                                op.getResult().getType()));
    return success();
  }
};

struct LowerProjectionGrad : OpRewritePattern<ProjectionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ProjectionGradOp op,
                                PatternRewriter &rewriter) const override {
    auto [input, weight] = buildProjectionGrad(
        rewriter, op.getLoc(), op.getInput(), op.getWeight(), op.getGrad());
    rewriter.replaceOp(op, {input, weight});
    return success();
  }
};

struct LowerMergeGrad : OpRewritePattern<MergeGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeGradOp op,
                                PatternRewriter &rewriter) const override {
    auto [input, weight] = buildMergeGrad(rewriter, op.getLoc(), op.getInput(),
                                          op.getWeight(), op.getGrad());
    rewriter.replaceOp(op, {input, weight});
    return success();
  }
};

struct LowerSoftmaxGrad : OpRewritePattern<SoftmaxGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxGradOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildSoftmaxGrad(rewriter, op.getLoc(),
                                            op.getProbs(), op.getGrad()));
    return success();
  }
};

struct LowerScoreModGrad : OpRewritePattern<ScoreModGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoreModGradOp op,
                                PatternRewriter &rewriter) const override {
    // Hand-written gradient ops get the check attn-derive-backward makes.
    if (failed(checkDifferentiable(op.getBody())))
      return failure();
    auto [scores, captures] =
        buildScoreModGrad(rewriter, op.getLoc(), op.getScores(), op.getGrad(),
                          op.getBody(), op.getCaptures());
    SmallVector<Value> results = {scores};
    llvm::append_range(results, captures);
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct LowerAttentionGrad : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getScoreMod().empty() &&
        failed(checkDifferentiable(op.getScoreMod())))
      return failure();
    AttentionGradInputs inputs;
    static_cast<ScoreInputs &>(inputs) = scoreInputsOf(op);
    inputs.value = op.getValue();
    inputs.output = op.getOutput();
    inputs.lse = op.getLse();
    inputs.outputGrad = op.getOutputGrad();
    inputs.lseGrad = op.getLseGrad();
    AttentionGrads grads = buildAttentionGrad(rewriter, op.getLoc(), inputs);
    SmallVector<Value> results = {grads.query, grads.key, grads.value};
    llvm::append_range(results, grads.scoreCaptures);
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct LowerAttentionStats : OpRewritePattern<AttentionStatsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionStatsOp op,
                                PatternRewriter &rewriter) const override {
    AttentionStats stats = buildAttentionStats(
        rewriter, op.getLoc(), scoreInputsOf(op), op.getLse(),
        bool(op.getEntropy()), bool(op.getMeanEntropy()),
        op.getPooled() ? cast<RankedTensorType>(op.getPooled().getType())
                       : RankedTensorType(),
        bool(op.getSimilarity()));
    SmallVector<Value> results;
    for (Value v :
         {stats.entropy, stats.meanEntropy, stats.pooled, stats.similarity})
      if (v)
        results.push_back(v);
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct LowerAttentionStatsGrad : OpRewritePattern<AttentionStatsGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionStatsGradOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getScoreMod().empty() &&
        failed(checkDifferentiable(op.getScoreMod())))
      return failure();
    AttentionStatsGrads grads = buildAttentionStatsGrad(
        rewriter, op.getLoc(), scoreInputsOf(op), op.getLse(),
        op.getEntropyGrad(), op.getMeanEntropyGrad());
    SmallVector<Value> results = {grads.query, grads.key, grads.lse};
    llvm::append_range(results, grads.scoreCaptures);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// attn.distill(_grad)'s operands: each side's scores (no score_mod) under
/// the op's one mask, and both LSEs.
template <typename OpTy> DistillInputs distillInputsOf(OpTy op) {
  DistillInputs inputs;
  inputs.student.query = op.getQuery();
  inputs.student.key = op.getKey();
  inputs.student.scale = op.getEffectiveScale();
  inputs.student.mask = maskConditionsOf(op, op.getMaskCaptures());
  inputs.teacher.query = op.getTeacherQuery();
  inputs.teacher.key = op.getTeacherKey();
  inputs.teacher.scale = op.getEffectiveTeacherScale();
  inputs.teacher.mask = inputs.student.mask;
  inputs.lse = op.getLse();
  inputs.teacherLse = op.getTeacherLse();
  return inputs;
}

struct LowerDistill : OpRewritePattern<DistillOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DistillOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, buildDistill(rewriter, op.getLoc(),
                                        distillInputsOf(op), op.isMean()));
    return success();
  }
};

struct LowerDistillGrad : OpRewritePattern<DistillGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DistillGradOp op,
                                PatternRewriter &rewriter) const override {
    DistillGrads grads = buildDistillGrad(rewriter, op.getLoc(),
                                          distillInputsOf(op), op.getKlGrad());
    rewriter.replaceOp(op,
                       {grads.query, grads.key, grads.lse, grads.teacherQuery,
                        grads.teacherKey, grads.teacherLse});
    return success();
  }
};

struct LowerCombine : OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CombineOp op,
                                PatternRewriter &rewriter) const override {
    auto [output, lse] =
        buildCombine(rewriter, op.getLoc(), op.getOutputs(), op.getLses());
    rewriter.replaceOp(op, {output, lse});
    return success();
  }
};

struct LowerCombineGrad : OpRewritePattern<CombineGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CombineGradOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       buildCombineGrad(rewriter, op.getLoc(), op.getOutputs(),
                                        op.getLses(), op.getOutputGrad(),
                                        op.getLseGrad()));
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
    // Kernel inputs are read-only: bufferization must never write into
    // them, except the caches attn.append updates in place (a GPU kernel
    // that lowered an append marked its cache writable already).
    module.walk([](func::FuncOp func) {
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (isa<TensorType>(func.getArgument(i).getType()) &&
            !AppendOp::isAppendedTo(func.getArgument(i)) &&
            !func.getArgAttr(
                i, bufferization::BufferizationDialect::kWritableAttrName))
          func.setArgAttr(i, bufferization::BufferizationDialect::
                                 kWritableAttrName,
                          BoolAttr::get(func.getContext(), false));
    });

    RewritePatternSet patterns(&getContext());
    patterns.add<LowerAppend, LowerCombine, LowerCombineGrad, LowerProjection,
                 LowerMerge, LowerScores, LowerScale, LowerScoreMod, LowerMask,
                 LowerSoftmax, LowerApply, LowerAttention, LowerTransposedApply,
                 LowerProjectionGrad, LowerMergeGrad, LowerSoftmaxGrad,
                 LowerScoreModGrad, LowerAttentionGrad, LowerAttentionStats,
                 LowerAttentionStatsGrad, LowerDistill, LowerDistillGrad>(
        &getContext());
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    WalkResult left = module.walk([](Operation *op) {
      if (isa<AttnDialect>(op->getDialect()) && !isa<YieldOp>(op)) {
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
