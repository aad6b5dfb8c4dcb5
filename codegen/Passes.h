// Passes of the code generator.
#ifndef ATTNC_CODEGEN_PASSES_H
#define ATTNC_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace attnc {

#define GEN_PASS_DECL
#include "codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/Passes.h.inc"

} // namespace attnc

#endif // ATTNC_CODEGEN_PASSES_H
