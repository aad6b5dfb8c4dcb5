// attn-vulkan-loop-trap: every kernel tells the runtime when the device cut
// its loops short (see Passes.td).
//
// Written by hand: the cut is lavapipe's (llvmpipe's loop limiter, a
// counter shared by every loop of an invocation that ends them all after
// 65535 iterations), so no upstream pass knows of it.
#include "codegen/Passes.h"
#include "codegen/gpu/HostLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNVULKANLOOPTRAP
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// At the end of `launch`'s body: a loop of two iterations whose bound the
/// device's compiler cannot know (1 + min(grid x, 1)), so that it stays a
/// loop; if it ran fewer, the limiter had run out, and 1 goes to `trap`.
void appendProbe(gpu::LaunchOp launch, Value trap) {
  Block &body = launch.getBody().front();
  ImplicitLocOpBuilder b(launch.getLoc(), body.getTerminator());
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value bound = arith::AddIOp::create(
      b, arith::MinUIOp::create(b, launch.getGridSize().x, one), one);
  auto probe = scf::ForOp::create(
      b, zero, bound, one, ValueRange{zero},
      [&](OpBuilder &nested, Location loc, Value, ValueRange ran) {
        scf::YieldOp::create(
            nested, loc,
            ValueRange{arith::AddIOp::create(nested, loc, ran[0], one)});
      });
  Value cut = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                    probe.getResult(0), bound);
  auto ifCut = scf::IfOp::create(b, cut, /*withElseRegion=*/false);
  b.setInsertionPoint(ifCut.thenBlock()->getTerminator());
  memref::StoreOp::create(
      b, arith::ConstantOp::create(b, b.getI32IntegerAttr(1)), trap,
      ValueRange{arith::ConstantIndexOp::create(b, 0)});
}

struct AttnVulkanLoopTrapPass
    : attnc::impl::AttnVulkanLoopTrapBase<AttnVulkanLoopTrapPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      SmallVector<gpu::LaunchOp> launches;
      func.walk([&](gpu::LaunchOp launch) { launches.push_back(launch); });
      if (launches.empty())
        return;
      OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
      auto trap = memref::AllocOp::create(b, func.getLoc(),
                                          MemRefType::get({1}, b.getI32Type()));
      trap->setAttr(attnc::kDeviceTrapAttr, b.getUnitAttr());
      for (gpu::LaunchOp launch : launches)
        appendProbe(launch, trap);
    });
  }
};

} // namespace
