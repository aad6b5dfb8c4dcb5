// attn-spirv-attach-target: what convert-gpu-to-spirv needs on the
// outlined kernels. Upstream's spirv-attach-target sets the gpu.module's
// `targets` for gpu-module-to-binary, which attnc does not use (the Vulkan
// host code is its own, attn-vulkan-lower-host); convert-gpu-to-spirv reads
// the `spirv.target_env` attribute and each kernel's entry point ABI.
#include "codegen/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNSPIRVATTACHTARGET
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnSpirvAttachTargetPass
    : attnc::impl::AttnSpirvAttachTargetBase<AttnSpirvAttachTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto env =
        dyn_cast_or_null<spirv::TargetEnvAttr>(parseAttribute(targetEnv, ctx));
    if (!env) {
      module.emitError("attn-spirv-attach-target: target-env is not a "
                       "#spirv.target_env attribute: ")
          << targetEnv;
      return signalPassFailure();
    }

    // The block size of every kernel, from its launches.
    llvm::DenseMap<Operation *, SmallVector<int32_t, 3>> blockSizes;
    SymbolTableCollection symbols;
    bool failedLaunch = false;
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto kernel = symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel)
        return;
      SmallVector<int32_t, 3> sizes;
      for (Value size : {launch.getBlockSizeX(), launch.getBlockSizeY(),
                         launch.getBlockSizeZ()}) {
        APInt value;
        if (!matchPattern(size, m_ConstantInt(&value))) {
          launch.emitError("Vulkan kernels need constant block sizes");
          failedLaunch = true;
          return;
        }
        sizes.push_back(value.getSExtValue());
      }
      auto [it, inserted] = blockSizes.try_emplace(kernel, sizes);
      if (!inserted && it->second != sizes) {
        launch.emitError("kernel @")
            << kernel.getName() << " is launched with differing block sizes";
        failedLaunch = true;
      }
    });
    if (failedLaunch)
      return signalPassFailure();

    // MLIR 22's SPIR-V conversion would turn bf16 into f32 silently.
    WalkResult bf16 = module.walk([](gpu::GPUModuleOp gpuModule) {
      WalkResult found = gpuModule.walk([](Operation *op) {
        auto isBf16 = [](Type type) {
          return getElementTypeOrSelf(type).isBF16();
        };
        if (llvm::any_of(op->getOperandTypes(), isBf16) ||
            llvm::any_of(op->getResultTypes(), isBf16)) {
          op->emitError("bf16 values cannot be compiled to SPIR-V; "
                        "attn-spirv-bf16-storage and the bf16 emulation "
                        "left this one");
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      return found;
    });
    if (bf16.wasInterrupted())
      return signalPassFailure();

    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
      gpuModule->setAttr(spirv::getTargetEnvAttrName(), env);
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
        if (!kernel.isKernel())
          continue;
        auto it = blockSizes.find(kernel);
        if (it == blockSizes.end())
          continue; // never launched: convert-gpu-to-spirv skips it
        kernel->setAttr(spirv::getEntryPointABIAttrName(),
                        spirv::getEntryPointABIAttr(ctx, it->second));
      }
    }
  }
};

} // namespace
