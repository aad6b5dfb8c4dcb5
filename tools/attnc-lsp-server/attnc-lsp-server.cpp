// attnc-lsp-server: MLIR's language server (diagnostics, hover, go to
// definition, completion...) for specs in the attn dialect, with the dialects
// attnc and attnc-opt register. Editors start it and talk LSP over stdio
// (README.md, "Editor support").
#include "codegen/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  return mlir::failed(mlir::MlirLspServerMain(argc, argv, registry));
}
