// attnc-fuzz: a libFuzzer target over what `attnc compile` does with a spec's
// text: parse -> verify -> validate (parseSpec) -> attnc-pipeline to the LLVM
// dialect (Compiler::lower) -> LLVM IR (Compiler::translate), and with
// ATTNC_FUZZ_STAGES=emit LLVM's -O3 pipeline and object code
// (Compiler::emit). Built only in the sanitized build (ATTNC_SANITIZE), where
// attnc's code carries ASan, UBSan, assertions and the coverage that guides
// libFuzzer; Debian's libMLIR and libLLVM do not, so the MLIR parser and
// upstream passes run but do not guide the mutations.
//
//   tools/attnc-fuzz/run.sh 300      (seeds, dictionary, options; as CI)
//   build-san/bin/attnc-fuzz -dict=tools/attnc-fuzz/attn.dict CORPUS SEEDS
//   ATTNC_FUZZ_VERBOSE=1 build-san/bin/attnc-fuzz crash-<sha>   (one input)
//
// A finding is any crash, sanitizer report, assertion, timeout or
// out-of-memory, or a spec that lowers but does not translate (abort below).
// Diagnostics are not: an invalid spec is the common case. They are
// swallowed, since printing them would drown libFuzzer's output and cost
// throughput; ATTNC_FUZZ_VERBOSE=1 prints them.
//
// Environment:
//   ATTNC_FUZZ_CPU     the LLVM CPU compiled for (default sapphirerapids:
//                      AVX-512 and AMX, so the 512-bit and AMX-tile lowerings
//                      run whatever the host is; nothing compiled is run).
//   ATTNC_FUZZ_TARGET  cpu (default), vulkan (the GPU layer's kernels to
//                      SPIR-V, embedded in host code) or cuda (sm_90a, to
//                      PTX through NVVM; needs the CUDA toolkit's libdevice).
//   ATTNC_FUZZ_STAGES  the last stage: lower, translate (default) or emit.
//   ATTNC_FUZZ_VERBOSE 1: print the diagnostics.
//
// Why "translate" by default, measured on the 2-core dev machine (shared,
// load ~5) over the 368 seeds (tools/attnc-fuzz/seed-corpus.sh): lower 67 s,
// translate 65 s, emit 200 s (105 s of CPU against 44 s), and the same
// coverage of attnc's code (10031-10040 edges) either way. Translation is
// MLIR's, at -O0 it is nearly free, and it catches a pipeline that leaves
// untranslatable or invalid LLVM IR (the translation verifies the module).
// Emitting runs only LLVM's own optimizer and code generator -- no attnc
// code -- at 3x the cost per input, so it is left to explicit long runs.
// With translate, the mutation phase ran at ~150 execs/s on one worker.
#include "codegen/Compile.h"
#include "codegen/Registration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace {

/// Larger inputs are rejected (not added to the corpus): a spec is a few
/// KiB, and the cap bounds the time per input, and the nesting depth: MLIR's
/// parser recurses per nested region and overflowed its stack at ~20000
/// (now bounded by codegen/SourceGuards.h).
constexpr size_t kMaxInputBytes = 16 * 1024;

enum class Stage { Lower, Translate, Emit };

struct FuzzConfig {
  std::optional<attnc::Compiler> compiler;
  Stage last = Stage::Translate;
  bool verbose = false;
};

FuzzConfig &config() {
  static FuzzConfig config;
  return config;
}

bool envIs(const char *name, llvm::StringRef value) {
  const char *v = std::getenv(name);
  return v && value == v;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  FuzzConfig &c = config();
  attnc::CompileOptions options;
  options.target = attnc::CompileTarget::Cpu;
  const char *cpu = std::getenv("ATTNC_FUZZ_CPU");
  options.cpu = cpu && *cpu ? cpu : "sapphirerapids";
  const char *target = std::getenv("ATTNC_FUZZ_TARGET");
  llvm::StringRef targetName = target ? target : "cpu";
  if (targetName == "vulkan") {
    options.target = attnc::CompileTarget::Vulkan;
  } else if (targetName == "cuda") {
    // sm_90a (the tensor-core and wgmma lowerings too), embedded as PTX:
    // no ptxas per input.
    options.target = attnc::CompileTarget::Cuda;
    options.gpuArch = "sm_90a";
    options.gpuBinary = "ptx";
  } else if (targetName != "cpu") {
    llvm::errs() << "attnc-fuzz: ATTNC_FUZZ_TARGET must be cpu, vulkan or "
                    "cuda\n";
    std::exit(1);
  }
  // A fixed triple too: the same input takes the same path on any host.
  options.triple = "x86_64-unknown-linux-gnu";
  // Verify after every pass (as `attnc compile` does): a pass that breaks
  // the IR fails there, nearer its cause.
  options.verifyEachPass = true;
  const char *stage = std::getenv("ATTNC_FUZZ_STAGES");
  llvm::StringRef stageName = stage ? stage : "translate";
  if (stageName == "lower")
    c.last = Stage::Lower;
  else if (stageName == "translate")
    c.last = Stage::Translate;
  else if (stageName == "emit")
    c.last = Stage::Emit;
  else {
    llvm::errs() << "attnc-fuzz: ATTNC_FUZZ_STAGES must be lower, translate "
                    "or emit\n";
    std::exit(1);
  }
  // The attnc pipeline does not depend on the optimization level; it only
  // selects LLVM's pipeline in translate() (none at 0) and the code
  // generator's level.
  options.optLevel = c.last == Stage::Emit ? 3 : 0;
  auto compiler = attnc::Compiler::create(options);
  if (!compiler) {
    llvm::errs() << "attnc-fuzz: " << llvm::toString(compiler.takeError())
                 << "\n";
    std::exit(1);
  }
  c.compiler.emplace(std::move(*compiler));
  c.verbose = envIs("ATTNC_FUZZ_VERBOSE", "1");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return -1;
  FuzzConfig &c = config();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // A fresh context per input, as each `attnc compile` and JIT compile has:
  // nothing one input interns or registers can change the next's result.
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir"), llvm::SMLoc());
  std::optional<mlir::SourceMgrDiagnosticHandler> printer;
  std::optional<mlir::ScopedDiagnosticHandler> swallower;
  if (c.verbose)
    printer.emplace(sourceMgr, &context, llvm::errs());
  else
    swallower.emplace(&context,
                      [](mlir::Diagnostic &) { return mlir::success(); });

  mlir::FailureOr<attnc::Spec> spec = c.compiler->lower(sourceMgr, context);
  if (mlir::failed(spec) || c.last == Stage::Lower)
    return 0;

  // A spec that lowers must translate and emit: `attnc compile` would fail
  // with an error that points nowhere in the spec. A finding, then.
  llvm::LLVMContext llvmContext;
  auto module = c.compiler->translate(*spec->module, llvmContext);
  if (!module) {
    llvm::errs() << "attnc-fuzz: a lowered spec failed to translate: "
                 << llvm::toString(module.takeError()) << "\n";
    std::abort();
  }
  if (c.last == Stage::Translate)
    return 0;
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  if (llvm::Error error = c.compiler->emit(**module, os, /*assembly=*/false)) {
    llvm::errs() << "attnc-fuzz: a lowered spec failed to emit: "
                 << llvm::toString(std::move(error)) << "\n";
    std::abort();
  }
  return 0;
}
