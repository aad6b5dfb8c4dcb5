// attn-keep-entry-points: the forward or the backward half of a spec's
// entry points (see Passes.td).
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNKEEPENTRYPOINTS
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

struct AttnKeepEntryPoints
    : attnc::impl::AttnKeepEntryPointsBase<AttnKeepEntryPoints> {
  using AttnKeepEntryPointsBase::AttnKeepEntryPointsBase;

  void runOnOperation() override {
    if (entryPoints == attnc::EntryPoints::All)
      return;
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // The spec's kernels: public @f with derived @f_fwd and @f_bwd.
    SmallVector<std::string> kernels;
    for (auto func : module.getOps<func::FuncOp>()) {
      std::string name = func.getSymName().str();
      if (func.isPublic() && symbols.lookup(name + "_fwd") &&
          symbols.lookup(name + "_bwd"))
        kernels.push_back(name);
    }
    for (const std::string &name : kernels) {
      SmallVector<std::string, 2> dropped;
      if (entryPoints == attnc::EntryPoints::Forward)
        dropped = {name + "_bwd"};
      else
        dropped = {name, name + "_fwd"};
      for (const std::string &symbol : dropped)
        symbols.erase(symbols.lookup(symbol));
    }
  }
};

} // namespace
