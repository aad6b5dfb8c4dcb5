// A spec file parsed and validated for the tools that interpret it
// (attnc run, attnc bench), with located diagnostics.
#ifndef ATTNC_TOOLS_ATTNC_LOADEDSPEC_H
#define ATTNC_TOOLS_ATTNC_LOADEDSPEC_H

#include "codegen/Registration.h"
#include "codegen/Spec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>

namespace attnc {

class LoadedSpec {
public:
  LoadedSpec(std::unique_ptr<llvm::MemoryBuffer> file, llvm::raw_ostream &errs)
      : context(makeRegistry()) {
    context.printOpOnDiagnostic(false);
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    handler = std::make_unique<mlir::SourceMgrDiagnosticHandler>(
        sourceMgr, &context, errs);
  }

  /// Parses, verifies and validates the spec (see parseSpec).
  mlir::FailureOr<Spec> parse() { return parseSpec(sourceMgr, context); }
  mlir::MLIRContext &getContext() { return context; }

private:
  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registerAttncDialects(registry);
    return registry;
  }

  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
};

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_LOADEDSPEC_H
