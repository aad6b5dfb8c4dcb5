// The compile library (see Compile.h).
#include "codegen/Compile.h"

#include "attnc/runtime.h"
#include "codegen/Target.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/IR/Module.h"
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
}

Compiler::Compiler(Compiler &&) = default;
Compiler &Compiler::operator=(Compiler &&) = default;
Compiler::~Compiler() = default;

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
  return Compiler(options, std::move(*machine));
}

void Compiler::fillPipelineOptions(AttncPipelineOptions &pipeline) const {
  pipeline.target = options.target;
  pipeline.fuse = options.fuse;
  pipeline.backward = options.backward;
  pipeline.entryPoints = options.entryPoints;
  pipeline.vectorBits = vectorBits;
  pipeline.amx = amx;
  if (!options.spirvTargetEnv.empty())
    pipeline.spirvTargetEnv = options.spirvTargetEnv;
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
