// attn-distinct-returned-buffers: a buffer returned twice gets a copy.
//
// A derived backward may return one value for two results (the zero
// gradients of two inputs of one type, one constant after CSE); on the GPU
// targets that constant is a memref.alloc (attn-gpu-materialize-constants),
// and upstream's buffer-results-to-out-params with hoist-static-allocs,
// which replaces a returned alloc by its out-param, crashed (MLIR 22) when
// the alloc was returned twice. Each repeated operand of a func.return
// becomes a copy of its own here, so that every result is a distinct
// buffer.
#include "codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNDISTINCTRETURNEDBUFFERS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnDistinctReturnedBuffers
    : attnc::impl::AttnDistinctReturnedBuffersBase<
          AttnDistinctReturnedBuffers> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::DenseSet<Value> seen;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        auto type = dyn_cast<MemRefType>(operand.get().getType());
        if (!type || seen.insert(operand.get()).second)
          continue;
        // A static shape: the function's results are (parseSpec).
        if (!type.hasStaticShape())
          continue;
        Value copy = memref::AllocOp::create(
            b, ret.getLoc(),
            MemRefType::get(type.getShape(), type.getElementType()));
        memref::CopyOp::create(b, ret.getLoc(), operand.get(), copy);
        operand.set(copy);
      }
    });
  }
};

} // namespace
