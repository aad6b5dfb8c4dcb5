// Checks of a spec's text before the MLIR parser sees it, for inputs on
// which MLIR 22's parser would crash.
#ifndef ATTNC_CODEGEN_SOURCEGUARDS_H
#define ATTNC_CODEGEN_SOURCEGUARDS_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace attnc {

/// Deeper nesting than any spec needs (regions, types and attributes nest
/// a few levels); 20000 levels overflowed the parser's stack.
constexpr unsigned kMaxSourceNesting = 256;

/// The first bracket ({, (, [ or <) of `source` that opens a level deeper
/// than `limit`, or nullptr. MLIR's parser recurses once per level and has
/// no bound of its own, hence this scan; it skips comments and string
/// literals, and the > of -> and => closes nothing.
const char *findExcessNesting(llvm::StringRef source,
                              unsigned limit = kMaxSourceNesting);

/// The first `array<index` (blanks allowed around the <) outside comments
/// and string literals, or nullptr: MLIR 22's parser dereferences an index
/// type's missing bit width on a dense array of index and crashes.
const char *findIndexDenseArray(llvm::StringRef source);

/// The first `-` of a negative size in the dimension list of a `tensor<` or
/// `memref<` type (`tensor<1x-2x4xf32>`), outside comments and string
/// literals, or nullptr. MLIR's parser reports those as "expected
/// non-function type"; this scan gives them a clearer error. Only the sizes
/// before the element type are looked at, so that negative numbers
/// elsewhere (constants, `dense<-2.0>`, the strides of a memref layout) pass.
/// `typeName`, if given, is set to "tensor" or "memref".
const char *findNegativeDimension(llvm::StringRef source,
                                  llvm::StringRef *typeName = nullptr);

/// What the scans above find first in `source`, in that order: where, and
/// the error message for it; nullopt when the text may go to the parser.
/// (attnc, the JIT and attnc-opt report it at that place.)
struct SourceHazard {
  const char *at;
  std::string message;
};
std::optional<SourceHazard> findSourceHazard(llvm::StringRef source);

} // namespace attnc

#endif // ATTNC_CODEGEN_SOURCEGUARDS_H
