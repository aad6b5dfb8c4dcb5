// Graph-level passes over the attn dialect.
#ifndef ATTNC_PASSES_PASSES_H
#define ATTNC_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"

namespace attnc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace attnc

#endif // ATTNC_PASSES_PASSES_H
