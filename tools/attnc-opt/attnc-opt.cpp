// attnc-opt: runs attn passes and attnc's pipelines on .mlir files (for lit
// tests), with the same registration as attnc and the JIT.
#include "codegen/Registration.h"
#include "codegen/SourceGuards.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  attnc::registerAttncPasses();
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "attnc optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // What MLIR 22's parser would crash on, or report unclearly
  // (SourceGuards.h).
  if (std::optional<attnc::SourceHazard> hazard =
          attnc::findSourceHazard(input->getBuffer())) {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sourceMgr.PrintMessage(llvm::SMLoc::getFromPointer(hazard->at),
                           llvm::SourceMgr::DK_Error, hazard->message);
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // A crash prints its stack and ends in an error status rather than a
  // signal.
  llvm::CrashRecoveryContext::Enable();
  llvm::CrashRecoveryContext recovery;
  recovery.DumpStackAndCleanupOnFailure = true;
  mlir::LogicalResult result = mlir::failure();
  if (!recovery.RunSafely([&] {
        result =
            mlir::MlirOptMain(output->os(), std::move(input), registry, config);
      })) {
    llvm::errs() << "attnc-opt: crashed on " << inputFile << "\n";
    return 1;
  }
  if (mlir::failed(result))
    return 1;
  output->keep();
  return 0;
}
