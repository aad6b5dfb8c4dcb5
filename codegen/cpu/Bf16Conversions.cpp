// attn-x86-bf16-conversions: f32 -> bf16 vector truncations as AVX-512
// BF16's vcvtneps2bf16 (see Passes.td). Upstream's arith-expand lowers every
// bf16 truncf to integer ops for targets without a conversion instruction,
// and x86vector has the op but no pattern that picks it.
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNX86BF16CONVERSIONS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct TruncToCvtneps2bf16 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    auto from = dyn_cast<VectorType>(op.getIn().getType());
    auto to = dyn_cast<VectorType>(op.getType());
    // (A rounding mode other than to nearest even is not vcvtneps2bf16's.)
    if (!from || !to || from.getRank() != 1 || from.isScalable() ||
        !from.getElementType().isF32() || !to.getElementType().isBF16() ||
        (from.getNumElements() != 8 && from.getNumElements() != 16) ||
        (op.getRoundingmode() &&
         *op.getRoundingmode() != arith::RoundingMode::to_nearest_even))
      return failure();
    rewriter.replaceOpWithNewOp<x86vector::CvtPackedF32ToBF16Op>(op, to,
                                                                 op.getIn());
    return success();
  }
};

struct AttnX86Bf16Conversions
    : attnc::impl::AttnX86Bf16ConversionsBase<AttnX86Bf16Conversions> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<TruncToCvtneps2bf16>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
