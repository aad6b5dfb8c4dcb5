// attnc: the attention compiler driver (attnc compile ...).
#include "codegen/Compile.h"
#include "codegen/Header.h"
#include "codegen/Passes.h"
#include "codegen/Registration.h"
#include "tools/attnc/Bench.h"
#include "tools/attnc/Explain.h"
#include "tools/attnc/Run.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Target/TargetMachine.h"

using namespace llvm;

namespace {

cl::OptionCategory attncCategory("attnc options");

cl::SubCommand compileCommand("compile",
                              "Compile a spec to an object file (or MLIR, "
                              "LLVM IR or assembly) and a C header");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<spec.mlir>"),
                               cl::Required, cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string>
    outputFile("o",
               cl::desc("Output file (default: <spec stem>.o in the "
                        "current directory for objects, with a note on "
                        "stderr; stdout otherwise; '-' is stdout)"),
               cl::value_desc("file"), cl::sub(compileCommand),
               cl::cat(attncCategory));
enum class EmitKind { Mlir, Llvm, Asm, Obj, Ptx };
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to write"), cl::init(EmitKind::Obj),
    cl::values(clEnumValN(EmitKind::Mlir, "mlir",
                          "the LLVM-dialect MLIR after the CPU pipeline"),
               clEnumValN(EmitKind::Llvm, "llvm", "optimized LLVM IR"),
               clEnumValN(EmitKind::Asm, "asm", "target assembly"),
               clEnumValN(EmitKind::Obj, "obj", "an object file (default)"),
               clEnumValN(EmitKind::Ptx, "ptx",
                          "--target=cuda: the kernels' PTX, one module after "
                          "another (what ptxas takes)")),
    cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string>
    headerFile("emit-header",
               cl::desc("Also write a C header declaring the entry points"),
               cl::value_desc("file.h"), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string> cpuName(
    "cpu",
    cl::desc("Target CPU: 'native' (the host CPU and its features, default) "
             "or an LLVM CPU name such as x86-64, x86-64-v3, znver4, "
             "optionally followed by feature changes: "
             "'native,-amx-tile,-amx-bf16'"),
    cl::init("native"), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<attnc::CompileTarget> compileTarget(
    "target", cl::desc("What the kernels run on"),
    cl::init(attnc::CompileTarget::Cpu),
    cl::values(clEnumValN(attnc::CompileTarget::Cpu, "cpu",
                          "the CPU (default): vectorized object code"),
               clEnumValN(attnc::CompileTarget::Vulkan, "vulkan",
                          "a Vulkan 1.1+ GPU: SPIR-V kernels embedded in "
                          "host code that calls libattnc_rt's Vulkan part "
                          "(attnc/vulkan.h)"),
               clEnumValN(attnc::CompileTarget::Cuda, "cuda",
                          "an NVIDIA GPU: a fatbin (cubin for --gpu-arch and "
                          "PTX) embedded in host code that calls "
                          "libattnc_rt's CUDA part (attnc/cuda.h); needs "
                          "the CUDA toolkit to compile, not to link")),
    cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string> targetTriple(
    "triple",
    cl::desc("Target triple of the CPU code (for GPU targets, of the host "
             "code; default: the host)"),
    cl::value_desc("triple"), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string> spirvTargetEnv(
    "spirv-target-env",
    cl::desc("--target=vulkan: the #spirv.target_env attribute the kernels "
             "are compiled for (default: a Vulkan 1.1 device with subgroup "
             "arithmetic and 16-bit storage)"),
    cl::value_desc("attribute"), cl::sub(compileCommand),
    cl::cat(attncCategory));
cl::opt<std::string> gpuArch(
    "gpu-arch",
    cl::desc("--target=cuda: the NVIDIA architecture, sm_80 (default; "
             "Ampere, and later GPUs through the embedded PTX) or sm_90a "
             "(Hopper)"),
    cl::init("sm_80"), cl::value_desc("sm_XY"), cl::sub(compileCommand),
    cl::cat(attncCategory));
cl::opt<std::string> cudaPath(
    "cuda-path",
    cl::desc("--target=cuda: the CUDA toolkit (ptxas, fatbinary, libdevice; "
             "default: $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda)"),
    cl::value_desc("dir"), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<std::string> gpuBinary(
    "gpu-binary",
    cl::desc("--target=cuda: what the kernels are embedded as: fatbin "
             "(default: cubin and PTX), cubin, or ptx (needs no ptxas; the "
             "driver compiles it when first loaded)"),
    cl::init("fatbin"), cl::value_desc("fatbin|cubin|ptx"),
    cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<bool> gpuTensorCores(
    "gpu-tensor-cores",
    cl::desc("--target=cuda: compute f16 and bf16 attention on tensor cores "
             "(mma.sync; default true); false: the portable GPU kernels"),
    cl::init(true), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<bool> gpuAtomicDq(
    "gpu-atomic-dq",
    cl::desc("--target=cuda: the tensor-core backward adds dQ with atomics "
             "in the dK/dV kernel (fewer products; its last bits vary run to "
             "run; not yet run on a GPU) instead of the default deterministic "
             "dQ kernel"),
    cl::init(false), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<bool> noBackward(
    "no-backward",
    cl::desc("Export only the forward entry points (no <f>_fwd/<f>_bwd); "
             "for specs whose score_mod has ops without gradient rules"),
    cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<bool> noFuse(
    "no-fuse",
    cl::desc("Keep graph-form attention chains unfused (each op lowered on "
             "its own, with Sq x Skv buffers): a debugging aid"),
    cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<unsigned> compileThreads(
    "threads",
    cl::desc("At most this many threads per parallel loop in the kernels "
             "(default 0: ATTNC_NUM_THREADS at run time, else one per core)"),
    cl::init(0), cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level 0-3"),
                           cl::init(3), cl::Prefix, cl::sub(compileCommand), cl::cat(attncCategory));
cl::opt<bool> printPipeline(
    "print-pipeline",
    cl::desc("Print the pass pipeline this compile runs (the options of "
             "attnc-pipeline for this target, as attnc-opt "
             "--pass-pipeline takes them) and stop"),
    cl::sub(compileCommand), cl::cat(attncCategory));

cl::SubCommand runCommand(
    "run",
    "JIT a spec, run it on random inputs and check it against the float64 "
    "reference: each output's per-element error, each gradient's "
    "directional finite-difference check (along one random direction: not "
    "a per-element error; the output explains both). The reference "
    "evaluates attn.projection, merge, scores, scale, score_mod, mask, "
    "softmax, apply, attention, attention_stats, combine, distill and append, "
    "and "
    "arith.constant (gradient ops are checked through @f_bwd, not "
    "evaluated). Compiled kernels are cached in $ATTNC_CACHE_DIR, else "
    "$XDG_CACHE_HOME/attnc, else ~/.cache/attnc");
cl::opt<std::string> runInput(cl::Positional, cl::desc("<spec.mlir>"),
                              cl::Required, cl::sub(runCommand),
                              cl::cat(attncCategory));
cl::opt<bool> runCheck("check",
                       cl::desc("Exit non-zero when an error exceeds the "
                                "tolerance of its dtype (f32 1e-4, f16 5e-3, "
                                "bf16 3e-2) or, if larger, that of the "
                                "narrowest float type in the spec, for an "
                                "output 4 * 2^-24 of the largest |score| a "
                                "score_mod takes or gives, or for a "
                                "directional check 4x its rounding noise "
                                "measured by a second run on moved inputs"),
                       cl::sub(runCommand), cl::cat(attncCategory));
cl::opt<bool> runNoBackward("no-backward",
                            cl::desc("Check the forward entry points only"),
                            cl::sub(runCommand), cl::cat(attncCategory));
cl::opt<attnc::CompileTarget> runTarget(
    "target", cl::desc("What the kernels run on"),
    cl::init(attnc::CompileTarget::Cpu),
    cl::values(clEnumValN(attnc::CompileTarget::Cpu, "cpu", "this CPU"),
               clEnumValN(attnc::CompileTarget::Vulkan, "vulkan",
                          "a Vulkan device (ATTNC_VULKAN_DEVICE picks one)"),
               clEnumValN(attnc::CompileTarget::Cuda, "cuda",
                          "NVIDIA GPU 0, kernels compiled for sm_80 (the "
                          "CUDA toolkit compiles them)")),
    cl::sub(runCommand), cl::cat(attncCategory));
cl::opt<uint64_t> runSeed("seed", cl::desc("Seed of the random inputs"),
                          cl::init(1), cl::sub(runCommand),
                          cl::cat(attncCategory));

cl::SubCommand benchCommand(
    "bench", "Time a spec's first kernel (forward, and forward+backward) on "
             "random inputs: GFLOP/s, fraction of the measured FMA peak, "
             "peak memory. Compiled kernels are cached on disk as for "
             "'attnc run' ($ATTNC_CACHE_DIR, else $XDG_CACHE_HOME/attnc, "
             "else ~/.cache/attnc)");
cl::opt<std::string> benchInput(cl::Positional, cl::desc("<spec.mlir>"),
                                cl::Required, cl::sub(benchCommand),
                                cl::cat(attncCategory));
cl::opt<int> benchThreads("threads",
                          cl::desc("Threads of the kernels' parallel loops "
                                   "(default: ATTNC_NUM_THREADS or all cores)"),
                          cl::init(0), cl::sub(benchCommand),
                          cl::cat(attncCategory));
cl::opt<int> benchReps("reps", cl::desc("Timed repetitions (median)"),
                       cl::init(10), cl::sub(benchCommand),
                       cl::cat(attncCategory));
cl::opt<bool> benchJson("json", cl::desc("Print one JSON object"),
                        cl::sub(benchCommand), cl::cat(attncCategory));
cl::list<std::string> benchFills(
    "fill",
    cl::desc("Give the integer input NAME (a spec function's argument, by "
             "its SSA name) the value N everywhere instead of random values, "
             "e.g. a cache's key lengths, or with NAME=shuffled a random "
             "permutation of 0 .. n - 1 over its n entries, e.g. a paged "
             "cache's block table naming every page once; repeatable"),
    cl::value_desc("NAME=N|shuffled"), cl::sub(benchCommand),
    cl::cat(attncCategory));
cl::opt<bool> benchNoBackward("no-backward",
                              cl::desc("Time the forward only"),
                              cl::sub(benchCommand), cl::cat(attncCategory));

cl::opt<int64_t> batchSize(
    "batch",
    cl::desc("The batch size of a spec whose batch is dynamic (`?` first "
             "dimensions; required for one, refused for a static one)"),
    cl::value_desc("N"), cl::init(0), cl::sub(runCommand),
    cl::sub(benchCommand), cl::cat(attncCategory));

cl::SubCommand explainCommand(
    "explain",
    "Draw what the compiler decided for a spec and what its attention does: "
    "per function the mask, the CPU tile map (skipped, whole and boundary "
    "tiles), the fused kernels and their loops, and on given or random "
    "inputs the attention per head, each row's entropy and the heads' "
    "similarity; PNG pictures and an index.html in the folder -o names");
cl::opt<std::string> explainInput(cl::Positional, cl::desc("<spec.mlir>"),
                                  cl::Required, cl::sub(explainCommand),
                                  cl::cat(attncCategory));
cl::opt<std::string>
    explainOutput("o",
                  cl::desc("The folder of the pictures and index.html "
                           "(created if missing)"),
                  cl::value_desc("dir"), cl::Required, cl::sub(explainCommand),
                  cl::cat(attncCategory));
cl::list<std::string> explainInputs(
    "input",
    cl::desc("Take the input NAME (a spec function's argument, by its SSA "
             "name) from a NumPy .npy file: f32, f64 or f16 for float "
             "inputs, i32 or i64 for integer ones, of the input's shape; "
             "repeatable. The others are random"),
    cl::value_desc("NAME=FILE.npy"), cl::sub(explainCommand),
    cl::cat(attncCategory));
cl::opt<uint64_t> explainSeed("seed", cl::desc("Seed of the random inputs"),
                              cl::init(1), cl::sub(explainCommand),
                              cl::cat(attncCategory));
cl::opt<int64_t> explainGrid(
    "grid",
    cl::desc("Cells per side of the pooled attention heatmaps (default 64; "
             "at most Sq rows and Skv keys)"),
    cl::init(64), cl::sub(explainCommand), cl::cat(attncCategory));
cl::opt<std::string>
    explainCpu("cpu",
               cl::desc("The CPU whose tile plan and kernels to show: 'native' "
                        "(default) or an LLVM CPU name, as for attnc compile"),
               cl::init("native"), cl::sub(explainCommand),
               cl::cat(attncCategory));
cl::opt<bool> explainNoBackward(
    "no-backward",
    cl::desc("Show the forward kernels only (for score_mod ops without "
             "gradient rules)"),
    cl::sub(explainCommand), cl::cat(attncCategory));

int fail(const Twine &message) {
  WithColor::error(errs(), "attnc") << message << "\n";
  return 1;
}

std::unique_ptr<ToolOutputFile> openOutput(StringRef path) {
  std::string error;
  auto file = mlir::openOutputFile(path, &error);
  if (!file)
    fail("cannot write '" + path + "': " + error);
  return file;
}

int runCompile() {
  attnc::CompileOptions options;
  options.target = compileTarget;
  options.spirvTargetEnv = spirvTargetEnv;
  options.gpuArch = gpuArch;
  options.cudaPath = cudaPath;
  options.gpuBinary = gpuBinary;
  options.tensorCores = gpuTensorCores;
  options.gpuAtomicDq = gpuAtomicDq;
  if (emitKind == EmitKind::Ptx) {
    if (compileTarget != attnc::CompileTarget::Cuda)
      return fail("--emit=ptx needs --target=cuda");
    options.gpuBinary = "ptx";
  }
  options.triple = targetTriple;
  options.cpu = cpuName;
  options.optLevel = optLevel;
  options.threads = compileThreads;
  options.fuse = !noFuse;
  options.backward = !noBackward;
  // Check the target before any work, so that a bad --cpu fails fast.
  auto compiler = attnc::Compiler::create(options);
  if (!compiler)
    return fail(toString(compiler.takeError()));
  if (printPipeline) {
    outs() << compiler->pipeline() << "\n";
    return 0;
  }
  auto buffer = MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code ec = buffer.getError())
    return fail("cannot read '" + inputFile + "': " + ec.message());

  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  mlir::MLIRContext context(registry);
  // Diagnostics point at the spec; a dump of the IR would only add noise.
  context.printOpOnDiagnostic(false);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  FailureOr<attnc::Spec> spec = compiler->lower(sourceMgr, context);
  if (failed(spec))
    return 1;

  std::string output = outputFile;
  if (output.empty() && emitKind == EmitKind::Obj && inputFile == "-")
    return fail("give -o when reading the spec from stdin");
  if (output.empty()) {
    output = emitKind == EmitKind::Obj
                 ? sys::path::stem(inputFile).str() + ".o"
                 : "-";
    // The object lands in the current directory, not next to the spec:
    // say where.
    if (output != "-")
      WithColor::note(errs(), "attnc")
          << "writing " << output << " (no -o given)\n";
  }
  if (emitKind == EmitKind::Obj && output == "-")
    return fail("refusing to write an object file to stdout; give -o");
  std::unique_ptr<ToolOutputFile> out = openOutput(output);
  if (!out)
    return 1;
  if (emitKind == EmitKind::Mlir) {
    spec->module->print(out->os());
    out->os() << "\n";
  } else if (emitKind == EmitKind::Ptx) {
    // attn-cuda-lower-host's globals of the kernel modules, NUL-terminated.
    for (auto global : spec->module->getOps<mlir::LLVM::GlobalOp>())
      if (global.getSymName().starts_with(attnc::kCudaImagePrefix))
        if (auto text =
                dyn_cast_or_null<mlir::StringAttr>(global.getValueOrNull()))
          out->os() << text.getValue().drop_back() << "\n";
  } else {
    LLVMContext llvmContext;
    auto llvmModule = compiler->translate(*spec->module, llvmContext);
    if (!llvmModule)
      return fail(toString(llvmModule.takeError()));
    if (emitKind == EmitKind::Llvm) {
      (*llvmModule)->print(out->os(), nullptr);
    } else if (Error error = compiler->emit(**llvmModule, out->os(),
                                            emitKind == EmitKind::Asm)) {
      return fail(toString(std::move(error)));
    }
  }

  if (!headerFile.empty()) {
    std::unique_ptr<ToolOutputFile> header = openOutput(headerFile);
    if (!header)
      return 1;
    attnc::emitHeader(spec->kernels, inputFile, header->os(), compileTarget);
    header->keep();
  }
  out->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // A crash inside MLIR's parser becomes a located error (parseSpec).
  CrashRecoveryContext::Enable();
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "attnc 0.1 (LLVM/MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  // LLVM's own global options are not part of attnc's interface.
  cl::HideUnrelatedOptions(attncCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "attnc: compiles attention specs (the attn dialect) to kernels\n\n"
      "  attnc compile spec.mlir -o kernel.o --emit-header kernel.h\n"
      "  attnc run spec.mlir --check\n"
      "  attnc bench spec.mlir --threads 2 --json\n"
      "  attnc explain spec.mlir -o report/\n");
  if (compileCommand)
    return runCompile();
  if (runCommand) {
    attnc::RunOptions options;
    options.check = runCheck;
    options.target =
        runTarget == attnc::CompileTarget::Vulkan ? attnc::jit::Target::Vulkan
        : runTarget == attnc::CompileTarget::Cuda ? attnc::jit::Target::Cuda
                                                  : attnc::jit::Target::Cpu;
    options.backward = !runNoBackward;
    options.seed = runSeed;
    options.batch = batchSize;
    return attnc::runSpec(runInput, options, outs(), errs());
  }
  if (benchCommand) {
    attnc::BenchOptions options;
    options.threads = benchThreads;
    options.reps = benchReps;
    options.json = benchJson;
    options.backward = !benchNoBackward;
    options.batch = batchSize;
    for (const std::string &flag : benchFills) {
      auto [name, text] = llvm::StringRef(flag).split('=');
      int64_t value;
      if (!name.empty() && text == "shuffled")
        options.shuffled.push_back(name.str());
      else if (name.empty() || text.getAsInteger(10, value))
        return fail("--fill '" + flag + "': expected NAME=N or NAME=shuffled");
      else
        options.fills.emplace_back(name.str(), value);
    }
    return attnc::benchSpec(benchInput, options, outs(), errs());
  }
  if (explainCommand) {
    attnc::ExplainOptions options;
    options.outputDir = explainOutput;
    options.seed = explainSeed;
    options.inputs = explainInputs;
    options.grid = explainGrid;
    options.cpu = explainCpu;
    options.backward = !explainNoBackward;
    return attnc::explainSpec(explainInput, options, outs(), errs());
  }
  return fail("no command given: attnc compile, run, bench or explain "
              "(each has --help; attnc --help lists them)");
}
