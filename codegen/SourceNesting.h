// A bound on how deeply a spec's brackets nest, checked on the text before
// the MLIR parser sees it.
#ifndef ATTNC_CODEGEN_SOURCENESTING_H
#define ATTNC_CODEGEN_SOURCENESTING_H

#include "llvm/ADT/StringRef.h"

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

} // namespace attnc

#endif // ATTNC_CODEGEN_SOURCENESTING_H
