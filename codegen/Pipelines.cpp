// The registered pipelines (see Pipelines.h).
#include "codegen/Pipelines.h"

#include "codegen/Passes.h"
#include "passes/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRVPass.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

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

/// Tensors to buffers, every function's results as out-parameters.
static void addBufferization(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(createAttnDistinctReturnedBuffers());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createAttnElideResultCopies());
}

/// bufferization::buildBufferDeallocationPipeline, with canonicalizers
/// that do not simplify regions (see structuredCleanup).
static void addDeallocation(OpPassManager &pm) {
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

void buildCpuBufferizePipeline(OpPassManager &pm,
                               const AttncPipelineOptions &options) {
  AttnPlanTilesOptions plan;
  plan.vectorBits = options.vectorBits;
  plan.amx = options.amx;
  plan.dotBf16 = options.dotBf16;
  pm.addPass(createAttnPlanTiles(plan));
  pm.addPass(createAttnMarkLengthBounds());
  AttnLowerCpuOptions lower;
  lower.vectorBits = options.vectorBits;
  pm.addPass(createAttnLowerCpu(lower));
  pm.addPass(createAttnLowerToLinalg());
  // Gradient accumulation adds whole tensors with arith.addf.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  pm.addPass(createLinalgElementwiseOpFusionPass());
  addBufferization(pm);
  pm.addPass(createAttnExportAbi());
  addDeallocation(pm);
}

void buildCpuToLLVMPipeline(OpPassManager &pm,
                            const AttncPipelineOptions &options) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // math.ipowi and math.fpowi as calls of generated functions (of scalars,
  // once per lane): LLVM has no integer power, and its powi takes a scalar
  // exponent.
  pm.addPass(createConvertMathToFuncs());
  // vcvtneps2bf16 where the target has it (before arith-expand's integer
  // rounding takes the rest).
  if (options.dotBf16)
    pm.addPass(createAttnX86Bf16Conversions());
  arith::ArithExpandOpsPassOptions expand;
  // bf16 conversions as integer ops: no libgcc helper or bf16 ISA needed.
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // Math first: what has no LLVM intrinsic becomes libm calls, lane by lane
  // for vectors (math.asinh on a flash kernel's 16 lanes), through
  // vector.extract and insert that vector-to-llvm then lowers (after it,
  // they were left for the translation to LLVM IR, which has none).
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.x86Vector = true; // vscalefps, vdpbf16ps (codegen/cpu)
  vectorToLLVM.amx = true;       // tiles (codegen/cpu/FlashForwardAmx.cpp)
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  // Scratch through the runtime's block cache (runtime/Workspace.c).
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // math.rsqrt's vector expansion leaves ub.poison placeholders.
  pm.addPass(createUBToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcToLLVM;
  // Plain `int32_t f(float *, ...)` entry points (TOOLCHAIN.md).
  funcToLLVM.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  // Branches through convert-to-llvm with AMX's interface beside cf's: the
  // AMX backward carries tiles through loops (block arguments of
  // !amx.tile), whose type convert-cf-to-llvm's converter does not know.
  ConvertToLLVMPassOptions cfToLLVM;
  cfToLLVM.filterDialects = {"cf", "amx"};
  pm.addPass(createConvertToLLVMPass(cfToLLVM));
  pm.addPass(createReconcileUnrealizedCastsPass());
  AttnLowerParallelCallsOptions parallelCalls;
  parallelCalls.threads = options.threads;
  // Entry points of a dynamic batch loop over its entries (on the thread
  // pool where there are enough of them).
  pm.addPass(createAttnBatchEntries());
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

void buildGpuBufferizePipeline(OpPassManager &pm,
                               const AttncPipelineOptions &options) {
  bool tensorCores =
      options.target == CompileTarget::Cuda && options.tensorCores;
  AttnPlanGpuTilesOptions plan;
  plan.tensorCores = tensorCores;
  // wgmma is sm_90a's alone (not in later architectures' PTX).
  plan.wgmma = tensorCores && options.gpuArch == "sm_90a";
  plan.atomicDq = options.gpuAtomicDq;
  pm.addPass(createAttnPlanGpuTiles(plan));
  pm.addPass(createAttnLowerGpu());
  if (tensorCores)
    pm.addPass(createAttnLowerCudaMma());
  pm.addPass(createAttnLowerToLinalg());
  pm.addPass(createAttnGpuMaterializeConstants());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  pm.addPass(createLinalgElementwiseOpFusionPass());
  addBufferization(pm);
  // Loops that yield the buffer they got (capture gradients accumulated
  // in order) drop that result: run on the device, they have none.
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  // What the flash kernels leave on the host (projections, merges, their
  // gradients, the unfused ops) becomes kernels too: upstream's parallel
  // loops mapped to workgroups of 64 threads.
  pm.addPass(createAttnGpuCopiesToLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(
      createParallelLoopTilingPass({64}, /*noMinMaxBounds=*/true));
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  AttnGpuHostContextOptions hostContext;
  // CUDA entry points take the stream their work is queued on.
  hostContext.stream = options.target == CompileTarget::Cuda;
  pm.addPass(createAttnGpuHostContext(hostContext));
}

void buildVulkanToSpirvPipeline(OpPassManager &pm,
                                const AttncPipelineOptions &options) {
  pm.addPass(createAttnSpirvBf16Storage());
  pm.addPass(createAttnGpuSinkConstants());
  pm.addPass(createAttnVulkanLoopTrap());
  pm.addPass(createGpuKernelOutliningPass());
  // No bf16 may reach convert-gpu-to-spirv (attn-spirv-bf16-storage):
  // arithmetic on it in f32, conversions to and from it as integer ops.
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  emulate.targetTypeStr = "f32";
  kernels.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  kernels.addPass(arith::createArithExpandOpsPass(expand));
  kernels.addPass(createAttnSpirvSignExtend());
  kernels.addPass(createAttnSpirvMath());
  kernels.addPass(createCanonicalizerPass());
  AttnSpirvAttachTargetOptions attach;
  attach.targetEnv = options.spirvTargetEnv;
  pm.addPass(createAttnSpirvAttachTarget(attach));
  pm.addPass(createLowerAffinePass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertMathToSPIRVPass());
  // It maps the kernels' memory spaces to storage classes itself (and only
  // theirs: the host keeps plain memrefs).
  pm.addPass(createConvertGPUToSPIRVPass(/*mapMemorySpace=*/true));
  OpPassManager &spirvModule = pm.nest<spirv::ModuleOp>();
  spirvModule.addPass(spirv::createSPIRVLowerABIAttributesPass());
  spirvModule.addPass(spirv::createSPIRVUpdateVCEPass());
  spirvModule.addPass(createCanonicalizerPass());
}

/// A GPU target's lowering: the shared bufferize stage, C entry points that
/// return the runtime's `finish` status, the target's kernel stage
/// (`buildKernels`), its host lowering, then the host's LLVM lowering.
static void buildGpuTargetPipeline(
    OpPassManager &pm, const AttncPipelineOptions &options, StringRef finish,
    void (*buildKernels)(OpPassManager &, const AttncPipelineOptions &),
    std::unique_ptr<Pass> lowerHost) {
  buildGpuBufferizePipeline(pm, options);
  AttnExportAbiOptions exportAbi;
  exportAbi.gpuFinish = finish.str();
  pm.addPass(createAttnExportAbi(exportAbi));
  // attn-gpu-host-context releases the device buffers (upstream's
  // deallocation would also walk into the kernels, whose subgroup
  // operations declare no memory effects).
  pm.addPass(createCanonicalizerPass(structuredCleanup()));
  buildKernels(pm, options);
  pm.addPass(std::move(lowerHost));
  buildCpuToLLVMPipeline(pm, options);
}

void buildVulkanPipeline(OpPassManager &pm,
                         const AttncPipelineOptions &options) {
  buildGpuTargetPipeline(pm, options, "attnc_vk_finish",
                         buildVulkanToSpirvPipeline,
                         createAttnVulkanLowerHost());
}

void buildCudaToNvvmPipeline(OpPassManager &pm,
                             const AttncPipelineOptions &options) {
  pm.addPass(createAttnGpuSinkConstants());
  pm.addPass(createAttnGpuWorkgroupAttributions());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createAttnGpuMergeModules());
  pm.addPass(createAttnCudaMinBlocks());
  // TOOLCHAIN.md: sm_90a needs PTX 8.0; libdevice gives math.exp & co.
  GpuNVVMAttachTargetOptions attach;
  attach.chip = options.gpuArch;
  attach.features = "+ptx80";
  // LLVM's -O3 unrolled the D = 128 dK/dV kernel's loops into 255
  // registers and 1240 bytes of spills (sm_90a); -O2 gave 90 and none.
  attach.optLevel = 2;
  attach.linkLibs.push_back(options.cudaPath +
                            "/nvvm/libdevice/libdevice.10.bc");
  pm.addPass(createGpuNVVMAttachTarget(attach));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  AttnGpuFixedSubgroupsOptions warps;
  warps.size = 32;
  kernels.addPass(createAttnGpuFixedSubgroups(warps));
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  // The tensor-core kernels' ldmatrix and cp.async.
  kernels.addPass(createConvertNVGPUToNVVMPass());
  ConvertGpuOpsToNVVMOpsOptions toNvvm;
  // Kernels take plain pointers (their buffers have static shapes).
  toNvvm.useBarePtrCallConv = true;
  kernels.addPass(createConvertGpuOpsToNVVMOps(toNvvm));
  // What libdevice does not cover (math.trunc) as LLVM intrinsics.
  kernels.addPass(createConvertMathToLLVMPass());
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCanonicalizerPass(structuredCleanup()));
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.cudaPath;
  // gpu-module-to-binary's names of attnc's fatbin, cubin and ptx.
  binary.compilationTarget = llvm::StringSwitch<std::string>(options.gpuBinary)
                                 .Case("cubin", "bin")
                                 .Case("ptx", "isa")
                                 .Default(options.gpuBinary);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void buildCudaPipeline(OpPassManager &pm, const AttncPipelineOptions &options) {
  buildGpuTargetPipeline(pm, options, "attnc_cuda_finish",
                         buildCudaToNvvmPipeline, createAttnCudaLowerHost());
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
  case CompileTarget::Vulkan:
    buildVulkanPipeline(pm, options);
    return;
  case CompileTarget::Cuda:
    buildCudaPipeline(pm, options);
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
      "attnc-vulkan-pipeline",
      "The Vulkan stage of attnc-pipeline (fused attn ops to the LLVM "
      "dialect of host code with SPIR-V kernels embedded); reads "
      "spirv-target-env",
      buildVulkanPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-gpu-bufferize",
      "attn ops -> GPU kernels and linalg -> bufferized host functions "
      "whose work is in gpu.launch ops (the GPU targets' first stage)",
      buildGpuBufferizePipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-vulkan-to-spirv",
      "gpu.launch ops -> outlined kernels converted to spirv.module ops",
      buildVulkanToSpirvPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cuda-pipeline",
      "The CUDA stage of attnc-pipeline (fused attn ops to the LLVM dialect "
      "of host code with the kernels' fatbin embedded); reads gpu-arch, "
      "cuda-path and gpu-binary",
      buildCudaPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cuda-to-nvvm",
      "gpu.launch ops -> outlined kernels lowered to NVVM and serialized "
      "into gpu.binary ops by gpu-module-to-binary",
      buildCudaToNvvmPipeline);
  PassPipelineRegistration<AttncPipelineOptions>(
      "attnc-cpu-to-llvm",
      "bufferized loops -> LLVM dialect (the second half of "
      "attnc-cpu-pipeline)",
      buildCpuToLLVMPipeline);
}

} // namespace attnc
