// The compile library (see Compile.h).
#include "codegen/Compile.h"

#include "attnc/runtime.h"
#include "codegen/Target.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

namespace attnc {

Compiler::Compiler(const CompileOptions &options,
                   std::unique_ptr<llvm::TargetMachine> machine)
    : options(options), machine(std::move(machine)) {
  vectorBits = vectorRegisterBits(*this->machine);
  // AMX needs the OS's leave too: code for this process asks now and plans
  // without AMX if it is denied; an object's entry points ask when called.
  amx = hasAmxBf16(*this->machine) &&
        (!options.forThisProcess || attnc_amx_init() == 0);
  dotBf16 = hasAvx512Bf16(*this->machine);
}

Compiler::Compiler(Compiler &&) = default;
Compiler &Compiler::operator=(Compiler &&) = default;
Compiler::~Compiler() = default;

/// Checks the CUDA options and finds the toolkit: the first of cudaPath,
/// CUDA_HOME, CUDA_PATH and /usr/local/cuda, which must hold libdevice and,
/// unless the kernels are embedded as PTX, ptxas (and fatbinary).
static llvm::Error resolveCudaToolkit(CompileOptions &options) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  // sm_80 to sm_89 (mma.sync), sm_90 and sm_90a (Hopper; the suffix
  // allows wgmma and TMA), and later architectures through sm_80's code.
  llvm::StringRef digits = options.gpuArch;
  unsigned sm = 0;
  if (!digits.consume_front("sm_") ||
      (digits.consume_back("a"), digits.getAsInteger(10, sm)) || sm < 80)
    return error("--gpu-arch must be an NVIDIA architecture sm_80 or later "
                 "(such as sm_80, sm_90a); got '" +
                 options.gpuArch + "'");
  if (options.gpuBinary != "fatbin" && options.gpuBinary != "cubin" &&
      options.gpuBinary != "ptx")
    return error("--gpu-binary must be fatbin, cubin or ptx; got '" +
                 options.gpuBinary + "'");
  if (options.cudaPath.empty()) {
    for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
      if (std::optional<std::string> value =
              llvm::sys::Process::GetEnv(variable);
          value && !value->empty()) {
        options.cudaPath = *value;
        break;
      }
    if (options.cudaPath.empty())
      options.cudaPath = "/usr/local/cuda";
  }
  llvm::SmallVector<std::string> needed = {"nvvm/libdevice/libdevice.10.bc"};
  if (options.gpuBinary != "ptx")
    needed.push_back("bin/ptxas");
  if (options.gpuBinary == "fatbin")
    needed.push_back("bin/fatbinary");
  for (const std::string &file : needed) {
    llvm::SmallString<256> path(options.cudaPath);
    llvm::sys::path::append(path, file);
    if (!llvm::sys::fs::exists(path))
      return error("the CUDA toolkit at '" + options.cudaPath + "' has no " +
                   file + " (give --cuda-path, or set CUDA_HOME" +
                   (options.gpuBinary == "ptx"
                        ? ")"
                        : "; --gpu-binary=ptx needs only libdevice)"));
  }
  return llvm::Error::success();
}

llvm::Expected<Compiler> Compiler::create(const CompileOptions &options) {
  if (options.optLevel > 3)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "-O must be 0, 1, 2 or 3");
  TargetOptions target;
  target.triple = options.triple;
  target.cpu = options.cpu;
  target.optLevel = options.optLevel;
  auto machine = createTargetMachine(target);
  if (!machine)
    return machine.takeError();
  if (options.forThisProcess) {
    std::string missing = featuresMissingOnHost(**machine);
    if (!missing.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "CPU '" + options.cpu +
                                         "' uses features this host lacks (" +
                                         missing + "): JIT code must run here");
  }
  CompileOptions resolved = options;
  if (options.target == CompileTarget::Cuda)
    if (llvm::Error error = resolveCudaToolkit(resolved))
      return std::move(error);
  return Compiler(resolved, std::move(*machine));
}

void Compiler::fillPipelineOptions(AttncPipelineOptions &pipeline) const {
  pipeline.target = options.target;
  pipeline.fuse = options.fuse;
  pipeline.backward = options.backward;
  pipeline.entryPoints = options.entryPoints;
  pipeline.vectorBits = vectorBits;
  pipeline.amx = amx;
  pipeline.dotBf16 = dotBf16;
  if (!options.spirvTargetEnv.empty())
    pipeline.spirvTargetEnv = options.spirvTargetEnv;
  pipeline.gpuArch = options.gpuArch;
  if (!options.cudaPath.empty())
    pipeline.cudaPath = options.cudaPath;
  pipeline.gpuBinary = options.gpuBinary;
  pipeline.tensorCores = options.tensorCores;
  pipeline.gpuAtomicDq = options.gpuAtomicDq;
  pipeline.threads = std::max<int64_t>(options.threads, 0);
}

std::string Compiler::pipeline() const {
  AttncPipelineOptions pipeline;
  fillPipelineOptions(pipeline);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "builtin.module(attnc-pipeline";
  pipeline.print(os);
  os << ")";
  return text;
}

FailureOr<Spec> Compiler::lower(llvm::SourceMgr &sourceMgr,
                                MLIRContext &context) const {
  FailureOr<Spec> spec = parseSpec(sourceMgr, context);
  if (failed(spec))
    return failure();
  if (options.target != CompileTarget::Cpu)
    for (const KernelSignature &kernel : spec->kernels)
      if (llvm::any_of(kernel.args,
                       [](const KernelArg &arg) { return arg.batched; }))
        return spec->module->lookupSymbol(kernel.name)->emitError()
               << "@" << kernel.name
               << " takes a dynamic batch (`?`), which only the CPU target "
                  "compiles for now: give the batch statically for "
               << (options.target == CompileTarget::Cuda ? "--target=cuda"
                                                         : "--target=vulkan");
  AttncPipelineOptions pipeline;
  fillPipelineOptions(pipeline);
  // attnc-pipeline in its two stages: the derived kernels' signatures are
  // read in between, while @f_fwd and @f_bwd are still on tensors.
  PassManager graph(&context);
  graph.enableVerifier(options.verifyEachPass);
  buildGraphStage(graph, pipeline);
  if (failed(graph.run(*spec->module)))
    return failure();
  if (options.backward)
    appendDerivedSignatures(*spec);
  PassManager target(&context);
  target.enableVerifier(options.verifyEachPass);
  buildTargetStage(target, pipeline);
  if (failed(target.run(*spec->module)))
    return failure();
  if (!options.verifyEachPass && failed(verify(*spec->module)))
    return failure();
  return spec;
}

llvm::Expected<std::unique_ptr<llvm::Module>>
Compiler::translate(ModuleOp module, llvm::LLVMContext &llvmContext) const {
  return translateToLLVMIR(module, llvmContext, *machine, options.optLevel);
}

llvm::Error Compiler::emit(llvm::Module &module, llvm::raw_pwrite_stream &os,
                           bool assembly) const {
  return emitMachineCode(module, *machine, os, assembly);
}

} // namespace attnc
