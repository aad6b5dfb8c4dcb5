// attn-elide-result-copies: results written straight into out-params.
//
// buffer-results-to-out-params (hoist-static-allocs) makes a returned
// memref.alloc the caller's out-param, but a function that returns what it
// got from a call (@f returning @f_fwd's O, attn-derive-backward) gets a
// buffer for the call and a copy into its out-param: it rewrites returns
// before calls. This pass passes the out-param to the call instead.
#include "codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNELIDERESULTCOPIES
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// memref.copy %alloc, %out -> %out in place of %alloc, when %out is an
/// argument of the function used by nothing else and every other use of
/// %alloc is before the copy in its block: nothing can tell the two
/// buffers apart.
struct ElideCopyIntoArgument : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    auto out = dyn_cast<BlockArgument>(copy.getTarget());
    auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    if (!out || !alloc || !out.hasOneUse() ||
        !isa<func::FuncOp>(out.getOwner()->getParentOp()) ||
        alloc.getType() != out.getType() ||
        alloc->getBlock() != copy->getBlock())
      return failure();
    for (Operation *user : alloc->getUsers())
      if (user != copy && (user->getBlock() != copy->getBlock() ||
                           !user->isBeforeInBlock(copy)))
        return failure();
    rewriter.replaceAllUsesWith(alloc.getResult(), out);
    rewriter.eraseOp(copy);
    rewriter.eraseOp(alloc);
    return success();
  }
};

struct AttnElideResultCopiesPass
    : attnc::impl::AttnElideResultCopiesBase<AttnElideResultCopiesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ElideCopyIntoArgument>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
