// attn-spirv-sign-extend: sign extensions in kernels without OpSConvert
// (see Passes.td).
//
// Written by hand: it works around a driver (Mesa 22.3's lavapipe), which
// no upstream pass knows of.
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/APInt.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNSPIRVSIGNEXTEND
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// The index width of the kernels' SPIR-V (convert-gpu-to-spirv's default).
constexpr unsigned kSpirvIndexBits = 32;

/// sext(x) of an N-bit x to `type` as (zext(x) ^ 2^(N-1)) - 2^(N-1).
Value signExtend(PatternRewriter &rewriter, Location loc, Value x,
                 IntegerType type) {
  unsigned narrow = x.getType().getIntOrFloatBitWidth();
  Value zext = arith::ExtUIOp::create(rewriter, loc, type, x);
  Value sign = arith::ConstantOp::create(
      rewriter, loc,
      rewriter.getIntegerAttr(
          type, llvm::APInt::getOneBitSet(type.getWidth(), narrow - 1)));
  return arith::SubIOp::create(
      rewriter, loc, arith::XOrIOp::create(rewriter, loc, zext, sign), sign);
}

struct ExtSIPattern : OpRewritePattern<arith::ExtSIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtSIOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<IntegerType>(op.getType());
    if (!type || op.getIn().getType().isInteger(1))
      return failure();
    rewriter.replaceOp(op, signExtend(rewriter, op.getLoc(), op.getIn(), type));
    return success();
  }
};

/// index -> a wider integer: the index (32 bits in SPIR-V) sign-extended.
struct IndexCastPattern : OpRewritePattern<arith::IndexCastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::IndexCastOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<IntegerType>(op.getType());
    if (!type || !op.getIn().getType().isIndex() ||
        type.getWidth() <= kSpirvIndexBits)
      return failure();
    Value narrow = arith::IndexCastOp::create(
        rewriter, op.getLoc(), rewriter.getIntegerType(kSpirvIndexBits),
        op.getIn());
    rewriter.replaceOp(op, signExtend(rewriter, op.getLoc(), narrow, type));
    return success();
  }
};

struct AttnSpirvSignExtendPass
    : attnc::impl::AttnSpirvSignExtendBase<AttnSpirvSignExtendPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExtSIPattern, IndexCastPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
