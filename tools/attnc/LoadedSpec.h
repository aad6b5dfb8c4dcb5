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

  /// parse() for a tool's --batch N (0: not given): a spec whose batch is
  /// dynamic (`?`) needs it and is specialized to N for the reference; a
  /// static one takes none.
  mlir::FailureOr<Spec> parseAtBatch(int64_t batch, llvm::raw_ostream &errs) {
    if (batch < 0) {
      errs << "attnc: error: --batch must be >= 0\n";
      return mlir::failure();
    }
    mlir::FailureOr<Spec> spec =
        parseSpec(sourceMgr, context, std::max<int64_t>(batch, 1));
    if (mlir::failed(spec))
      return mlir::failure();
    if (hasDynamicBatch(*spec) != (batch > 0)) {
      errs << (batch > 0 ? "attnc: error: --batch: the spec has no dynamic "
                           "batch (no `?` first dimension)\n"
                         : "attnc: error: the spec's batch is dynamic "
                           "(`?`): give its size with --batch N\n");
      return mlir::failure();
    }
    return spec;
  }
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
