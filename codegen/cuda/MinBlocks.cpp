// attn-cuda-min-blocks: the tensor-core kernels promise ptxas one
// workgroup per multiprocessor (nvvm.minctasm = 1, PTX .minnctapersm).
// Their tiles are planned for one or two workgroups of 128 threads per
// multiprocessor; without the promise ptxas may cap a kernel's registers
// to raise its occupancy and spill instead: a D = 16 dK/dV kernel came out
// at 64 registers with a 4-byte spill, and at 114 with none given the
// promise. gpu-kernel-outlining keeps no attribute of the launch, so the
// kernels are found by their products (nvvm.mma.sync).
#include "codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNCUDAMINBLOCKS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnCudaMinBlocksPass
    : attnc::impl::AttnCudaMinBlocksBase<AttnCudaMinBlocksPass> {
  void runOnOperation() override {
    getOperation().walk([](gpu::GPUFuncOp func) {
      if (!func.isKernel())
        return;
      bool tensorCores =
          func.walk([](NVVM::MmaOp) { return WalkResult::interrupt(); })
              .wasInterrupted();
      if (tensorCores)
        func->setAttr(
            NVVM::NVVMDialect::getMinctasmAttrName(),
            IntegerAttr::get(IntegerType::get(func.getContext(), 32), 1));
    });
  }
};

} // namespace
