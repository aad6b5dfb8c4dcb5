// The compile library: the one place a spec's compile is assembled, from
// its text to LLVM-dialect entry points, LLVM IR and machine code. `attnc
// compile`, and through the JIT `attnc run`, `attnc bench` and host
// programs, call it; it runs the registered attnc-pipeline, so that
// `attnc-opt --attnc-pipeline{...}` reproduces any compile (Compiler::
// pipeline() gives the exact options).
#ifndef ATTNC_CODEGEN_COMPILE_H
#define ATTNC_CODEGEN_COMPILE_H

#include "codegen/Pipelines.h"
#include "codegen/Spec.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class SourceMgr;
class TargetMachine;
} // namespace llvm

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace attnc {

struct CompileOptions {
  CompileTarget target = CompileTarget::Cpu;
  /// Vulkan: the #spirv.target_env the kernels are compiled for; empty:
  /// kDefaultVulkanTargetEnv.
  std::string spirvTargetEnv;
  /// CUDA: the architecture (sm_80, sm_90a), the toolkit (empty: CUDA_HOME,
  /// CUDA_PATH, else /usr/local/cuda) and what the kernels are embedded as
  /// (fatbin, cubin, ptx).
  std::string gpuArch = "sm_80";
  std::string cudaPath;
  std::string gpuBinary = "fatbin";
  /// CUDA: f16 and bf16 attention on tensor cores (else the portable GPU
  /// kernels).
  bool tensorCores = true;
  /// CUDA: the tensor-core backward adds dQ with atomics (else a
  /// deterministic dQ kernel).
  bool gpuAtomicDq = false;
  /// The target triple of the CPU code (for GPU targets, the host code);
  /// empty: the host's.
  std::string triple;
  /// "native": the host CPU and its features; else an LLVM CPU name.
  std::string cpu = "native";
  /// LLVM's optimization level, 0 to 3 (Target.cpp: 1 is a lean pipeline).
  unsigned optLevel = 3;
  /// At most this many threads per parallel loop; 0: the runtime's default.
  int64_t threads = 0;
  bool fuse = true;
  bool backward = true;
  EntryPoints entryPoints = EntryPoints::All;
  /// The code runs in this process (the JIT): ISA features the host lacks
  /// are an error, and AMX tiles are planned only when the OS grants them.
  bool forThisProcess = false;
  /// Verify the IR after every pass; else once, after the pipeline (the
  /// JIT: verifying after each of ~30 passes took 40% of their time).
  bool verifyEachPass = true;
};

class Compiler {
public:
  /// A compiler for `options`: the target machine (an unknown triple or
  /// CPU, a GPU triple, or host features missing for forThisProcess are
  /// errors), the pipeline options it implies (vector width, AMX), and for
  /// CUDA the architecture and the toolkit's tools it needs.
  static llvm::Expected<Compiler> create(const CompileOptions &options);

  /// The pass pipeline this compile runs, as the textual pipeline
  /// `attnc-pipeline{...}` that attnc-opt takes.
  std::string pipeline() const;

  /// Parses and validates the spec in `sourceMgr`'s main buffer
  /// (parseSpec), runs attnc-pipeline on it to the LLVM dialect and gives
  /// the signatures of every entry point (derived ones included).
  /// Diagnostics go to `context`'s handler.
  mlir::FailureOr<Spec> lower(llvm::SourceMgr &sourceMgr,
                              mlir::MLIRContext &context) const;

  /// LLVM IR of a lowered module, optimized at the options' level.
  llvm::Expected<std::unique_ptr<llvm::Module>>
  translate(mlir::ModuleOp module, llvm::LLVMContext &llvmContext) const;

  /// Writes `module`'s object code, or its assembly.
  llvm::Error emit(llvm::Module &module, llvm::raw_pwrite_stream &os,
                   bool assembly) const;

  const CompileOptions &getOptions() const { return options; }

  Compiler(Compiler &&);
  Compiler &operator=(Compiler &&);
  ~Compiler();

private:
  Compiler(const CompileOptions &options,
           std::unique_ptr<llvm::TargetMachine> machine);
  void fillPipelineOptions(AttncPipelineOptions &pipeline) const;

  CompileOptions options;
  std::unique_ptr<llvm::TargetMachine> machine;
  int64_t vectorBits;
  bool amx;
  bool dotBf16; // AVX-512 BF16 where there is no AMX
};

} // namespace attnc

#endif // ATTNC_CODEGEN_COMPILE_H
