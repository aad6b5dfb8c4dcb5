// In-process compilation of a spec to callable kernels (MLIR ExecutionEngine).
#ifndef ATTNC_CODEGEN_JIT_H
#define ATTNC_CODEGEN_JIT_H

#include "codegen/Spec.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace mlir {
class ExecutionEngine;
class MLIRContext;
} // namespace mlir

namespace attnc::jit {

struct Options {
  unsigned optLevel = 3;
  /// Also derive <f>_fwd and <f>_bwd for every kernel <f>.
  bool backward = true;
};

/// The entry points of one compiled spec, callable from this process.
class Kernels {
public:
  /// Compiles `specText` for the host CPU; the error holds the located
  /// diagnostics when the spec is invalid.
  static llvm::Expected<std::unique_ptr<Kernels>>
  compile(llvm::StringRef specText, const Options &options = {});
  ~Kernels();

  llvm::ArrayRef<KernelSignature> signatures() const { return kernels; }
  const KernelSignature *find(llvm::StringRef name) const;

  /// Calls entry `name` with one buffer per argument, inputs then outputs,
  /// and returns its status code; an unknown name or a wrong number of
  /// buffers is an error and calls nothing.
  llvm::Expected<int32_t> call(llvm::StringRef name,
                               llvm::ArrayRef<void *> buffers) const;

private:
  Kernels() = default;
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::vector<KernelSignature> kernels;
};

} // namespace attnc::jit

#endif // ATTNC_CODEGEN_JIT_H
