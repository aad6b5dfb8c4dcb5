// attn-plan-tiles: named masks from affine mask_mod regions, then a tile
// plan per fused op for the target (see Passes.td).
#include "passes/MaskAnalysis.h"
#include "passes/Passes.h"
#include "passes/TilePlan.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNPLANTILES
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;

namespace {

struct AttnPlanTiles : attnc::impl::AttnPlanTilesBase<AttnPlanTiles> {
  using AttnPlanTilesBase::AttnPlanTilesBase;

  void runOnOperation() override {
    if (vectorBits != 128 && vectorBits != 256 && vectorBits != 512) {
      getOperation().emitError("attn-plan-tiles: vector-bits must be 128, "
                               "256 or 512, got ")
          << static_cast<int64_t>(vectorBits);
      return signalPassFailure();
    }
    if (rows < 0 || rows > attn::CpuPlanAttr::kMaxRows) {
      getOperation().emitError("attn-plan-tiles: rows must be in [0, ")
          << attn::CpuPlanAttr::kMaxRows << "], got "
          << static_cast<int64_t>(rows);
      return signalPassFailure();
    }
    CpuTarget target;
    target.vectorBits = vectorBits;
    target.amx = amx;
    target.dotBf16 = dotBf16;
    auto plan = [&](Operation *op) {
      if (!attn::getTilePlan(op))
        attn::setTilePlan(op, planCpuTiles(op, target, rows));
    };
    getOperation().walk([&](Operation *op) {
      if (promoteMaskModOfFusedOp(op) ||
          isa<attn::ProjectionOp, attn::MergeOp, attn::ProjectionGradOp,
              attn::MergeGradOp>(op))
        plan(op);
    });
  }
};

} // namespace
