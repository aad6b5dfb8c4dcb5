// The graph pipeline (see Passes.h).
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

namespace attnc {

void buildGraphPipeline(mlir::OpPassManager &pm, bool fuse, bool backward) {
  // attn-derive-backward and attn-fuse see one body per kernel: calls of
  // private helpers inlined first.
  if (fuse) {
    pm.addPass(mlir::createInlinerPass());
    pm.addPass(createAttnFuse());
  }
  if (backward) {
    pm.addPass(mlir::createInlinerPass());
    pm.addPass(createAttnDeriveBackward());
  }
}

} // namespace attnc
