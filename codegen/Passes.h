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

struct CpuPipelineOptions {
  /// At most this many threads per parallel loop; 0: the runtime's default.
  int64_t threads = 0;
  /// The target's vector register width (vectorRegisterBits), for the
  /// tile plans.
  int64_t vectorBits = 512;
  /// Whether the target has AMX bf16 tiles (hasAmxBf16): bf16 forward
  /// kernels use them.
  bool amx = false;
};

/// The CPU pipeline, from attn ops on tensors to the LLVM dialect, in
/// stages that attnc-opt also exposes (attnc-cpu-bufferize,
/// attnc-cpu-to-llvm, and attnc-cpu-pipeline for all of them, with the
/// default options).
void buildCpuBufferizePipeline(mlir::OpPassManager &pm,
                               const CpuPipelineOptions &options = {});
void buildCpuToLLVMPipeline(mlir::OpPassManager &pm,
                            const CpuPipelineOptions &options = {});
void buildCpuPipeline(mlir::OpPassManager &pm,
                      const CpuPipelineOptions &options = {});
void registerCpuPipelines();

} // namespace attnc

#endif // ATTNC_CODEGEN_PASSES_H
