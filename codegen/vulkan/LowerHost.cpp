// attn-vulkan-lower-host: the SPIR-V kernels embedded in the object and
// launched through the runtime's Vulkan part (runtime/Vulkan.c); the host
// lowering itself is the GPU targets' (codegen/gpu/HostLowering.h).
#include "codegen/Passes.h"
#include "codegen/gpu/HostLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Target/SPIRV/Serialization.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNVULKANLOWERHOST
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using attnc::EmbeddedModule;
using attnc::EmbeddedModules;

namespace {

/// How generated host code calls the runtime (attnc/vulkan.h).
attnc::GpuRuntimeAbi vulkanAbi() {
  attnc::GpuRuntimeAbi abi;
  abi.launch = "attnc_vk_dispatch";
  abi.scratch = "attnc_vk_scratch";
  abi.release = "attnc_vk_release";
  abi.trap = "attnc_vk_trap";
  abi.imageSize = true;
  abi.bufferBytes = true;
  return abi;
}

struct AttnVulkanLowerHostPass
    : attnc::impl::AttnVulkanLowerHostBase<AttnVulkanLowerHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    EmbeddedModules modules;
    if (failed(embedKernels(module, modules)) ||
        failed(attnc::lowerGpuHost(module, vulkanAbi(), modules)))
      return signalPassFailure();
  }

  /// Serializes every spirv.module into a global of words, adds a global
  /// name per entry point, and erases the gpu and spirv modules.
  LogicalResult embedKernels(ModuleOp module, EmbeddedModules &modules) {
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Type i32 = b.getI32Type();
    for (auto spirvModule :
         llvm::make_early_inc_range(module.getOps<spirv::ModuleOp>())) {
      // convert-gpu-to-spirv names the module of gpu.module @m __spv__m.
      StringRef name = spirvModule.getName().value_or("");
      if (!name.consume_front("__spv__"))
        return spirvModule.emitError("unexpected SPIR-V module name");
      SmallVector<uint32_t> words;
      if (failed(spirv::serialize(spirvModule, words)))
        return failure();
      EmbeddedModule &embedded = modules[name];
      embedded.size = words.size();
      auto arrayType = LLVM::LLVMArrayType::get(i32, words.size());
      SmallVector<int32_t> values(words.begin(), words.end());
      embedded.image = LLVM::GlobalOp::create(
          b, spirvModule.getLoc(), arrayType, /*isConstant=*/true,
          LLVM::Linkage::Internal, ("__attnc_spirv_" + name).str(),
          DenseElementsAttr::get(
              RankedTensorType::get({int64_t(values.size())}, i32),
              ArrayRef<int32_t>(values)));
      embedded.image.setAlignment(4);
      for (auto entryPoint : spirvModule.getOps<spirv::EntryPointOp>()) {
        StringRef entry = entryPoint.getFn();
        embedded.kernels[entry] =
            attnc::embedBytes(module, spirvModule.getLoc(),
                              ("__attnc_entry_" + name + "_" + entry).str(),
                              (entry + Twine('\0')).str(), /*alignment=*/1);
      }
      spirvModule.erase();
    }
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      gpuModule.erase();
    return success();
  }
};

} // namespace
