// Passes of the code generator and the pipelines built from them.
#ifndef ATTNC_CODEGEN_PASSES_H
#define ATTNC_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace attnc {

#define GEN_PASS_DECL
#include "codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/Passes.h.inc"

/// The CPU pipeline, from attn ops on tensors to the LLVM dialect, in
/// stages that attnc-opt also exposes (attnc-cpu-bufferize,
/// attnc-cpu-to-llvm, and attnc-cpu-pipeline for all of them).
void buildCpuBufferizePipeline(mlir::OpPassManager &pm);
void buildCpuToLLVMPipeline(mlir::OpPassManager &pm);
void buildCpuPipeline(mlir::OpPassManager &pm);
void registerCpuPipelines();

} // namespace attnc

#endif // ATTNC_CODEGEN_PASSES_H
