// attn-spirv-math: the math ops MLIR 22's convert-math-to-spirv has no
// pattern for, rewritten into ops it has (see Passes.td).
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNSPIRVMATH
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// trunc(x) = x < 0 ? ceil(x) : floor(x) (GLSL's Trunc has no pattern
/// upstream; NaN takes floor's NaN, -0.3 ceil's -0).
struct TruncPattern : OpRewritePattern<math::TruncOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::TruncOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = op.getOperand();
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getZeroAttr(x.getType()));
    Value negative = arith::CmpFOp::create(rewriter, loc,
                                           arith::CmpFPredicate::OLT, x, zero);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(
        op, negative, math::CeilOp::create(rewriter, loc, x),
        math::FloorOp::create(rewriter, loc, x));
    return success();
  }
};

struct AttnSpirvMathPass : attnc::impl::AttnSpirvMathBase<AttnSpirvMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<TruncPattern>(&getContext());
    math::populateExpansionPatterns(patterns, {"exp2"});
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return name == math::ErfOp::getOperationName() ||
             name == math::ErfcOp::getOperationName() ||
             name == math::CbrtOp::getOperationName();
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
