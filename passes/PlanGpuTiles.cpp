// attn-plan-gpu-tiles: named masks from affine mask_mod regions, then a
// GPU tile plan per fused op (see Passes.td).
#include "passes/GpuTilePlan.h"
#include "passes/MaskAnalysis.h"
#include "passes/Passes.h"

#include "dialect/AttnOps.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNPLANGPUTILES
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;

namespace {

struct AttnPlanGpuTiles : attnc::impl::AttnPlanGpuTilesBase<AttnPlanGpuTiles> {
  using AttnPlanGpuTilesBase::AttnPlanGpuTilesBase;

  void runOnOperation() override {
    if (workgroupSize < 1 || workgroupSize > 1024 || subgroupSize < 1 ||
        workgroupSize % subgroupSize != 0 || sharedMemoryBytes < 0) {
      getOperation().emitError(
          "attn-plan-gpu-tiles: workgroup-size must be in [1, 1024] and a "
          "multiple of subgroup-size, shared-memory-bytes non-negative");
      return signalPassFailure();
    }
    GpuTarget target;
    target.sharedMemoryBytes = sharedMemoryBytes;
    target.workgroupSize = workgroupSize;
    target.subgroupSize = subgroupSize;
    auto plan = [&](Operation *op) {
      if (attn::getTilePlan(op))
        return;
      if (tensorCores)
        if (attn::MmaPlanAttr mmaPlan = planMmaTiles(op, wgmma, atomicDq))
          return attn::setTilePlan(op, mmaPlan);
      if (attn::GpuPlanAttr gpuPlan = planGpuTiles(op, target))
        attn::setTilePlan(op, gpuPlan);
    };
    getOperation().walk([&](Operation *op) {
      if (promoteMaskModOfFusedOp(op))
        plan(op);
    });
  }
};

} // namespace
