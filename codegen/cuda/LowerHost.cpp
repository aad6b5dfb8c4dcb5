// attn-cuda-lower-host: the CUDA kernels' binaries (gpu.binary ops, from
// gpu-module-to-binary) embedded in the object and launched through the
// runtime's CUDA part (runtime/Cuda.c); the host lowering itself is the
// GPU targets' (codegen/gpu/HostLowering.h).
#include "codegen/Passes.h"
#include "codegen/gpu/HostLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNCUDALOWERHOST
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using attnc::EmbeddedModule;
using attnc::EmbeddedModules;

namespace {

/// How generated host code calls the runtime (attnc/cuda.h).
attnc::GpuRuntimeAbi cudaAbi() {
  attnc::GpuRuntimeAbi abi;
  abi.launch = "attnc_cuda_launch";
  abi.scratch = "attnc_cuda_scratch";
  abi.release = "attnc_cuda_release";
  abi.stream = true;
  abi.blockSize = true;
  return abi;
}

struct AttnCudaLowerHostPass
    : attnc::impl::AttnCudaLowerHostBase<AttnCudaLowerHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    EmbeddedModules modules;
    if (failed(embedKernels(module, modules)) ||
        failed(attnc::lowerGpuHost(module, cudaAbi(), modules)))
      return signalPassFailure();
  }

  /// Puts every gpu.binary's one object into a global, and the name of
  /// every kernel launched from it into another; erases the binaries.
  LogicalResult embedKernels(ModuleOp module, EmbeddedModules &modules) {
    for (auto binary :
         llvm::make_early_inc_range(module.getOps<gpu::BinaryOp>())) {
      ArrayRef<Attribute> objects = binary.getObjects().getValue();
      if (objects.size() != 1)
        return binary.emitError("expected one object per kernel module");
      auto object = cast<gpu::ObjectAttr>(objects.front());
      std::string bytes = object.getObject().str();
      // PTX is loaded as a C string; cubins and fatbins carry their size.
      if (object.getFormat() == gpu::CompilationTarget::Assembly)
        bytes.push_back('\0');
      else if (object.getFormat() != gpu::CompilationTarget::Binary &&
               object.getFormat() != gpu::CompilationTarget::Fatbin)
        return binary.emitError("expected PTX, a cubin or a fatbin");
      StringRef name = binary.getSymName();
      EmbeddedModule &embedded = modules[name];
      // Fatbins and ELF images want 8-byte alignment; 16 for good measure.
      embedded.image =
          attnc::embedBytes(module, binary.getLoc(),
                            (attnc::kCudaImagePrefix + name).str(), bytes,
                            /*alignment=*/16);
      embedded.size = bytes.size();
    }
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      auto embedded = modules.find(launch.getKernelModuleName());
      if (embedded == modules.end()) {
        launch.emitError("no gpu.binary for the kernel's module (run "
                         "gpu-module-to-binary first)");
        return WalkResult::interrupt();
      }
      StringRef kernel = launch.getKernelName();
      if (!embedded->second.kernels.count(kernel))
        embedded->second.kernels[kernel] = attnc::embedBytes(
            module, launch.getLoc(),
            ("__attnc_kernel_" + embedded->first() + "_" + kernel).str(),
            (kernel + Twine('\0')).str(), /*alignment=*/1);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    for (auto binary :
         llvm::make_early_inc_range(module.getOps<gpu::BinaryOp>()))
      binary.erase();
    return success();
  }
};

} // namespace
