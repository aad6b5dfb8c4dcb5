// The C header declaring a compiled spec's entry points.
#ifndef ATTNC_CODEGEN_HEADER_H
#define ATTNC_CODEGEN_HEADER_H

#include "codegen/Pipelines.h"
#include "codegen/Spec.h"

#include "llvm/Support/raw_ostream.h"

namespace attnc {

/// Writes a header that compiles as C and C++ and declares every kernel with
/// its shapes and dtypes in comments, with `target`'s runtime arguments.
void emitHeader(llvm::ArrayRef<KernelSignature> kernels,
                llvm::StringRef sourceName, llvm::raw_ostream &os,
                CompileTarget target = CompileTarget::Cpu);

} // namespace attnc

#endif // ATTNC_CODEGEN_HEADER_H
