// attn-fuse: scores/scale/score_mod/mask/softmax/apply chains ->
// attn.attention, so that the flash kernels (and the derived FlashAttention-2
// backward) cover specs written in graph form.
#include "passes/Fuse.h"
#include "dialect/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNFUSE
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;
using namespace attnc::attn;

namespace {

/// The producer of `value` as OpTy when `value` has no other use.
template <typename OpTy> OpTy soleProducer(Value value) {
  return value.hasOneUse() ? value.getDefiningOp<OpTy>() : OpTy();
}

struct FuseAttentionChain : OpRewritePattern<ApplyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ApplyOp apply,
                                PatternRewriter &rewriter) const override {
    return fuseAttentionChain(rewriter, apply);
  }
};

struct AttnFuse : attnc::impl::AttnFuseBase<AttnFuse> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateAttnFusePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

FailureOr<AttentionOp> attnc::fuseAttentionChain(RewriterBase &rewriter,
                                                 ApplyOp apply) {
  // Walk the chain back from apply; every link must have one use.
  auto softmax = soleProducer<SoftmaxOp>(apply.getProbs());
  if (!softmax)
    return failure();
  Value current = softmax.getScores();
  SmallVector<MaskOp> masks;
  while (auto mask = soleProducer<MaskOp>(current)) {
    if (mask.getZeroFill())
      return failure();
    masks.push_back(mask);
    current = mask.getScores();
  }
  auto scoreMod = soleProducer<ScoreModOp>(current);
  if (scoreMod)
    current = scoreMod.getScores();
  SmallVector<ScaleOp> scales;
  double scale = 1.0;
  while (auto scaleOp = soleProducer<ScaleOp>(current)) {
    scale *= scaleOp.getEffectiveFactor();
    scales.push_back(scaleOp);
    current = scaleOp.getScores();
  }
  auto scores = soleProducer<ScoresOp>(current);
  if (!scores)
    return failure();
  Value q = scores.getQuery(), k = scores.getKey(), v = apply.getValue();
  if (elementTypeOf(q) != elementTypeOf(k) ||
      elementTypeOf(q) != elementTypeOf(v))
    return failure();

  // The masks' conjunction: causal if any is, the narrowest window, one
  // lengths tensor, one varlen tensor, one mask_mod region; the causal and
  // window masks all from the start of the keys or all from the end (`cache`).
  bool causal = false;
  std::optional<int64_t> window;
  std::optional<bool> cache;
  Value lengths, varlen;
  MaskOp maskMod;
  for (MaskOp mask : masks) {
    if (mask.getCausal() || mask.getWindow()) {
      if (cache && *cache != mask.getCache())
        return failure();
      cache = mask.getCache();
    }
    causal |= mask.getCausal();
    if (std::optional<int64_t> w = mask.getWindow())
      window = window ? std::min(*window, *w) : *w;
    if (Value len = mask.getLengths()) {
      if (lengths && lengths != len)
        return failure();
      lengths = len;
    }
    if (Value cu = mask.getVarlen()) {
      if (varlen && varlen != cu)
        return failure();
      varlen = cu;
    }
    if (!mask.getMaskMod().empty()) {
      if (maskMod)
        return failure();
      maskMod = mask;
    }
  }

  // Packed sequences cut rows and keys alike, a cache's rows sit at the end
  // of its keys: the fused op takes one or the other.
  if (varlen && cache.value_or(false))
    return failure();

  SmallVector<Location> locs = {scores.getLoc()};
  for (ScaleOp op : scales)
    locs.push_back(op.getLoc());
  if (scoreMod)
    locs.push_back(scoreMod.getLoc());
  for (MaskOp op : masks)
    locs.push_back(op.getLoc());
  locs.append({softmax.getLoc(), apply.getLoc()});

  auto qShape = shapeOf(q);
  auto lseType = RankedTensorType::get({qShape[0], qShape[1], qShape[2]},
                                       rewriter.getF32Type());
  rewriter.setInsertionPoint(apply);
  auto attention = AttentionOp::create(
      rewriter, rewriter.getFusedLoc(locs),
      TypeRange{apply.getResult().getType(), lseType}, q, k, v,
      rewriter.getF64FloatAttr(scale),
      causal ? rewriter.getUnitAttr() : UnitAttr(),
      window ? rewriter.getI64IntegerAttr(*window) : IntegerAttr(),
      cache.value_or(false) ? rewriter.getUnitAttr() : UnitAttr(), lengths,
      varlen, /*pages=*/Value(),
      scoreMod ? ValueRange(scoreMod.getCaptures()) : ValueRange(),
      maskMod ? ValueRange(maskMod.getCaptures()) : ValueRange());
  if (scoreMod)
    rewriter.inlineRegionBefore(scoreMod.getBody(), attention.getScoreMod(),
                                attention.getScoreMod().end());
  if (maskMod)
    rewriter.inlineRegionBefore(maskMod.getMaskMod(), attention.getMaskMod(),
                                attention.getMaskMod().end());

  // Erase the chain from its end: each op's only user goes first.
  rewriter.replaceOp(apply, attention.getOutput());
  rewriter.eraseOp(softmax);
  for (MaskOp op : masks)
    rewriter.eraseOp(op);
  if (scoreMod)
    rewriter.eraseOp(scoreMod);
  for (ScaleOp op : scales)
    rewriter.eraseOp(op);
  rewriter.eraseOp(scores);
  return attention;
}

void attnc::populateAttnFusePatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttentionChain>(patterns.getContext());
}
