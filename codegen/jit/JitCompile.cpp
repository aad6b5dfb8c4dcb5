// The JIT's compiles (see JitInternal.h): the compile library's lowering,
// with the forward and backward entry points and the machine code of each
// on threads of their own.
#include "codegen/jit/JitInternal.h"

#include "codegen/Compile.h"
#include "codegen/Registration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <thread>

namespace attnc::jit {

std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (name == dtypeName(d))
      return d;
  return std::nullopt;
}

namespace {

std::vector<EntryPoint> toEntryPoints(const std::vector<KernelSignature> &ks) {
  std::vector<EntryPoint> result;
  for (const KernelSignature &kernel : ks) {
    EntryPoint entry{kernel.name, {}};
    for (const KernelArg &arg : kernel.args) {
      entry.args.push_back({arg.name, arg.shape, *parseDType(arg.dtype),
                            arg.isOutput, arg.updatedInPlace});
      if (arg.batched)
        entry.args.back().shape[0] = kDynamicBatch;
    }
    result.push_back(std::move(entry));
  }
  return result;
}

/// Which entry points one object holds: all, or the forward ones (f and
/// f_fwd) and the backward ones (f_bwd) of every kernel f.
using Part = EntryPoints;

const char *partName(Part part) {
  switch (part) {
  case Part::All:
    return "all";
  case Part::Forward:
    return "fwd";
  case Part::Backward:
    return "bwd";
  }
  return "?";
}

/// The object code of `module`.
bool emitObject(llvm::Module &module, const Compiler &compiler,
                std::string &object, std::string &error) {
  llvm::SmallVector<char> buffer;
  llvm::raw_svector_ostream os(buffer);
  if (llvm::Error e = compiler.emit(module, os, /*assembly=*/false)) {
    error += llvm::toString(std::move(e));
    return false;
  }
  object.assign(buffer.begin(), buffer.end());
  return true;
}

/// Generates the machine code of the optimized `module` as two objects, on
/// this thread and a helper one: code generation is per function, so the
/// functions split into two halves of about equal size (by instruction
/// count) give the same code. The halves link through the symbols of the
/// module's internal functions, made hidden and suffixed with `tag` (which
/// keeps them apart from the other parts' objects in the JITDylib). The
/// helper thread needs its own LLVM context: its half goes there as bitcode.
bool emitObjectsOnTwoThreads(llvm::Module &module, const Compiler &compiler,
                             llvm::StringRef tag,
                             std::vector<std::string> &objects,
                             std::string &error) {
  for (llvm::GlobalValue &value : module.global_values())
    if (value.hasLocalLinkage()) {
      value.setName(value.getName() + "." + tag);
      value.setLinkage(llvm::GlobalValue::ExternalLinkage);
      value.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
  // Largest first (ties in module order), each to the lighter half.
  std::vector<std::pair<size_t, llvm::Function *>> functions;
  for (llvm::Function &function : module)
    if (!function.isDeclaration())
      functions.push_back({function.getInstructionCount(), &function});
  std::vector<size_t> order(functions.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  llvm::sort(order, [&](size_t a, size_t c) {
    return functions[a].first != functions[c].first
               ? functions[a].first > functions[c].first
               : a < c;
  });
  llvm::SmallPtrSet<const llvm::GlobalValue *, 16> helperHalf;
  size_t sizes[2] = {0, 0};
  for (size_t k : order) {
    bool helper = sizes[1] < sizes[0];
    sizes[helper] += functions[k].first;
    if (helper)
      helperHalf.insert(functions[k].second);
  }
  objects.emplace_back();
  if (helperHalf.empty())
    return emitObject(module, compiler, objects.back(), error);

  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> half =
      llvm::CloneModule(module, map, [&](const llvm::GlobalValue *value) {
        return helperHalf.contains(value);
      });
  std::string bitcode;
  {
    llvm::raw_string_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*half, os);
  }
  half.reset();
  for (auto [size, function] : functions)
    if (helperHalf.contains(function))
      function->deleteBody();

  std::string helperObject, helperError;
  bool helperOk = false;
  std::thread helper([&] {
    llvm::LLVMContext context;
    auto parsed =
        llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, "half"), context);
    if (!parsed) {
      helperError = llvm::toString(parsed.takeError());
      return;
    }
    // LLVM's target machines are not shared between threads.
    auto helperCompiler = Compiler::create(compiler.getOptions());
    if (!helperCompiler) {
      helperError = llvm::toString(helperCompiler.takeError());
      return;
    }
    helperOk = emitObject(**parsed, *helperCompiler, helperObject, helperError);
  });
  bool ok = emitObject(module, compiler, objects.back(), error);
  helper.join();
  if (!helperOk) {
    error += helperError;
    return false;
  }
  objects.push_back(std::move(helperObject));
  return ok;
}

/// Compiles the entry points of `part` to one object, or with
/// `twoThreadCodegen` two (emitObjectsOnTwoThreads); `kernels`, when given,
/// receives the signatures of every entry point of the spec.
bool compilePart(std::string_view specText, llvm::StringRef sourceName,
                 const Options &options, Part part, bool twoThreadCodegen,
                 std::vector<std::string> &objects,
                 std::vector<KernelSignature> *kernels, std::string &error) {
  CompileOptions compile;
  compile.target = options.target == Target::Vulkan ? CompileTarget::Vulkan
                   : options.target == Target::Cuda ? CompileTarget::Cuda
                                                    : CompileTarget::Cpu;
  compile.gpuArch = options.gpuArch;
  compile.tensorCores = options.gpuTensorCores;
  compile.gpuAtomicDq = options.gpuAtomicDq;
  compile.cpu = options.cpu;
  compile.optLevel = std::min(options.optLevel, 3u);
  compile.threads = options.threads;
  compile.fuse = options.fuse;
  compile.backward = options.backward;
  compile.entryPoints = part;
  compile.forThisProcess = true;
  compile.verifyEachPass = false;

  mlir::DialectRegistry registry;
  registerAttncDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(specText.data(), specText.size()), sourceName),
      llvm::SMLoc());
  llvm::raw_string_ostream diagnostics(error);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnostics);

  auto compiler = Compiler::create(compile);
  if (!compiler) {
    error += llvm::toString(compiler.takeError());
    return false;
  }
  mlir::FailureOr<Spec> spec = compiler->lower(sourceMgr, context);
  if (mlir::failed(spec))
    return false;
  llvm::LLVMContext llvmContext;
  auto module = compiler->translate(*spec->module, llvmContext);
  if (!module) {
    error += llvm::toString(module.takeError());
    return false;
  }
  if (twoThreadCodegen) {
    if (!emitObjectsOnTwoThreads(**module, *compiler, partName(part), objects,
                                 error))
      return false;
  } else {
    objects.emplace_back();
    if (!emitObject(**module, *compiler, objects.back(), error))
      return false;
  }
  if (kernels)
    *kernels = spec->kernels;
  return true;
}

} // namespace

/// Compiles the spec: with the backward and two cores or more, its forward
/// and backward entry points on two threads (each with its own MLIR and
/// LLVM contexts), which halves the JIT's latency; otherwise all of them on
/// this one. With two cores or more, each part's code generation takes two
/// threads: the backward part has about 1.6 times the forward's work, and
/// halving its code generation takes most of that excess off the critical
/// path (the cores stay busy to the end).
bool compileToObject(std::string_view specText, llvm::StringRef sourceName,
                     const Options &options, CompiledObject &out,
                     std::string &error) {
  std::vector<KernelSignature> kernels;
  out.objects.clear();
  bool parallel = std::thread::hardware_concurrency() >= 2;
  if (!options.backward || !parallel) {
    if (!compilePart(specText, sourceName, options, Part::All, parallel,
                     out.objects, &kernels, error))
      return false;
  } else {
    std::vector<std::string> backward;
    std::string backwardError;
    bool backwardOk = false;
    std::thread worker([&] {
      backwardOk = compilePart(specText, sourceName, options, Part::Backward,
                               true, backward, nullptr, backwardError);
    });
    bool forwardOk = compilePart(specText, sourceName, options, Part::Forward,
                                 true, out.objects, &kernels, error);
    worker.join();
    // Both parts parse and derive the same spec: report the forward's
    // diagnostics, or the backward's when only it failed.
    if (!forwardOk)
      return false;
    if (!backwardOk) {
      error = backwardError;
      return false;
    }
    for (std::string &object : backward)
      out.objects.push_back(std::move(object));
  }
  out.entryPoints = toEntryPoints(kernels);
  return true;
}

} // namespace attnc::jit
