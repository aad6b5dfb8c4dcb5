// attn-lower-cpu: attn.attention -> the flash-attention CPU kernel.
#include "codegen/Passes.h"
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/Gemm.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNLOWERCPU
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnLowerCpuPass : attnc::impl::AttnLowerCpuBase<AttnLowerCpuPass> {
  using AttnLowerCpuBase::AttnLowerCpuBase;

  void runOnOperation() override {
    if (rows < 1 || rows > 12) {
      getOperation().emitError("attn-lower-cpu: rows must be in [1, 12]");
      return signalPassFailure();
    }
    SmallVector<attnc::attn::AttentionOp> ops;
    getOperation().walk([&](attnc::attn::AttentionOp op) {
      if (attnc::canLowerToFlashCpu(op))
        ops.push_back(op);
    });
    attnc::FlashTileOptions options;
    options.rows = rows;
    for (attnc::attn::AttentionOp op : ops) {
      OpBuilder b(op);
      auto [output, lse] = attnc::buildFlashAttentionCpu(b, op, options);
      op.getOutput().replaceAllUsesWith(output);
      op.getLse().replaceAllUsesWith(lse);
      op.erase();
    }
    SmallVector<attnc::attn::AttentionGradOp> grads;
    getOperation().walk([&](attnc::attn::AttentionGradOp op) {
      if (attnc::canLowerToFlashCpu(op, options))
        grads.push_back(op);
    });
    for (attnc::attn::AttentionGradOp op : grads) {
      OpBuilder b(op);
      SmallVector<Value> results =
          attnc::buildFlashAttentionGradCpu(b, op, options);
      op->replaceAllUsesWith(results);
      op.erase();
    }
    // Projections, merges and their gradients: tiled GEMMs.
    SmallVector<Operation *> products;
    getOperation().walk([&](Operation *op) {
      if (attnc::canLowerToGemmCpu(op))
        products.push_back(op);
    });
    for (Operation *op : products) {
      OpBuilder b(op);
      SmallVector<Value> results = attnc::buildGemmCpu(b, op, rows);
      op->replaceAllUsesWith(results);
      op->erase();
    }
    if (ops.empty() && grads.empty() && products.empty())
      return;
    // Math on vectors (exp, and the ops of widened score_mod regions such
    // as tanh) has no LLVM lowering but a libm call per lane, and a scalar
    // expf call per row rescale is no better: use upstream's polynomial
    // approximations (f32 accuracy) for f32 vector math and every f32 exp.
    SmallVector<Operation *> exps;
    getOperation().walk([&](Operation *op) {
      if (op->getDialect() != op->getContext()->getLoadedDialect<math::MathDialect>() ||
          op->getNumResults() != 1 ||
          !getElementTypeOrSelf(op->getResult(0).getType()).isF32())
        return;
      if (isa<math::ExpOp>(op) || isa<VectorType>(op->getResult(0).getType()))
        exps.push_back(op);
    });
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns,
                                                [](StringRef) { return true; });
    if (failed(applyOpPatternsGreedily(exps, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
