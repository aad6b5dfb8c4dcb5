// The attnc JIT (see include/attnc/jit.h): spec -> object (the same pipeline
// as attnc compile) -> ORC LLJIT, with an in-memory and an on-disk cache of
// the objects.
#include "attnc/jit.h"

#include "attnc/cuda.h"
#include "attnc/runtime.h"
#include "attnc/vulkan.h"
#include "codegen/jit/JitInternal.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/ExecutionEngine/Orc/MapperJITLinkMemoryManager.h"
#include "llvm/ExecutionEngine/Orc/MemoryMapper.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <map>
#include <mutex>
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

int64_t TensorSpec::numElements(int64_t batch) const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d == kDynamicBatch ? batch : d;
  return n;
}

int64_t TensorSpec::numBytes(int64_t batch) const {
  int64_t size = dtype == DType::F32 || dtype == DType::I32 ? 4
                 : dtype == DType::I64                      ? 8
                                                            : 2;
  return numElements(batch) * size;
}

bool EntryPoint::batched() const {
  for (const TensorSpec &arg : args)
    if (arg.batched())
      return true;
  return false;
}

EntryPoint EntryPoint::atBatch(int64_t batch) const {
  EntryPoint result = *this;
  for (TensorSpec &arg : result.args)
    if (arg.batched())
      arg.shape[0] = batch;
  return result;
}

namespace {

void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

//===----------------------------------------------------------------------===//
// Calling an entry point with N pointer arguments
//===----------------------------------------------------------------------===//

constexpr size_t kMaxArgs = 64;

template <size_t... I>
int32_t callWith(void *function, void *const *args, std::index_sequence<I...>) {
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

/// The GPU of a module's checked calls, through the runtime: a context,
/// device buffers, copies, and the arguments entry points take first.
class Device {
public:
  virtual ~Device() = default;
  /// Makes the context: a status.
  virtual int create() = 0;
  /// A device buffer of `bytes`, null when out of memory; the device frees
  /// it with itself.
  virtual void *alloc(uint64_t bytes) = 0;
  virtual int upload(void *buffer, const void *host, uint64_t bytes) = 0;
  virtual int download(void *host, void *buffer, uint64_t bytes) = 0;
  /// What entry points take before their tensors.
  virtual std::vector<void *> runtimeArgs() = 0;
  /// Waits for the call's work, when the entry point did not.
  virtual int wait() { return ATTNC_STATUS_OK; }
};

/// Vulkan: entry points take the context and wait for their work.
class VulkanDevice final : public Device {
public:
  ~VulkanDevice() override { attnc_vk_context_destroy(ctx); }
  int create() override { return attnc_vk_context_create(&ctx); }
  void *alloc(uint64_t bytes) override {
    return attnc_vk_buffer_create(ctx, bytes);
  }
  int upload(void *buffer, const void *host, uint64_t bytes) override {
    return attnc_vk_upload(static_cast<attnc_vk_buffer *>(buffer), host,
                           bytes);
  }
  int download(void *host, void *buffer, uint64_t bytes) override {
    return attnc_vk_download(static_cast<attnc_vk_buffer *>(buffer), host,
                             bytes);
  }
  std::vector<void *> runtimeArgs() override { return {ctx}; }

private:
  attnc_vk_context *ctx = nullptr;
};

/// CUDA: device 0; entry points take the context and the stream (the
/// default one) and queue their work, which wait() waits for.
class CudaDevice final : public Device {
public:
  ~CudaDevice() override {
    for (void *buffer : buffers)
      attnc_cuda_free(ctx, buffer);
    attnc_cuda_context_destroy(ctx);
  }
  int create() override { return attnc_cuda_context_create(0, &ctx); }
  void *alloc(uint64_t bytes) override {
    void *buffer = attnc_cuda_alloc(ctx, bytes);
    if (buffer)
      buffers.push_back(buffer);
    return buffer;
  }
  int upload(void *buffer, const void *host, uint64_t bytes) override {
    return attnc_cuda_upload(ctx, buffer, host, bytes);
  }
  int download(void *host, void *buffer, uint64_t bytes) override {
    return attnc_cuda_download(ctx, host, buffer, bytes);
  }
  std::vector<void *> runtimeArgs() override {
    return {ctx, /*stream=*/nullptr};
  }
  int wait() override { return attnc_cuda_synchronize(ctx, nullptr); }

private:
  attnc_cuda_context *ctx = nullptr;
  std::vector<void *> buffers;
};

struct Module::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::vector<EntryPoint> entryPoints;
  std::vector<void *> functions; // parallel to entryPoints
  bool fromDiskCache = false;
  Target target = Target::Cpu;
  /// GPU targets: the device of checked calls, made on the first one; the
  /// mutex gives it to one call at a time.
  std::mutex deviceMutex;
  std::unique_ptr<Device> device;
  int deviceStatus = -1; // of the context's creation; -1: not tried
  /// The device buffers of each entry point's tensors (parallel to
  /// entryPoints), made on its first checked call and kept for the next
  /// ones; the device frees them.
  std::vector<std::vector<void *>> deviceBuffers;
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

/// The address range one module's code and data are carved from (virtual:
/// reserved, not committed); a module larger than this takes more ranges.
constexpr size_t kJitReservation = size_t(1) << 28;

/// Loads an object into a fresh LLJIT and resolves every entry point.
static std::unique_ptr<Module::Impl> load(CompiledObject compiled,
                                          std::string &error) {
  initializeLLVM();
  auto impl = std::make_unique<Module::Impl>();
  // Every allocation of one module from one reserved range: with each
  // segment mapped where mmap put it, the kernels' 32-bit PC-relative calls
  // between functions of one object could not reach ("relocation ... out
  // of range of Delta32 fixup": StatsTest.GenericCpus under ASan, whose
  // mappings lie terabytes apart).
  auto jit =
      llvm::orc::LLJITBuilder()
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession &session)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                auto memory =
                    llvm::orc::MapperJITLinkMemoryManager::CreateWithMapper<
                        llvm::orc::InProcessMemoryMapper>(kJitReservation);
                if (!memory)
                  return memory.takeError();
                return std::make_unique<llvm::orc::ObjectLinkingLayer>(
                    session, std::move(*memory));
              })
          .create();
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
    runtime[mangle(name)] =
        llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(address),
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
  addRuntimeSymbol("attnc_vk_dispatch", &attnc_vk_dispatch);
  addRuntimeSymbol("attnc_vk_scratch", &attnc_vk_scratch);
  addRuntimeSymbol("attnc_vk_release", &attnc_vk_release);
  addRuntimeSymbol("attnc_vk_trap", &attnc_vk_trap);
  addRuntimeSymbol("attnc_vk_finish", &attnc_vk_finish);
  addRuntimeSymbol("attnc_cuda_launch", &attnc_cuda_launch);
  addRuntimeSymbol("attnc_cuda_scratch", &attnc_cuda_scratch);
  addRuntimeSymbol("attnc_cuda_release", &attnc_cuda_release);
  addRuntimeSymbol("attnc_cuda_finish", &attnc_cuda_finish);
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
      error = "line " + std::to_string(line) + ": size placeholder '${" + name +
              (close == std::string_view::npos ? "" : "}") +
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
  // A success leaves `error` empty, even when the caller reuses a string
  // that holds an earlier failure's message.
  if (error)
    error->clear();
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
  impl->target = options.target;

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
  if (error)
    error->clear();
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
  size_t runtimeArgs = impl->target == Target::Vulkan ? 1
                       : impl->target == Target::Cuda ? 2
                                                      : 0;
  size_t expected =
      entry->args.size() + runtimeArgs + (entry->batched() ? 1 : 0);
  if (buffers.size() != expected) {
    result.error =
        "'" + entry->name + "' takes " + std::to_string(expected) +
        (impl->target == Target::Vulkan
             ? " arguments (the context, then a buffer per tensor)"
         : impl->target == Target::Cuda
             ? " arguments (the context, the stream, then a device pointer "
               "per tensor)"
         : entry->batched() ? " arguments (a buffer per tensor, then "
                              "the batch size)"
                            : " tensors") +
        ", got " + std::to_string(buffers.size());
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
  // The batch: the first batched tensor's first dimension.
  int64_t batch = 0;
  for (size_t k = 0; k < tensors.size(); ++k)
    if (entry->args[k].batched() && !tensors[k].shape.empty()) {
      batch = tensors[k].shape[0];
      break;
    }
  std::vector<void *> buffers;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorSpec &spec = entry->args[k];
    const TensorRef &tensor = tensors[k];
    std::string where = "'" + entry->name + "' argument " + std::to_string(k) +
                        " (" + spec.name + ")";
    std::vector<int64_t> shape = spec.shape;
    if (spec.batched())
      shape[0] = batch;
    if (tensor.shape != shape)
      result.error =
          where + " must have shape " + shapeString(shape) +
          (spec.batched()
               ? " (its first dimension the batch, " + std::to_string(batch) +
                     " as the first batched tensor gives it)"
               : "") +
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
  if (impl->target != Target::Cpu)
    return callOnDevice(*entry, buffers);
  if (entry->batched())
    buffers.push_back(reinterpret_cast<void *>(intptr_t(batch)));
  return callUnchecked(name, buffers);
}

/// A checked call on the module's GPU: the inputs uploaded to the entry
/// point's device buffers, the call and its work, the outputs (and the
/// inputs the call updates in place) downloaded.
Result Module::callOnDevice(const EntryPoint &entry,
                            const std::vector<void *> &host) const {
  Result result;
  std::lock_guard<std::mutex> lock(impl->deviceMutex);
  if (impl->deviceStatus < 0) {
    if (impl->target == Target::Vulkan)
      impl->device = std::make_unique<VulkanDevice>();
    else
      impl->device = std::make_unique<CudaDevice>();
    impl->deviceStatus = impl->device->create();
    impl->deviceBuffers.resize(impl->entryPoints.size());
  }
  if (impl->deviceStatus != ATTNC_STATUS_OK) {
    result.status = impl->deviceStatus;
    return result;
  }
  Device &device = *impl->device;
  std::vector<void *> &buffers =
      impl->deviceBuffers[&entry - impl->entryPoints.data()];
  for (size_t k = buffers.size(); k < entry.args.size(); ++k) {
    void *buffer = device.alloc(entry.args[k].numBytes());
    if (!buffer) {
      result.status = ATTNC_STATUS_OUT_OF_MEMORY;
      return result;
    }
    buffers.push_back(buffer);
  }
  std::vector<void *> args = device.runtimeArgs();
  for (size_t k = 0; k < entry.args.size(); ++k) {
    args.push_back(buffers[k]);
    if (!entry.args[k].isOutput && result.ok())
      result.status =
          device.upload(buffers[k], host[k], entry.args[k].numBytes());
  }
  if (!result.ok())
    return result;
  result = callUnchecked(entry.name, args);
  if (result.ok())
    result.status = device.wait();
  for (size_t k = 0; k < entry.args.size() && result.ok(); ++k)
    if (entry.args[k].isOutput || entry.args[k].updatedInPlace)
      result.status =
          device.download(host[k], buffers[k], entry.args[k].numBytes());
  return result;
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
