// The C header declaring a compiled spec's entry points.
#ifndef ATTNC_CODEGEN_HEADER_H
#define ATTNC_CODEGEN_HEADER_H

#include "codegen/Spec.h"

#include "llvm/Support/raw_ostream.h"

namespace attnc {

/// Writes a header that compiles as C and C++ and declares every kernel with
/// its shapes and dtypes in comments.
void emitHeader(llvm::ArrayRef<KernelSignature> kernels,
                llvm::StringRef sourceName, llvm::raw_ostream &os,
                bool vulkan = false);

} // namespace attnc

#endif // ATTNC_CODEGEN_HEADER_H
