// The attnc JIT (see include/attnc/jit.h): spec -> object (the same pipeline
// as attnc compile) -> ORC LLJIT, with an in-memory and an on-disk cache of
// the objects.
#include "attnc/jit.h"

#include "attnc/runtime.h"
#include "codegen/Passes.h"
#include "codegen/Spec.h"
#include "codegen/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

namespace attnc::jit {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

static std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (name == dtypeName(d))
      return d;
  return std::nullopt;
}

int64_t TensorSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t TensorSpec::numBytes() const {
  int64_t size = dtype == DType::F32 || dtype == DType::I32   ? 4
                 : dtype == DType::I64                        ? 8
                                                              : 2;
  return numElements() * size;
}

//===----------------------------------------------------------------------===//
// Compilation to an object
//===----------------------------------------------------------------------===//

namespace {

constexpr llvm::StringLiteral kCompilerVersion =
    "attnc 0.1 / LLVM " LLVM_VERSION_STRING;
constexpr llvm::StringLiteral kCacheMagic = "ATTNCJIT2\n";

/// At most two parts of two objects each (compileToObject).
constexpr uint64_t kMaxObjects = 4;

struct CompiledObject {
  std::vector<std::string> objects; // loaded into one JITDylib
  std::vector<EntryPoint> entryPoints;
};

void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::vector<EntryPoint> toEntryPoints(const std::vector<KernelSignature> &ks) {
  std::vector<EntryPoint> result;
  for (const KernelSignature &kernel : ks) {
    EntryPoint entry{kernel.name, {}};
    for (const KernelArg &arg : kernel.args)
      entry.args.push_back(
          {arg.name, arg.shape, *parseDType(arg.dtype), arg.isOutput});
    result.push_back(std::move(entry));
  }
  return result;
}

/// Which entry points one object holds: all, or the forward ones (f and
/// f_fwd) and the backward ones (f_bwd) of every kernel f.
enum class Part { All, Forward, Backward };

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
bool emitObject(llvm::Module &module, llvm::TargetMachine &machine,
                std::string &object, std::string &error) {
  llvm::SmallVector<char> buffer;
  llvm::raw_svector_ostream os(buffer);
  if (llvm::Error e = emitMachineCode(module, machine, os, false)) {
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
bool emitObjectsOnTwoThreads(llvm::Module &module,
                             llvm::TargetMachine &machine,
                             const TargetOptions &target, llvm::StringRef tag,
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
    return emitObject(module, machine, objects.back(), error);

  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> half = llvm::CloneModule(
      module, map,
      [&](const llvm::GlobalValue *value) { return helperHalf.contains(value); });
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
    auto parsed = llvm::parseBitcodeFile(
        llvm::MemoryBufferRef(bitcode, "half"), context);
    if (!parsed) {
      helperError = llvm::toString(parsed.takeError());
      return;
    }
    auto helperMachine = createTargetMachine(target);
    if (!helperMachine) {
      helperError = llvm::toString(helperMachine.takeError());
      return;
    }
    helperOk = emitObject(**parsed, **helperMachine, helperObject, helperError);
  });
  bool ok = emitObject(module, machine, objects.back(), error);
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
  mlir::DialectRegistry registry;
  registerAttncDialects(registry);
  mlir::MLIRContext context(registry,
                            mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(specText.data(), specText.size()), sourceName),
      llvm::SMLoc());
  llvm::raw_string_ostream diagnostics(error);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnostics);

  mlir::FailureOr<Spec> spec = parseSpec(sourceMgr, context);
  if (mlir::failed(spec))
    return false;
  std::vector<std::string> names;
  for (const KernelSignature &kernel : spec->kernels)
    names.push_back(kernel.name);
  if ((options.fuse && mlir::failed(fuseAttention(*spec))) ||
      (options.backward && mlir::failed(deriveBackward(*spec))))
    return false;
  for (const std::string &name : names) {
    std::vector<std::string> dropped;
    if (part == Part::Forward)
      dropped = {name + "_bwd"};
    if (part == Part::Backward)
      dropped = {name, name + "_fwd"};
    for (const std::string &symbol : dropped)
      if (auto fn = spec->module->lookupSymbol<mlir::func::FuncOp>(symbol))
        fn.erase();
  }
  TargetOptions target;
  target.optLevel = std::min(options.optLevel, 3u);
  target.cpu = options.cpu;
  auto machine = createTargetMachine(target);
  if (!machine) {
    error += llvm::toString(machine.takeError());
    return false;
  }
  std::string missing = featuresMissingOnHost(**machine);
  if (!missing.empty()) {
    error += "CPU '" + options.cpu + "' uses features this host lacks (" +
             missing + "): JIT code must run here";
    return false;
  }
  mlir::PassManager pm(&context);
  // Verifying after each of the pipeline's ~30 passes took 40% of its time
  // (14% of the whole compile); `attnc compile` and attnc-opt (the lit
  // tests) still do. Here the result is verified once, before translation.
  pm.enableVerifier(false);
  CpuPipelineOptions pipeline;
  pipeline.threads = std::max(options.threads, 0);
  pipeline.vectorBits = vectorRegisterBits(**machine);
  // AMX needs the OS's leave too: ask now, and plan without AMX if denied.
  pipeline.amx = hasAmxBf16(**machine) && attnc_amx_init() == 0;
  buildCpuPipeline(pm, pipeline);
  if (mlir::failed(pm.run(*spec->module)) ||
      mlir::failed(mlir::verify(*spec->module)))
    return false;
  llvm::LLVMContext llvmContext;
  auto module = translateToLLVMIR(*spec->module, llvmContext, **machine,
                                  target.optLevel);
  if (!module) {
    error += llvm::toString(module.takeError());
    return false;
  }
  if (twoThreadCodegen) {
    if (!emitObjectsOnTwoThreads(**module, **machine, target, partName(part),
                                 objects, error))
      return false;
  } else {
    objects.emplace_back();
    if (!emitObject(**module, **machine, objects.back(), error))
      return false;
  }
  if (kernels)
    *kernels = spec->kernels;
  return true;
}

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

//===----------------------------------------------------------------------===//
// Cache keys and the on-disk format
//===----------------------------------------------------------------------===//

/// This library's file, size and modification time: a rebuilt compiler
/// never reuses the objects of the one before, even at the same version.
std::string compilerBuildId() {
  static const std::string id = [] {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(&compilerBuildId), &info) ||
        !info.dli_fname)
      return std::string("unknown");
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(info.dli_fname, status))
      return std::string(info.dli_fname);
    return std::string(info.dli_fname) + ":" +
           std::to_string(status.getSize()) + ":" +
           std::to_string(status.getLastModificationTime()
                              .time_since_epoch()
                              .count());
  }();
  return id;
}

/// Everything a compiled object depends on: the compiler (version and
/// build), the host CPU, the options and the spec text.
std::string cacheKey(std::string_view specText, const Options &options) {
  std::ostringstream key;
  key << kCompilerVersion.str() << "\n" << compilerBuildId() << "\n"
      << llvm::sys::getHostCPUName().str() << "\n";
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.second)
      key << feature.first().str() << ",";
  key << "\nO" << options.optLevel << " cpu=" << options.cpu
      << " threads=" << options.threads << " backward=" << options.backward
      << " fuse=" << options.fuse
      << "\n"
      << specText;
  return key.str();
}

std::string cacheDirectory(const Options &options) {
  if (!options.cacheDir.empty())
    return options.cacheDir;
  if (const char *dir = std::getenv("ATTNC_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (llvm::Twine(xdg) + "/attnc").str();
  if (const char *home = std::getenv("HOME"); home && *home)
    return (llvm::Twine(home) + "/.cache/attnc").str();
  return "";
}

void appendU64(std::string &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((value >> (8 * i)) & 0xff));
}

bool readU64(llvm::StringRef &in, uint64_t &value) {
  if (in.size() < 8)
    return false;
  value = 0;
  for (int i = 0; i < 8; ++i)
    value |= uint64_t(uint8_t(in[i])) << (8 * i);
  in = in.drop_front(8);
  return true;
}

bool readBlock(llvm::StringRef &in, llvm::StringRef &block) {
  uint64_t size;
  if (!readU64(in, size) || size > in.size())
    return false;
  block = in.take_front(size);
  in = in.drop_front(size);
  return true;
}

std::string serializeEntryPoints(const std::vector<EntryPoint> &entries) {
  std::ostringstream os;
  for (const EntryPoint &entry : entries) {
    os << "entry " << entry.name << " " << entry.args.size() << "\n";
    for (const TensorSpec &arg : entry.args) {
      os << "arg " << arg.name << " " << dtypeName(arg.dtype) << " "
         << arg.isOutput << " " << arg.shape.size();
      for (int64_t d : arg.shape)
        os << " " << d;
      os << "\n";
    }
  }
  return os.str();
}

bool parseEntryPoints(llvm::StringRef text, std::vector<EntryPoint> &out) {
  std::istringstream is(text.str());
  std::string word;
  while (is >> word) {
    size_t count;
    EntryPoint entry;
    if (word != "entry" || !(is >> entry.name >> count) || count > 4096)
      return false;
    for (size_t k = 0; k < count; ++k) {
      TensorSpec arg;
      std::string dtype;
      size_t rank;
      if (!(is >> word >> arg.name >> dtype >> arg.isOutput >> rank) ||
          word != "arg" || rank > 16)
        return false;
      std::optional<DType> d = parseDType(dtype);
      if (!d)
        return false;
      arg.dtype = *d;
      arg.shape.resize(rank);
      for (int64_t &dim : arg.shape)
        if (!(is >> dim) || dim < 0)
          return false;
      entry.args.push_back(std::move(arg));
    }
    out.push_back(std::move(entry));
  }
  return !out.empty();
}

std::string encodeCacheFile(const std::string &key,
                            const CompiledObject &compiled) {
  std::string data = kCacheMagic.str();
  auto appendBlock = [&](llvm::StringRef block) {
    appendU64(data, block.size());
    data += block.str();
  };
  appendBlock(key);
  appendBlock(serializeEntryPoints(compiled.entryPoints));
  appendU64(data, compiled.objects.size());
  for (const std::string &object : compiled.objects)
    appendBlock(object);
  appendU64(data, llvm::xxh3_64bits(llvm::StringRef(data)));
  return data;
}

/// Decodes a cache file; false for a corrupt, truncated or foreign one.
bool decodeCacheFile(llvm::StringRef data, const std::string &key,
                     CompiledObject &out) {
  if (data.size() < kCacheMagic.size() + 8 ||
      !data.starts_with(kCacheMagic))
    return false;
  llvm::StringRef body = data.drop_back(8), tail = data.take_back(8);
  uint64_t checksum;
  if (!readU64(tail, checksum) || checksum != llvm::xxh3_64bits(body))
    return false;
  llvm::StringRef in = body.drop_front(kCacheMagic.size()), storedKey,
                  entries;
  uint64_t count;
  if (!readBlock(in, storedKey) || storedKey != key ||
      !readBlock(in, entries) || !readU64(in, count) || count == 0 ||
      count > kMaxObjects)
    return false;
  out.objects.clear();
  for (uint64_t k = 0; k < count; ++k) {
    llvm::StringRef object;
    if (!readBlock(in, object))
      return false;
    out.objects.push_back(object.str());
  }
  out.entryPoints.clear();
  return in.empty() && parseEntryPoints(entries, out.entryPoints);
}

std::string cachePath(const std::string &directory, const std::string &key) {
  return directory + "/" + llvm::utohexstr(llvm::xxh3_64bits(key), true) +
         ".attncjit";
}

/// Writes atomically (temporary file + rename) so that readers never see a
/// partial entry; failures only cost a recompilation later.
void storeInDiskCache(const std::string &directory, const std::string &key,
                      const CompiledObject &compiled) {
  if (directory.empty() || llvm::sys::fs::create_directories(directory))
    return;
  std::string path = cachePath(directory, key);
  llvm::SmallString<256> temporary;
  int fd;
  if (llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, temporary))
    return;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << encodeCacheFile(key, compiled);
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(temporary);
      return;
    }
  }
  if (llvm::sys::fs::rename(temporary, path))
    llvm::sys::fs::remove(temporary);
}

bool loadFromDiskCache(const std::string &directory, const std::string &key,
                       CompiledObject &out) {
  if (directory.empty())
    return false;
  auto buffer = llvm::MemoryBuffer::getFile(cachePath(directory, key),
                                            /*IsText=*/false);
  return buffer && decodeCacheFile((*buffer)->getBuffer(), key, out);
}

//===----------------------------------------------------------------------===//
// Calling an entry point with N pointer arguments
//===----------------------------------------------------------------------===//

constexpr size_t kMaxArgs = 64;

template <size_t... I>
int32_t callWith(void *function, void *const *args,
                 std::index_sequence<I...>) {
  using Fn = int32_t (*)(decltype((void)I, (void *)nullptr)...);
  return reinterpret_cast<Fn>(function)(args[I]...);
}

template <size_t N>
int32_t dispatch(void *function, void *const *args, size_t n) {
  if constexpr (N > kMaxArgs) {
    return -1;
  } else {
    if (n == N)
      return callWith(function, args, std::make_index_sequence<N>());
    return dispatch<N + 1>(function, args, n);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

struct Module::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::vector<EntryPoint> entryPoints;
  std::vector<void *> functions; // parallel to entryPoints
  bool fromDiskCache = false;
};

Module::Module(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Module::~Module() = default;

namespace {

std::mutex memoryCacheMutex;
std::map<std::string, std::weak_ptr<const Module>> &memoryCache() {
  static auto *cache = new std::map<std::string, std::weak_ptr<const Module>>();
  return *cache;
}

} // namespace

/// Loads an object into a fresh LLJIT and resolves every entry point.
static std::unique_ptr<Module::Impl> load(CompiledObject compiled,
                                          std::string &error) {
  initializeLLVM();
  auto impl = std::make_unique<Module::Impl>();
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    error = llvm::toString(jit.takeError());
    return nullptr;
  }
  // Kernels call malloc, free, memset and libm from this process.
  auto generator =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
          (*jit)->getDataLayout().getGlobalPrefix());
  if (!generator) {
    error = llvm::toString(generator.takeError());
    return nullptr;
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*generator));
  // The runtime is linked into this library: hand its entry points to the
  // JIT directly rather than hoping the process exports them.
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                      (*jit)->getDataLayout());
  llvm::orc::SymbolMap runtime;
  auto addRuntimeSymbol = [&](const char *name, auto *address) {
    runtime[mangle(name)] = llvm::orc::ExecutorSymbolDef(
        llvm::orc::ExecutorAddr::fromPtr(address),
        llvm::JITSymbolFlags::Exported);
  };
  addRuntimeSymbol("attnc_parallel_for", &attnc_parallel_for);
  addRuntimeSymbol("attnc_parallel_for_threads", &attnc_parallel_for_threads);
  addRuntimeSymbol("attnc_num_threads", &attnc_num_threads);
  addRuntimeSymbol("attnc_set_num_threads", &attnc_set_num_threads);
  addRuntimeSymbol("attnc_status_string", &attnc_status_string);
  addRuntimeSymbol("attnc_amx_init", &attnc_amx_init);
  addRuntimeSymbol("_mlir_memref_to_llvm_alloc", &_mlir_memref_to_llvm_alloc);
  addRuntimeSymbol("_mlir_memref_to_llvm_free", &_mlir_memref_to_llvm_free);
  if (llvm::Error e = (*jit)->getMainJITDylib().define(
          llvm::orc::absoluteSymbols(std::move(runtime)))) {
    error = llvm::toString(std::move(e));
    return nullptr;
  }
  for (const std::string &object : compiled.objects)
    if (llvm::Error e = (*jit)->addObjectFile(
            llvm::MemoryBuffer::getMemBufferCopy(object))) {
      error = llvm::toString(std::move(e));
      return nullptr;
    }
  for (const EntryPoint &entry : compiled.entryPoints) {
    if (entry.args.size() > kMaxArgs) {
      error = "entry point '" + entry.name + "' has more than 64 tensors";
      return nullptr;
    }
    auto address = (*jit)->lookup(entry.name);
    if (!address) {
      error = llvm::toString(address.takeError());
      return nullptr;
    }
    impl->functions.push_back(address->toPtr<void *>());
  }
  impl->entryPoints = std::move(compiled.entryPoints);
  impl->jit = std::move(*jit);
  return impl;
}

/// Compiles with diagnostics located in `sourceName`.
/// The spec with Options::sizes substituted for its `${NAME}` placeholders;
/// false (and the message) for a placeholder without a value.
static bool substituteSizes(std::string_view text, const Options &options,
                            std::string &out, std::string &error) {
  out.clear();
  size_t pos = 0;
  while (true) {
    size_t open = text.find("${", pos);
    if (open == std::string_view::npos)
      break;
    size_t close = text.find('}', open);
    std::string name(text.substr(open + 2, close == std::string_view::npos
                                               ? std::string_view::npos
                                               : close - open - 2));
    auto it = options.sizes.find(name);
    if (close == std::string_view::npos || it == options.sizes.end()) {
      size_t line = 1 + std::count(text.begin(), text.begin() + open, '\n');
      error = "line " + std::to_string(line) + ": size placeholder '${" +
              name + (close == std::string_view::npos ? "" : "}") +
              "' has no value in Options::sizes";
      return false;
    }
    out.append(text.substr(pos, open - pos));
    out += std::to_string(it->second);
    pos = close + 1;
  }
  out.append(text.substr(pos));
  return true;
}

static std::shared_ptr<const Module> compileNamed(std::string_view templateText,
                                                  llvm::StringRef sourceName,
                                                  const Options &options,
                                                  std::string *error) {
  std::string substituted, message;
  if (!substituteSizes(templateText, options, substituted, message)) {
    if (error)
      *error = message;
    return nullptr;
  }
  std::string_view specText = substituted;
  std::string key = cacheKey(specText, options);
  {
    std::lock_guard<std::mutex> lock(memoryCacheMutex);
    auto it = memoryCache().find(key);
    if (it != memoryCache().end())
      if (std::shared_ptr<const Module> module = it->second.lock())
        return module;
  }

  CompiledObject compiled;
  std::string directory = options.diskCache ? cacheDirectory(options) : "";
  bool cached = loadFromDiskCache(directory, key, compiled);
  if (!cached) {
    initializeLLVM();
    if (!compileToObject(specText, sourceName, options, compiled, message)) {
      if (error)
        *error = message;
      return nullptr;
    }
  }
  std::unique_ptr<Module::Impl> impl = load(compiled, message);
  if (!impl && cached) {
    // An entry that decodes but does not load is not trusted: recompile.
    cached = false;
    message.clear();
    if (compileToObject(specText, sourceName, options, compiled, message))
      impl = load(compiled, message);
  }
  if (!impl) {
    if (error)
      *error = message;
    return nullptr;
  }
  if (!cached && options.diskCache)
    storeInDiskCache(directory, key, compiled);
  impl->fromDiskCache = cached;

  std::shared_ptr<const Module> module = Module::create(std::move(impl));
  std::lock_guard<std::mutex> lock(memoryCacheMutex);
  memoryCache()[key] = module;
  return module;
}

std::shared_ptr<const Module> Module::create(std::unique_ptr<Impl> impl) {
  return std::shared_ptr<const Module>(new Module(std::move(impl)));
}

std::shared_ptr<const Module> Module::compile(std::string_view specText,
                                              const Options &options,
                                              std::string *error) {
  return compileNamed(specText, "spec.mlir", options, error);
}

std::shared_ptr<const Module> Module::compileFile(const std::string &path,
                                                  const Options &options,
                                                  std::string *error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    if (error)
      *error = "cannot read '" + path + "': " + buffer.getError().message();
    return nullptr;
  }
  return compileNamed((*buffer)->getBuffer().str(), path, options, error);
}

void clearMemoryCache() {
  std::lock_guard<std::mutex> lock(memoryCacheMutex);
  memoryCache().clear();
}

const std::vector<EntryPoint> &Module::entryPoints() const {
  return impl->entryPoints;
}

const EntryPoint *Module::find(std::string_view name) const {
  for (const EntryPoint &entry : impl->entryPoints)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

bool Module::fromDiskCache() const { return impl->fromDiskCache; }

Result Module::callUnchecked(std::string_view name,
                             const std::vector<void *> &buffers) const {
  Result result;
  const EntryPoint *entry = find(name);
  if (!entry) {
    result.error = "no entry point named '" + std::string(name) + "'";
    return result;
  }
  if (buffers.size() != entry->args.size()) {
    result.error = "'" + entry->name + "' takes " +
                   std::to_string(entry->args.size()) + " tensors, got " +
                   std::to_string(buffers.size());
    return result;
  }
  void *function = impl->functions[entry - impl->entryPoints.data()];
  result.status = dispatch<0>(function, buffers.data(), buffers.size());
  return result;
}

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

Result Module::call(std::string_view name,
                    const std::vector<TensorRef> &tensors) const {
  Result result;
  const EntryPoint *entry = find(name);
  if (!entry) {
    result.error = "no entry point named '" + std::string(name) + "'";
    return result;
  }
  if (tensors.size() != entry->args.size()) {
    result.error = "'" + entry->name + "' takes " +
                   std::to_string(entry->args.size()) + " tensors, got " +
                   std::to_string(tensors.size());
    return result;
  }
  std::vector<void *> buffers;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorSpec &spec = entry->args[k];
    const TensorRef &tensor = tensors[k];
    std::string where = "'" + entry->name + "' argument " +
                        std::to_string(k) + " (" + spec.name + ")";
    if (tensor.shape != spec.shape)
      result.error = where + " must have shape " + shapeString(spec.shape) +
                     ", got " + shapeString(tensor.shape);
    else if (tensor.dtype != spec.dtype)
      result.error = where + " must be " + dtypeName(spec.dtype) + ", got " +
                     dtypeName(tensor.dtype);
    else if (!tensor.data)
      result.error = where + " is null";
    if (!result.error.empty())
      return result;
    buffers.push_back(tensor.data);
  }
  return callUnchecked(name, buffers);
}

Result Module::forward(const std::vector<TensorRef> &tensors) const {
  return call(impl->entryPoints.front().name, tensors);
}

Result Module::forwardWithSave(const std::vector<TensorRef> &tensors) const {
  return call(impl->entryPoints.front().name + "_fwd", tensors);
}

Result Module::backward(const std::vector<TensorRef> &tensors) const {
  return call(impl->entryPoints.front().name + "_bwd", tensors);
}

} // namespace attnc::jit
