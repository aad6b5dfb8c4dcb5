// The registered pass pipelines: one per target from a spec's attn ops to
// the LLVM dialect (attnc-pipeline{target=cpu ...}, what `attnc compile`
// and the JIT run through the compile library), and its CPU stages, so that
// attnc-opt reproduces any stage of a compile for lit.
#ifndef ATTNC_CODEGEN_PIPELINES_H
#define ATTNC_CODEGEN_PIPELINES_H

#include "codegen/Passes.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassOptions.h"

namespace attnc {

/// The targets a spec compiles for.
enum class CompileTarget { Cpu, Vulkan, Cuda };

/// The options of every attnc pipeline; a stage reads those of its stage.
struct AttncPipelineOptions
    : public mlir::PassPipelineOptions<AttncPipelineOptions> {
  Option<CompileTarget> target{
      *this, "target", llvm::cl::desc("The target the kernels run on"),
      llvm::cl::init(CompileTarget::Cpu),
      llvm::cl::values(
          clEnumValN(CompileTarget::Cpu, "cpu",
                     "CPU object code (attn-lower-cpu)"),
          clEnumValN(CompileTarget::Vulkan, "vulkan",
                     "SPIR-V kernels (attn-lower-gpu) embedded in host code "
                     "that runs them through the runtime's Vulkan part"),
          clEnumValN(CompileTarget::Cuda, "cuda",
                     "NVIDIA kernels (attn-lower-gpu through NVVM, a fatbin "
                     "of cubin and PTX) embedded in host code that runs "
                     "them through the runtime's CUDA part"))};
  // The graph stage (buildGraphPipeline, attn-keep-entry-points).
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse attention chains (attn-fuse)"),
                    llvm::cl::init(true)};
  Option<bool> backward{
      *this, "backward",
      llvm::cl::desc("Derive @f_fwd and @f_bwd (attn-derive-backward)"),
      llvm::cl::init(true)};
  Option<EntryPoints> entryPoints{
      *this, "entry-points",
      llvm::cl::desc("Which entry points to emit (attn-keep-entry-points)"),
      llvm::cl::init(EntryPoints::All),
      llvm::cl::values(
          clEnumValN(EntryPoints::All, "all", "every entry point"),
          clEnumValN(EntryPoints::Forward, "forward", "@f and @f_fwd"),
          clEnumValN(EntryPoints::Backward, "backward", "@f_bwd"))};
  // The CPU stage.
  Option<int64_t> vectorBits{
      *this, "vector-bits",
      llvm::cl::desc("The target's vector register width: 512, 256 or 128"),
      llvm::cl::init(512)};
  Option<bool> amx{*this, "amx",
                   llvm::cl::desc("The target has AMX bf16 tiles (and the "
                                  "OS grants them): bf16 forwards and "
                                  "backwards use them"),
                   llvm::cl::init(false)};
  Option<bool> dotBf16{*this, "dot-bf16",
                       llvm::cl::desc("The target has AVX-512 BF16: bf16 "
                                      "forwards and backwards without AMX "
                                      "use its dot products, and f32 to "
                                      "bf16 vector conversions its "
                                      "vcvtneps2bf16"),
                       llvm::cl::init(false)};
  Option<int64_t> threads{
      *this, "threads",
      llvm::cl::desc("At most this many threads per parallel loop (0: the "
                     "runtime's default, ATTNC_NUM_THREADS or one per core)"),
      llvm::cl::init(0)};
  // The Vulkan stage.
  Option<std::string> spirvTargetEnv{
      *this, "spirv-target-env",
      llvm::cl::desc("The #spirv.target_env the Vulkan kernels are compiled "
                     "for (default: a Vulkan 1.1 device with subgroup "
                     "arithmetic and 16-bit storage)"),
      llvm::cl::init(kDefaultVulkanTargetEnv)};
  // The CUDA stage.
  Option<std::string> gpuArch{
      *this, "gpu-arch",
      llvm::cl::desc("The NVIDIA architecture the CUDA kernels are compiled "
                     "for: sm_80 (Ampere and later, through the PTX) or "
                     "sm_90a (Hopper)"),
      llvm::cl::init("sm_80")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("The CUDA toolkit (ptxas, fatbinary, libdevice)"),
      llvm::cl::init("/usr/local/cuda")};
  Option<std::string> gpuBinary{
      *this, "gpu-binary",
      llvm::cl::desc("What the CUDA kernels are embedded as: fatbin (a "
                     "cubin for gpu-arch and its PTX), cubin, or ptx (no "
                     "ptxas needed; the driver compiles it when loaded)"),
      llvm::cl::init("fatbin")};
  Option<bool> tensorCores{
      *this, "tensor-cores",
      llvm::cl::desc("The CUDA kernels of f16 and bf16 attention use tensor "
                     "cores (mma.sync; else the portable kernels of the GPU "
                     "layer)"),
      llvm::cl::init(true)};
  Option<bool> gpuAtomicDq{
      *this, "gpu-atomic-dq",
      llvm::cl::desc("The CUDA tensor-core backward adds dQ with atomics in "
                     "the dK/dV kernel (fewer products; its last bits vary "
                     "run to run) instead of a deterministic dQ kernel"),
      llvm::cl::init(false)};
};

/// The whole compile of `options.target`: the graph stage, the entry points
/// kept, then the target's lowering to the LLVM dialect.
void buildAttncPipeline(mlir::OpPassManager &pm,
                        const AttncPipelineOptions &options);

/// The stages (the compile library runs them one after the other and reads
/// the derived kernels' signatures in between).
void buildGraphStage(mlir::OpPassManager &pm,
                     const AttncPipelineOptions &options);
void buildTargetStage(mlir::OpPassManager &pm,
                      const AttncPipelineOptions &options);

/// The CPU lowering, from attn ops on tensors to the LLVM dialect, and its
/// two halves: attn ops -> linalg -> bufferized C entry points with status
/// codes, then loops -> LLVM dialect.
void buildCpuPipeline(mlir::OpPassManager &pm,
                      const AttncPipelineOptions &options);
void buildCpuBufferizePipeline(mlir::OpPassManager &pm,
                               const AttncPipelineOptions &options);
void buildCpuToLLVMPipeline(mlir::OpPassManager &pm,
                            const AttncPipelineOptions &options);

/// The Vulkan lowering, from attn ops on tensors to the LLVM dialect of the
/// host code with the SPIR-V kernels embedded, and its stages: attn ops ->
/// GPU flash kernels and linalg -> bufferized host functions whose work is
/// in gpu.launch ops (attnc-gpu-bufferize, shared by the GPU targets); the
/// kernels outlined and converted to SPIR-V (attnc-vulkan-to-spirv); the
/// host code calling the runtime, lowered to the LLVM dialect.
void buildVulkanPipeline(mlir::OpPassManager &pm,
                         const AttncPipelineOptions &options);
void buildGpuBufferizePipeline(mlir::OpPassManager &pm,
                               const AttncPipelineOptions &options);
void buildVulkanToSpirvPipeline(mlir::OpPassManager &pm,
                                const AttncPipelineOptions &options);

/// The CUDA lowering, from attn ops on tensors to the LLVM dialect of the
/// host code with the kernels' fatbin embedded, and its NVVM stage:
/// attnc-gpu-bufferize, then the kernels outlined, lowered to NVVM and
/// serialized (attnc-cuda-to-nvvm), then the host code calling the runtime.
void buildCudaPipeline(mlir::OpPassManager &pm,
                       const AttncPipelineOptions &options);
void buildCudaToNvvmPipeline(mlir::OpPassManager &pm,
                             const AttncPipelineOptions &options);

/// Registers attnc-pipeline, attnc-cpu-pipeline, attnc-cpu-bufferize and
/// attnc-cpu-to-llvm.
void registerAttncPipelines();

} // namespace attnc

#endif // ATTNC_CODEGEN_PIPELINES_H
