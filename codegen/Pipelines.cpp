// The registered pipelines (see Pipelines.h).
#include "codegen/Pipelines.h"

#include "codegen/Passes.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace attnc {

/// The canonicalizer's configuration for this pipeline: without region
/// simplification (merging identical blocks, erasing unreachable ones),
/// which found nothing in the kernels' structured (scf) and LLVM-dialect
/// IR but took half of each canonicalizer's time.
static GreedyRewriteConfig structuredCleanup() {
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  return config;
}

void buildCpuBufferizePipeline(OpPassManager &pm,
                               const AttncPipelineOptions &options) {
  AttnPlanTilesOptions plan;
  plan.vectorBits = options.vectorBits;
  plan.amx = options.amx;
  pm.addPass(createAttnPlanTiles(plan));
  AttnLowerCpuOptions lower;
  lower.vectorBits = options.vectorBits;
  pm.addPass(createAttnLowerCpu(lower));
  pm.addPass(createAttnLowerToLinalg());
  // Gradient accumulation adds whole tensors with arith.addf.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  pm.addPass(createLinalgElementwiseOpFusionPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createAttnElideResultCopies());
  pm.addPass(createAttnExportAbi());
  // bufferization::buildBufferDeallocationPipeline, with canonicalizers
  // that do not simplify regions (see structuredCleanup).
  memref::ExpandReallocPassOptions expandRealloc;
  expandRealloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(expandRealloc));
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
}

void buildCpuToLLVMPipeline(OpPassManager &pm,
                            const AttncPipelineOptions &options) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // math.ipowi and math.fpowi as calls of generated functions (of scalars,
  // once per lane): LLVM has no integer power, and its powi takes a scalar
  // exponent.
  pm.addPass(createConvertMathToFuncs());
  arith::ArithExpandOpsPassOptions expand;
  // bf16 conversions as integer ops: no libgcc helper or bf16 ISA needed.
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true; // vscalefps (codegen/cpu/FastExp.cpp)
  vectorToLLVM.amx = true;       // tiles (codegen/cpu/FlashForwardAmx.cpp)
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  // Scratch through the runtime's block cache (runtime/Workspace.c).
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // math.rsqrt's vector expansion leaves ub.poison placeholders.
  pm.addPass(createUBToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcToLLVM;
  // Plain `int32_t f(float *, ...)` entry points (TOOLCHAIN.md).
  funcToLLVM.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  AttnLowerParallelCallsOptions parallelCalls;
  parallelCalls.threads = options.threads;
  pm.addPass(createAttnLowerParallelCalls(parallelCalls));
  // Folds the descriptor insert/extractvalue chains and duplicate constants
  // of the conversions (readable --emit=mlir and -O0 IR; LLVM's passes do
  // the same at -O1 and up).
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
}

void buildCpuPipeline(OpPassManager &pm, const AttncPipelineOptions &options) {
  buildCpuBufferizePipeline(pm, options);
  buildCpuToLLVMPipeline(pm, options);
}

void buildGraphStage(OpPassManager &pm, const AttncPipelineOptions &options) {
  buildGraphPipeline(pm, options.fuse, options.backward);
}

void buildTargetStage(OpPassManager &pm, const AttncPipelineOptions &options) {
  if (options.entryPoints != EntryPoints::All) {
    AttnKeepEntryPointsOptions keep;
    keep.entryPoints = options.entryPoints;
    pm.addPass(createAttnKeepEntryPoints(keep));
  }
  switch (options.target) {
  case CompileTarget::Cpu:
    buildCpuPipeline(pm, options);
    return;
  }
}

void buildAttncPipeline(OpPassManager &pm,
                        const AttncPipelineOptions &options) {
  buildGraphStage(pm, options);
  buildTargetStage(pm, options);
}

void registerAttncPipelines() {
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-pipeline",
      "What attnc compile runs: a spec's attn ops to the LLVM dialect of "
      "its entry points, for `target`",
      buildAttncPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cpu-pipeline",
      "The CPU stage of attnc-pipeline (fused attn ops to the LLVM dialect); "
      "reads vector-bits, amx and threads",
      buildCpuPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cpu-bufferize",
      "attn ops -> linalg -> bufferized C entry points with status codes "
      "(the first half of attnc-cpu-pipeline)",
      buildCpuBufferizePipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cpu-to-llvm",
      "bufferized loops -> LLVM dialect (the second half of "
      "attnc-cpu-pipeline)",
      buildCpuToLLVMPipeline);
}

} // namespace attnc
