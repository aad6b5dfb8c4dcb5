// attn-gpu-workgroup-attributions: the flash kernels' tiles in workgroup
// memory (memref.alloc in memory space 3 at the top of a gpu.launch body)
// as workgroup attributions of the launch, which convert-gpu-to-nvvm makes
// shared-memory globals. Without it the NVVM lowering turns each such
// alloc into a malloc per thread: private memory, not shared (SPIR-V's
// lowering makes them workgroup variables itself).
#include "codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUWORKGROUPATTRIBUTIONS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

bool inWorkgroupMemory(MemRefType type) {
  Attribute space = type.getMemorySpace();
  if (auto number = dyn_cast_or_null<IntegerAttr>(space))
    return number.getInt() == 3;
  auto gpuSpace = dyn_cast_or_null<gpu::AddressSpaceAttr>(space);
  return gpuSpace && gpuSpace.getValue() == gpu::AddressSpace::Workgroup;
}

struct AttnGpuWorkgroupAttributionsPass
    : attnc::impl::AttnGpuWorkgroupAttributionsBase<
          AttnGpuWorkgroupAttributionsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](memref::AllocOp alloc) {
      if (!inWorkgroupMemory(alloc.getType()))
        return WalkResult::advance();
      auto launch = dyn_cast<gpu::LaunchOp>(alloc->getParentOp());
      if (!launch || !alloc.getType().hasStaticShape()) {
        alloc.emitError("workgroup memory must be allocated with a static "
                        "shape at the top of a gpu.launch body");
        return WalkResult::interrupt();
      }
      for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        if (isa<memref::DeallocOp>(user))
          user->erase();
      BlockArgument tile =
          launch.addWorkgroupAttribution(alloc.getType(), alloc.getLoc());
      alloc.replaceAllUsesWith(tile);
      alloc.erase();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
