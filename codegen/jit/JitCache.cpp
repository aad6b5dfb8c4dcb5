// The JIT's cache keys and on-disk format (see JitInternal.h).
#include "codegen/jit/JitInternal.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <dlfcn.h>
#include <sstream>

namespace attnc::jit {
namespace {

constexpr llvm::StringLiteral kCompilerVersion =
    "attnc 0.1 / LLVM " LLVM_VERSION_STRING;
constexpr llvm::StringLiteral kCacheMagic = "ATTNCJIT2\n";

} // namespace

/// This library's file, size and modification time: a rebuilt compiler
/// never reuses the objects of the one before, even at the same version.
static std::string compilerBuildId() {
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
           std::to_string(
               status.getLastModificationTime().time_since_epoch().count());
  }();
  return id;
}

std::string cacheKey(std::string_view specText, const Options &options) {
  std::ostringstream key;
  key << kCompilerVersion.str() << "\n"
      << compilerBuildId() << "\n"
      << llvm::sys::getHostCPUName().str() << "\n";
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.second)
      key << feature.first().str() << ",";
  key << "\ntarget=" << int(options.target) << " O" << options.optLevel
      << " cpu=" << options.cpu << " threads=" << options.threads
      << " backward=" << options.backward << " fuse=" << options.fuse
      << " gpu-arch=" << options.gpuArch
      << " tensor-cores=" << options.gpuTensorCores
      << " atomic-dq=" << options.gpuAtomicDq << "\n"
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

static void appendU64(std::string &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((value >> (8 * i)) & 0xff));
}

static bool readU64(llvm::StringRef &in, uint64_t &value) {
  if (in.size() < 8)
    return false;
  value = 0;
  for (int i = 0; i < 8; ++i)
    value |= uint64_t(uint8_t(in[i])) << (8 * i);
  in = in.drop_front(8);
  return true;
}

static bool readBlock(llvm::StringRef &in, llvm::StringRef &block) {
  uint64_t size;
  if (!readU64(in, size) || size > in.size())
    return false;
  block = in.take_front(size);
  in = in.drop_front(size);
  return true;
}

static std::string
serializeEntryPoints(const std::vector<EntryPoint> &entries) {
  std::ostringstream os;
  for (const EntryPoint &entry : entries) {
    os << "entry " << entry.name << " " << entry.args.size() << "\n";
    for (const TensorSpec &arg : entry.args) {
      os << "arg " << arg.name << " " << dtypeName(arg.dtype) << " "
         << arg.isOutput << " " << arg.updatedInPlace << " "
         << arg.shape.size();
      for (int64_t d : arg.shape)
        os << " " << d;
      os << "\n";
    }
  }
  return os.str();
}

static bool parseEntryPoints(llvm::StringRef text,
                             std::vector<EntryPoint> &out) {
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
      if (!(is >> word >> arg.name >> dtype >> arg.isOutput >>
            arg.updatedInPlace >> rank) ||
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

static std::string encodeCacheFile(const std::string &key,
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
static bool decodeCacheFile(llvm::StringRef data, const std::string &key,
                            CompiledObject &out) {
  if (data.size() < kCacheMagic.size() + 8 || !data.starts_with(kCacheMagic))
    return false;
  llvm::StringRef body = data.drop_back(8), tail = data.take_back(8);
  uint64_t checksum;
  if (!readU64(tail, checksum) || checksum != llvm::xxh3_64bits(body))
    return false;
  llvm::StringRef in = body.drop_front(kCacheMagic.size()), storedKey, entries;
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

static std::string cachePath(const std::string &directory,
                             const std::string &key) {
  return directory + "/" + llvm::utohexstr(llvm::xxh3_64bits(key), true) +
         ".attncjit";
}

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

} // namespace attnc::jit
