// attn-gpu-sink-constants: constants used in a gpu.launch body are cloned
// into it, so that outlined kernels take buffers only.
#include "codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Matchers.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUSINKCONSTANTS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnGpuSinkConstantsPass
    : attnc::impl::AttnGpuSinkConstantsBase<AttnGpuSinkConstantsPass> {
  void runOnOperation() override {
    getOperation().walk([](gpu::LaunchOp launch) {
      Region &body = launch.getBody();
      OpBuilder b = OpBuilder::atBlockBegin(&body.front());
      DenseMap<Value, Value> cloned;
      body.walk([&](Operation *op) {
        for (OpOperand &use : op->getOpOperands()) {
          Value value = use.get();
          Operation *def = value.getDefiningOp();
          if (!def || !def->hasTrait<OpTrait::ConstantLike>() ||
              launch->isAncestor(def))
            continue;
          Value &inside = cloned[value];
          if (!inside)
            inside = b.clone(*def)->getResult(0);
          use.set(inside);
        }
      });
    });
  }
};

} // namespace
