// attnc-opt: runs attn and upstream passes on .mlir files (for lit tests).
#include "codegen/Passes.h"
#include "codegen/Spec.h"
#include "passes/Passes.h"

#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  attnc::registerAttncGraphPasses();
  attnc::registerAttncCodegenPasses();
  attnc::registerCpuPipelines();
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "attnc optimizer driver\n", registry));
}
