// attn-lower-cpu: attn.attention -> the flash-attention CPU kernel.
#include "codegen/Passes.h"
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/Gemm.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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
    if (vectorBits != 128 && vectorBits != 256 && vectorBits != 512) {
      getOperation().emitError("attn-lower-cpu: vector-bits must be 128, "
                               "256 or 512, got ")
          << static_cast<int64_t>(vectorBits);
      return signalPassFailure();
    }
    // Attn ops whose results nothing uses are dropped, not lowered: the
    // statistics op attn-derive-backward recomputes in @f_bwd for results
    // it then takes from its arguments had run its kernel for nothing.
    getOperation().walk([&](func::FuncOp func) {
      for (Block &block : func.getBody())
        for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
          if (isa<attnc::attn::AttnDialect>(op.getDialect()) &&
              isOpTriviallyDead(&op))
            op.erase();
    });

    // Each op's attn.tile_plan (attn-plan-tiles): the lowering takes every
    // decision from it.
    llvm::DenseMap<Operation *, attnc::attn::CpuPlanAttr> plans;
    WalkResult planned = getOperation().walk([&](Operation *op) {
      if (!isa<attnc::attn::AttentionOp, attnc::attn::AttentionGradOp,
               attnc::attn::AttentionStatsOp, attnc::attn::AttentionStatsGradOp,
               attnc::attn::DistillOp, attnc::attn::DistillGradOp>(op) &&
          !attnc::canLowerToGemmCpu(op))
        return WalkResult::advance();
      attnc::attn::TilePlanAttrInterface plan = attnc::attn::getTilePlan(op);
      auto cpu = dyn_cast_or_null<attnc::attn::CpuPlanAttr>(plan);
      if (!cpu) {
        InFlightDiagnostic diag = op->emitError()
                                  << "attn-lower-cpu needs a CPU tile plan "
                                     "(#attn.cpu_plan, from attn-plan-tiles)";
        if (plan)
          diag << ", got " << plan;
        else
          diag << "; the op has none";
        return WalkResult::interrupt();
      }
      plans[op] = cpu;
      return WalkResult::advance();
    });
    if (planned.wasInterrupted())
      return signalPassFailure();

    // Forwards, then backwards, then statistics and distillations, then
    // GEMMs, each in walk order; an op a kernel does not cover is left to
    // attn-lower-to-linalg.
    IRRewriter rewriter(&getContext());
    bool lowered = false;
    SmallVector<attnc::attn::AttentionOp> forwards;
    getOperation().walk(
        [&](attnc::attn::AttentionOp op) { forwards.push_back(op); });
    for (attnc::attn::AttentionOp op : forwards)
      lowered |= succeeded(attnc::lowerToFlashForward(
          rewriter, op, plans.lookup(op), vectorBits));
    SmallVector<attnc::attn::AttentionGradOp> backwards;
    getOperation().walk(
        [&](attnc::attn::AttentionGradOp op) { backwards.push_back(op); });
    for (attnc::attn::AttentionGradOp op : backwards)
      lowered |= succeeded(attnc::lowerToFlashBackward(
          rewriter, op, plans.lookup(op), vectorBits));
    // (The statistics' gradients that no backward took in.)
    SmallVector<attnc::attn::AttentionStatsGradOp> statisticsGrads;
    getOperation().walk([&](attnc::attn::AttentionStatsGradOp op) {
      statisticsGrads.push_back(op);
    });
    for (attnc::attn::AttentionStatsGradOp op : statisticsGrads)
      lowered |= succeeded(attnc::lowerToFlashStatsGrad(
          rewriter, op, plans.lookup(op), vectorBits));
    SmallVector<attnc::attn::AttentionStatsOp> statistics;
    getOperation().walk(
        [&](attnc::attn::AttentionStatsOp op) { statistics.push_back(op); });
    // (Some are new: the forwards moved the entropies of their companions
    // into their kernels and left the rest in new ops of the same plans.)
    for (attnc::attn::AttentionStatsOp op : statistics)
      lowered |= succeeded(attnc::lowerToFlashStats(
          rewriter, op,
          cast<attnc::attn::CpuPlanAttr>(attnc::attn::getTilePlan(op)),
          vectorBits));
    SmallVector<attnc::attn::DistillOp> distillations;
    getOperation().walk(
        [&](attnc::attn::DistillOp op) { distillations.push_back(op); });
    for (attnc::attn::DistillOp op : distillations)
      lowered |= succeeded(attnc::lowerToFlashDistill(
          rewriter, op, plans.lookup(op), vectorBits));
    SmallVector<attnc::attn::DistillGradOp> distillationGrads;
    getOperation().walk([&](attnc::attn::DistillGradOp op) {
      distillationGrads.push_back(op);
    });
    for (attnc::attn::DistillGradOp op : distillationGrads)
      lowered |= succeeded(attnc::lowerToFlashDistillGrad(
          rewriter, op, plans.lookup(op), vectorBits));
    SmallVector<Operation *> products;
    getOperation().walk([&](Operation *op) {
      if (attnc::canLowerToGemmCpu(op))
        products.push_back(op);
    });
    for (Operation *op : products)
      lowered |=
          succeeded(attnc::lowerToGemmCpu(rewriter, op, plans.lookup(op)));
    if (!lowered)
      return;
    // Math on vectors (exp, and the ops of widened score_mod regions such
    // as tanh) has no LLVM lowering but a libm call per lane, and a scalar
    // expf call per row rescale is no better: use upstream's polynomial
    // approximations (f32 accuracy) for f32 vector math and every f32 exp.
    // Not inside the regions of attn ops left to attn-lower-to-linalg:
    // their score_mod regions are differentiated by their rules, which
    // know math.exp but not the math.fma of its approximation.
    SmallVector<Operation *> exps;
    Dialect *attnDialect =
        getContext().getLoadedDialect<attnc::attn::AttnDialect>();
    getOperation().walk([&](Operation *op) {
      if (op->getDialect() != op->getContext()->getLoadedDialect<math::MathDialect>() ||
          op->getNumResults() != 1 ||
          !getElementTypeOrSelf(op->getResult(0).getType()).isF32())
        return;
      for (Operation *parent = op->getParentOp(); parent;
           parent = parent->getParentOp())
        if (parent->getDialect() == attnDialect)
          return;
      if (isa<math::ExpOp>(op) || isa<VectorType>(op->getResult(0).getType()))
        exps.push_back(op);
    });
    RewritePatternSet patterns(&getContext());
    // Upstream's rsqrt approximation is AVX's vrsqrtps (x86vector): without
    // AVX, LLVM cannot select it (it aborted on x86-64); math.rsqrt then
    // becomes 1 / sqrt.
    populateMathPolynomialApproximationPatterns(patterns, [&](StringRef name) {
      return name != math::RsqrtOp::getOperationName() || vectorBits >= 256;
    });
    FrozenRewritePatternSet frozen(std::move(patterns));
    // Vector divisions run on one divider unit at about a tenth of the FMA
    // rate (vdivps: 16 lanes in ~10 cycles on the Xeon): a softcap's
    // s / cap and tanh's rational approximation cost more than the rest of
    // its softmax step together. Where a division's operands are finite by
    // construction, i.e. tanh's (its x clamped to +-7.99, its denominator a
    // polynomial >= 4.9e-3), `arcp ninf` lets LLVM's x86 back end take a
    // reciprocal estimate with one Newton step (vrcp14ps and two FMAs, ~1
    // ulp) instead. So tanh is expanded first, and its new divisions
    // marked; the other approximations keep theirs.
    auto vectorDivisions = [&] {
      llvm::DenseSet<Operation *> divisions;
      getOperation().walk([&](arith::DivFOp div) {
        if (isa<VectorType>(div.getType()))
          divisions.insert(div);
      });
      return divisions;
    };
    llvm::DenseSet<Operation *> before = vectorDivisions();
    // A region's division by a constant (a softcap's s / cap, its
    // gradient's ds / cap): `arcp` lets LLVM multiply by the reciprocal
    // (within an ulp of the quotient; infinities and NaN as the division
    // gives them) where 1 / c is a normal float.
    for (Operation *op : before) {
      auto div = cast<arith::DivFOp>(op);
      std::optional<APFloat> divisor = splatConstant(div.getRhs());
      if (!divisor)
        continue;
      APFloat reciprocal(divisor->getSemantics(), 1);
      reciprocal.divide(*divisor, APFloat::rmNearestTiesToEven);
      if (reciprocal.isNormal())
        div.setFastmath(div.getFastmath() | arith::FastMathFlags::arcp);
    }
    SmallVector<Operation *> tanhs, others;
    for (Operation *op : exps)
      (isa<math::TanhOp>(op) && isa<VectorType>(op->getResult(0).getType())
           ? tanhs
           : others)
          .push_back(op);
    if (failed(applyOpPatternsGreedily(tanhs, frozen)))
      return signalPassFailure();
    for (Operation *op : vectorDivisions())
      if (!before.contains(op))
        cast<arith::DivFOp>(op).setFastmath(arith::FastMathFlags::arcp |
                                            arith::FastMathFlags::ninf);
    if (failed(applyOpPatternsGreedily(others, frozen)))
      return signalPassFailure();
  }

  /// The float every lane of `v` holds, when it is a constant: a splat
  /// arith.constant or the broadcast of a scalar one (widened regions).
  static std::optional<APFloat> splatConstant(Value v) {
    if (auto broadcast = v.getDefiningOp<vector::BroadcastOp>())
      v = broadcast.getSource();
    Attribute value;
    if (!matchPattern(v, m_Constant(&value)))
      return std::nullopt;
    if (auto splat = dyn_cast<SplatElementsAttr>(value))
      value = splat.getSplatValue<Attribute>();
    if (auto scalar = dyn_cast<FloatAttr>(value))
      return scalar.getValue();
    return std::nullopt;
  }
};

} // namespace
