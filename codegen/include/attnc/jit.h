// attnc JIT: compile attention specs at run time and call their kernels.
//
// Public API: depends on the C++ standard library only.
//
//   std::string error;
//   auto module = attnc::jit::Module::compile(specText, {}, &error);
//   if (!module) { ... error holds located diagnostics ... }
//   attnc::jit::Result r = module->forward({q, k, v, o});
//
// Modules are immutable and shareable; compile and call are safe from many
// threads at once. Compiled objects are cached in memory and on disk.
#ifndef ATTNC_JIT_H
#define ATTNC_JIT_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::jit {

enum class DType { F32, F16, BF16, I32, I64 };

/// The name of a dtype as specs write it ("f32", "bf16", ...).
const char *dtypeName(DType dtype);

/// The first dimension of a tensor whose spec gave it as `?`: the dynamic
/// batch, one size for every such tensor of a call.
constexpr int64_t kDynamicBatch = -1;

/// One tensor argument of an entry point.
struct TensorSpec {
  std::string name;
  /// Row-major, contiguous; shape[0] is kDynamicBatch for a batched tensor.
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  bool isOutput = false;
  /// An input the kernel writes (a KV cache attn.append appends to): on a
  /// GPU target the checked calls download it back as well.
  bool updatedInPlace = false;
  bool batched() const { return !shape.empty() && shape[0] == kDynamicBatch; }
  /// The elements and bytes of the tensor at batch size `batch` (which
  /// only batched tensors read).
  int64_t numElements(int64_t batch = 1) const;
  int64_t numBytes(int64_t batch = 1) const;
};

/// An exported entry point: inputs in order, then one output per result.
/// With batched tensors, the C function takes the batch size (int64_t)
/// after them.
struct EntryPoint {
  std::string name;
  std::vector<TensorSpec> args;
  bool batched() const;
  /// This entry point's tensors at batch size `batch` (kDynamicBatch
  /// replaced by it).
  EntryPoint atBatch(int64_t batch) const;
};

/// A tensor passed to a checked call.
struct TensorRef {
  void *data = nullptr;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
};

/// What a module's kernels run on.
enum class Target {
  /// This process's CPU.
  Cpu,
  /// A Vulkan 1.1+ GPU through the runtime (attnc/vulkan.h). Each module
  /// makes its own context on its first call (ATTNC_VULKAN_DEVICE picks
  /// the device); call() and the checked calls copy host tensors to device
  /// buffers and the outputs back, and return ATTNC_STATUS_NO_DEVICE when
  /// there is no Vulkan device.
  Vulkan,
  /// An NVIDIA GPU through the runtime (attnc/cuda.h): kernels compiled for
  /// Options::gpuArch (a fatbin of its cubin and PTX; needs the CUDA
  /// toolkit to compile). Each module makes its own context on device 0 on
  /// its first checked call; call() and the checked calls copy host tensors
  /// to device memory and the outputs back, on the default stream, and
  /// return ATTNC_STATUS_NO_DEVICE when there is no driver or GPU.
  Cuda,
};

struct Options {
  Target target = Target::Cpu;
  /// LLVM optimization level 0-3: 1 is a lean pipeline for the kernels'
  /// IR (the scalar cleanups they need, codegen/Target.cpp), 2 and 3 are
  /// LLVM's default pipelines. The kernels reach LLVM vectorized and
  /// register-blocked: their flash kernels' machine code came out within 2%
  /// of the same size at 1 and 2 and ran as fast, while 2 took 1.26 times
  /// 1's JIT work (mha_causal: 2.16 vs 1.72 G instructions). So the JIT's
  /// default is 1; `attnc compile` (ahead of time) uses 3.
  unsigned optLevel = 1;
  /// The CPU to generate code for: "native" (the host and its features),
  /// or an LLVM CPU name such as "x86-64" or "x86-64-v3" whose features
  /// the host has (compiling for another CPU is an error: the code runs
  /// here), optionally followed by comma-separated feature changes:
  /// "native,-amx-tile,-amx-bf16" is the host without AMX.
  std::string cpu = "native";
  /// Threads the kernels' parallel loops use: 0 for the runtime's default
  /// (ATTNC_NUM_THREADS, else one per core), else at most this many.
  int threads = 0;
  /// Also derive <f>_fwd and <f>_bwd for every kernel <f>.
  bool backward = true;
  /// Fuse graph-form attention chains (scores ... apply) into flash
  /// kernels (attn-fuse); false keeps the unfused lowering of each op, whose
  /// S x S buffers make it a debugging and testing aid only.
  bool fuse = true;
  /// Look up and store compiled objects on disk.
  bool diskCache = true;
  /// Cache directory; empty: $ATTNC_CACHE_DIR, else $XDG_CACHE_HOME/attnc,
  /// else $HOME/.cache/attnc.
  std::string cacheDir;
  /// Sizes substituted into the spec before it is parsed: every `${NAME}`
  /// becomes the decimal value of sizes["NAME"] (shapes are static, so a
  /// spec written with `tensor<1x8x${S}x64xf32>` compiles one variant per
  /// S; each is its own cache entry). A placeholder without a value is an
  /// error.
  std::map<std::string, int64_t> sizes;
  /// Target::Cuda: the architecture the kernels are compiled for (sm_80
  /// runs on later GPUs through its PTX; sm_90a is Hopper's).
  std::string gpuArch = "sm_80";
  /// Target::Cuda: f16 and bf16 attention on tensor cores (mma.sync; the
  /// forward on wgmma for sm_90a); false: the portable GPU kernels.
  bool gpuTensorCores = true;
  /// Target::Cuda: the tensor-core backward adds dQ with atomics instead of
  /// a deterministic dQ kernel (not yet run on a GPU).
  bool gpuAtomicDq = false;
};

/// The outcome of a call: `error` is set when nothing was called (unknown
/// entry point, wrong argument count, shape or dtype); otherwise `status`
/// is the kernel's attnc status code (0: ATTNC_STATUS_OK).
struct Result {
  int32_t status = 0;
  std::string error;
  bool ok() const { return error.empty() && status == 0; }
};

class Module {
public:
  /// Compiles `specText` (or a lookup in the caches). On failure returns
  /// null and, when `error` is given, the located diagnostics; on success
  /// `error` is left empty (an earlier message in it is cleared).
  static std::shared_ptr<const Module>
  compile(std::string_view specText, const Options &options = {},
          std::string *error = nullptr);
  static std::shared_ptr<const Module>
  compileFile(const std::string &path, const Options &options = {},
              std::string *error = nullptr);

  const std::vector<EntryPoint> &entryPoints() const;
  const EntryPoint *find(std::string_view name) const;
  /// Whether this module came from the disk cache.
  bool fromDiskCache() const;

  /// Calls an entry point with one tensor per argument, checking the count,
  /// every shape and dtype, and that no pointer is null. A dynamic batch is
  /// read from the batched tensors' first dimension (the same for all).
  Result call(std::string_view name,
              const std::vector<TensorRef> &tensors) const;
  /// Calls an entry point with raw buffers; only the count is checked. An
  /// entry point with a dynamic batch takes the batch size last, as
  /// reinterpret_cast<void *>(intptr_t(batch)).
  /// For Target::Vulkan the raw arguments are the attnc_vk_context * first,
  /// then one attnc_vk_buffer * per tensor; for Target::Cuda the
  /// attnc_cuda_context *, the stream (null: the default stream), then one
  /// device pointer per tensor.
  Result callUnchecked(std::string_view name,
                       const std::vector<void *> &buffers) const;

  /// The first kernel of the spec (f), its <f>_fwd and its <f>_bwd.
  Result forward(const std::vector<TensorRef> &tensors) const;
  Result forwardWithSave(const std::vector<TensorRef> &tensors) const;
  Result backward(const std::vector<TensorRef> &tensors) const;

  ~Module();
  struct Impl;
  static std::shared_ptr<const Module> create(std::unique_ptr<Impl> impl);

private:
  explicit Module(std::unique_ptr<Impl> impl);
  Result callOnDevice(const EntryPoint &entry,
                      const std::vector<void *> &host) const;
  std::unique_ptr<Impl> impl;
};

/// Drops every module of the in-memory cache (modules in use stay valid).
void clearMemoryCache();

} // namespace attnc::jit

#endif // ATTNC_JIT_H
