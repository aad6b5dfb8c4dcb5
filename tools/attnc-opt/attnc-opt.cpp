// attnc-opt: runs attn passes and attnc's pipelines on .mlir files (for lit
// tests), with the same registration as attnc and the JIT.
#include "codegen/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  attnc::registerAttncPasses();
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attnc optimizer driver\n", registry));
}
