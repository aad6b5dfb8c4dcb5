// attn-gpu-copies-to-linalg: host copies become kernels on GPU targets.
#include "codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUCOPIESTOLINALG
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnGpuCopiesToLinalgPass
    : attnc::impl::AttnGpuCopiesToLinalgBase<AttnGpuCopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      if (!copy->getParentOfType<gpu::LaunchOp>())
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    }
  }
};

} // namespace
