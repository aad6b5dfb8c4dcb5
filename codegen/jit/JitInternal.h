// What the JIT's files share (see include/attnc/jit.h): compiled objects,
// how a spec becomes them (JitCompile.cpp) and their cache (JitCache.cpp).
#ifndef ATTNC_CODEGEN_JIT_JITINTERNAL_H
#define ATTNC_CODEGEN_JIT_JITINTERNAL_H

#include "attnc/jit.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc::jit {

/// A compiled spec: its objects (loaded into one JITDylib) and the
/// signatures of its entry points.
struct CompiledObject {
  std::vector<std::string> objects;
  std::vector<EntryPoint> entryPoints;
};

/// At most two parts of two objects each (compileToObject).
inline constexpr uint64_t kMaxObjects = 4;

std::optional<DType> parseDType(llvm::StringRef name);

/// Compiles `specText` (diagnostics located in `sourceName`) with the
/// compile library; false and the diagnostics in `error` on failure.
bool compileToObject(std::string_view specText, llvm::StringRef sourceName,
                     const Options &options, CompiledObject &out,
                     std::string &error);

/// Everything a compiled object depends on: the compiler (version and
/// build), the host CPU, the options and the spec text.
std::string cacheKey(std::string_view specText, const Options &options);
/// Options::cacheDir, else $ATTNC_CACHE_DIR, $XDG_CACHE_HOME/attnc or
/// ~/.cache/attnc; empty: none.
std::string cacheDirectory(const Options &options);
/// Writes atomically (temporary file + rename) so that readers never see a
/// partial entry; failures only cost a recompilation later.
void storeInDiskCache(const std::string &directory, const std::string &key,
                      const CompiledObject &compiled);
/// The entry of `key`; false for none, or a corrupt, truncated or foreign
/// one.
bool loadFromDiskCache(const std::string &directory, const std::string &key,
                       CompiledObject &out);

} // namespace attnc::jit

#endif // ATTNC_CODEGEN_JIT_JITINTERNAL_H
