// TargetMachine creation, LLVM IR translation and object emission.
#include "codegen/Target.h"

#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

namespace attnc {

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const TargetOptions &options) {
  static const bool initialized = [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    return true;
  }();
  (void)initialized;

  llvm::Triple triple(options.triple.empty()
                          ? llvm::sys::getDefaultTargetTriple()
                          : llvm::Triple::normalize(options.triple));
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return makeError("unknown target '" + triple.str() + "': " + error);

  // "cpu[,+feature|-feature...]": the modifiers after the CPU's own
  // features (e.g. "native,-amx-tile" for the host without AMX).
  auto [cpuName, modifiers] = llvm::StringRef(options.cpu).split(',');
  std::string cpu = cpuName.str(), features;
  llvm::SubtargetFeatures featureSet;
  // The host CPU means nothing for another target: use its generic CPU.
  if (cpu == "native" &&
      triple != llvm::Triple(llvm::Triple::normalize(
                    llvm::sys::getDefaultTargetTriple())))
    cpu = "generic";
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      featureSet.AddFeature(feature.first(), feature.second);
  }
  if (triple.isNVPTX() || triple.isAMDGPU() || triple.isSPIRV())
    return makeError("'" + triple.str() +
                     "' is a GPU target; attnc compile emits CPU code only");
  // Check the CPU first: LLVM itself only warns about an unknown one.
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "", ""));
  if (cpu != "native" && cpu != "generic" &&
      (!info || !info->isCPUStringValid(cpu)))
    return makeError("unknown CPU '" + cpu + "' for target '" + triple.str() +
                     "'");
  while (!modifiers.empty()) {
    auto [modifier, rest] = modifiers.split(',');
    modifiers = rest;
    llvm::StringRef name = modifier.drop_front();
    if ((!modifier.starts_with("+") && !modifier.starts_with("-")) || !info ||
        !llvm::is_contained(llvm::map_range(info->getAllProcessorFeatures(),
                                            [](const auto &feature) {
                                              return llvm::StringRef(
                                                  feature.Key);
                                            }),
                            name))
      return makeError("'" + modifier.str() + "' in CPU '" + options.cpu +
                       "' must be +name or -name of a feature of '" +
                       triple.str() + "'");
    featureSet.AddFeature(name, modifier.starts_with("+"));
  }
  features = featureSet.getString();
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      options.optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
      : options.optLevel == 0 ? llvm::CodeGenOptLevel::None
                              : llvm::CodeGenOptLevel::Default));
  if (!machine)
    return makeError("cannot create a target machine for '" + triple.str() +
                     "'");
  return machine;
}

std::string featuresMissingOnHost(llvm::TargetMachine &machine) {
  const llvm::MCSubtargetInfo *info = machine.getMCSubtargetInfo();
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::string missing;
  for (const llvm::SubtargetFeatureKV &feature :
       info->getAllProcessorFeatures()) {
    // Only ISA features the host reports; tuning flags are not listed.
    auto it = host.find(feature.Key);
    if (it == host.end() || it->second ||
        !info->getFeatureBits().test(feature.Value))
      continue;
    missing += (missing.empty() ? "" : ",") + std::string(feature.Key);
  }
  return missing;
}

int64_t vectorRegisterBits(llvm::TargetMachine &machine) {
  const llvm::MCSubtargetInfo *info = machine.getMCSubtargetInfo();
  if (!machine.getTargetTriple().isX86())
    return 128;
  if (info->checkFeatures("+avx512f"))
    return 512;
  return info->checkFeatures("+avx") ? 256 : 128;
}

bool hasAvx512Bf16(llvm::TargetMachine &machine) {
  return machine.getTargetTriple().isX86() &&
         machine.getMCSubtargetInfo()->checkFeatures("+avx512bf16");
}

bool hasAmxBf16(llvm::TargetMachine &machine) {
  return machine.getTargetTriple().isX86() &&
         machine.getMCSubtargetInfo()->checkFeatures("+amx-tile,+amx-bf16");
}

/// The -O1 pipeline, in `opt -passes=` syntax: the inliner's CGSCC walk
/// (callees simplified before they are inlined into the task wrappers) with
/// the scalar cleanups the kernels need (SROA, CSE, InstCombine, LICM and
/// loop rotation, loop idioms, induction variables). It is what LLVM's O1
/// does for these kernels less the passes that found nothing in them (IPSCCP,
/// reassociation, unswitching, SCCP/BDCE/ADCE, the vectorizers' late
/// pipeline): the flash forward and backward came out within 2% of O1's
/// instruction count and ran as fast (interleaved A/B on 6 specs), for 15%
/// less JIT work (mha_causal 2.03 -> 1.72 G instructions). Loop idiom
/// recognition stays: without its memset/memcpy calls, AMX kernels got a
/// second tile configuration (ldtilecfg) after the per-row log call. Without
/// IndVarSimplify kernels ran 1-2% slower.
static constexpr llvm::StringLiteral kLeanPipeline =
    "cgscc(devirt<4>(inline,function-attrs,function("
    "sroa,early-cse<memssa>,simplifycfg,"
    "instcombine<max-iterations=1;no-verify-fixpoint>,"
    "loop-mssa(licm<no-allowspeculation>,loop-rotate,licm<allowspeculation>),"
    "simplifycfg,instcombine<max-iterations=1;no-verify-fixpoint>,"
    "loop(loop-idiom,indvars,loop-deletion)))),"
    "globaldce";

llvm::Expected<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &llvmContext,
                  llvm::TargetMachine &machine, unsigned optLevel) {
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return makeError("translation to LLVM IR failed");
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  if (optLevel == 0)
    return llvmModule;
  // -O2/-O3: LLVM's default pipeline, minus loop unrolling and
  // interleaving: the kernels are register-blocked already and unroll their
  // own inner loops (KernelBuilder::unroll); LLVM's unrolling only
  // multiplied the code (it took half of opt and llc's time, mha_causal
  // 1.6 s -> 0.3 s). The vectorizers stay for the unfused loops.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  llvm::ModulePassManager passes;
  if (optLevel == 1) {
    if (llvm::Error error = builder.parsePassPipeline(passes, kLeanPipeline))
      return error;
  } else {
    passes = builder.buildPerModuleDefaultPipeline(
        optLevel == 2 ? llvm::OptimizationLevel::O2
                      : llvm::OptimizationLevel::O3);
  }
  passes.run(*llvmModule, modules);
  return llvmModule;
}

llvm::Error emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine,
                            llvm::raw_pwrite_stream &os, bool assembly) {
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, os, nullptr,
                                  assembly ? llvm::CodeGenFileType::AssemblyFile
                                           : llvm::CodeGenFileType::ObjectFile))
    return makeError("the target cannot emit this file type");
  passes.run(module);
  return llvm::Error::success();
}

} // namespace attnc
