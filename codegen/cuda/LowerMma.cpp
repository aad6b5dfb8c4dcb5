// attn-lower-cuda-mma: attn.attention(_grad) with an #attn.mma_plan as
// NVIDIA tensor-core flash kernels (FlashMma.h).
#include "codegen/Passes.h"
#include "codegen/cuda/FlashMma.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNLOWERCUDAMMA
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnLowerCudaMmaPass
    : attnc::impl::AttnLowerCudaMmaBase<AttnLowerCudaMmaPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<attnc::attn::AttentionOp, attnc::attn::AttentionGradOp>(op) &&
          isa_and_nonnull<attnc::attn::MmaPlanAttr>(
              attnc::attn::getTilePlan(op)))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : ops) {
      auto plan = cast<attnc::attn::MmaPlanAttr>(attnc::attn::getTilePlan(op));
      LogicalResult lowered =
          TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](attnc::attn::AttentionOp fwd) {
                return plan.getWgmma()
                           ? attnc::lowerToFlashWgmma(rewriter, fwd, plan)
                           : attnc::lowerToFlashMma(rewriter, fwd, plan);
              })
              .Case([&](attnc::attn::AttentionGradOp grad) {
                return attnc::lowerToFlashMma(rewriter, grad, plan);
              });
      if (failed(lowered)) {
        op->emitOpError("has a tensor-core plan its kernels cannot build");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
