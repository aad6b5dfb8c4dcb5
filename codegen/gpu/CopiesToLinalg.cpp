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
      Value source = copy.getSource(), target = copy.getTarget();
      // A copy of one element (rank 0: a mean, a returned scalar tensor)
      // as one of shape [1]: a linalg op of no loops would stay a host load
      // and store of device memory, which the host may not touch.
      if (cast<MemRefType>(source.getType()).getRank() == 0) {
        auto expand = [&](Value memref) {
          // (Its layout kept: a strided view's offset moves along.)
          MemRefType type = *memref::ExpandShapeOp::computeExpandedType(
              cast<MemRefType>(memref.getType()), {1}, {});
          return memref::ExpandShapeOp::create(
                     b, copy.getLoc(), type, memref,
                     ArrayRef<ReassociationIndices>{},
                     ArrayRef<OpFoldResult>{b.getIndexAttr(1)})
              .getResult();
        };
        source = expand(source);
        target = expand(target);
      }
      linalg::CopyOp::create(b, copy.getLoc(), source, target);
      copy.erase();
    }
  }
};

} // namespace
