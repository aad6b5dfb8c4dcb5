// attn-gpu-merge-modules: every outlined kernel in one gpu.module, so that
// a spec's kernels are serialized by one LLVM NVPTX run, one ptxas and one
// fatbinary (gpu-kernel-outlining gives each kernel a module of its own:
// mha_causal's 32 modules took 1.75 s to compile, most of it starting the
// toolkit's programs 64 times).
#include "codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUMERGEMODULES
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnGpuMergeModulesPass
    : attnc::impl::AttnGpuMergeModulesBase<AttnGpuMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto modules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    gpu::GPUModuleOp target = modules.front();
    SymbolTable targetSymbols(target);
    // (old module, old kernel) -> new kernel name in `target`.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules)) {
      if (source.getTargetsAttr() != target.getTargetsAttr() ||
          source->getDiscardableAttrDictionary() !=
              target->getDiscardableAttrDictionary()) {
        source.emitError("cannot merge gpu.modules with different targets");
        return signalPassFailure();
      }
      for (Operation &op :
           llvm::make_early_inc_range(source.getBody()->without_terminator())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        StringAttr oldName = symbol ? symbol.getNameAttr() : StringAttr();
        op.moveBefore(target.getBody()->getTerminator());
        if (!symbol)
          continue;
        // insert() renames the symbol when its name is taken.
        StringAttr newName = targetSymbols.insert(&op);
        renamed[{source.getSymNameAttr(), oldName}] = newName;
      }
      source.erase();
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          renamed.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == renamed.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          target.getSymNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
    });
  }
};

} // namespace
