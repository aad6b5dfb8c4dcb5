// attnc explain: pictures of what the compiler decided for a spec (its
// masks, the CPU tile map, the fused kernels and their loops) and of the
// attention it computes on given or random inputs (its statistics by the
// compiled kernels, through the JIT), in one folder with an index.html.
#ifndef ATTNC_TOOLS_ATTNC_EXPLAIN_H
#define ATTNC_TOOLS_ATTNC_EXPLAIN_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnc {

struct ExplainOptions {
  /// The folder the pictures and index.html go to (created if missing).
  std::string outputDir;
  /// Seed of the random inputs that no --input gives.
  uint64_t seed = 1;
  /// NAME=FILE.npy: the input NAME (an argument of a spec function, by its
  /// SSA name) from a NumPy file.
  std::vector<std::string> inputs;
  /// Cells per side of the pooled attention heatmaps (at most Sq x Skv).
  int64_t grid = 64;
  /// The CPU the tile plan and the kernels are for: "native" or an LLVM
  /// CPU name, as attnc compile --cpu. The kernels that compute the
  /// attention statistics run here: they are compiled for this CPU when
  /// the host has its features, else for "native".
  std::string cpu = "native";
  /// Derive no backward (for score_mod ops without gradient rules).
  bool backward = true;
};

/// Returns the process exit code; progress goes to `outs`, diagnostics to
/// `errs`.
int explainSpec(const std::string &path, const ExplainOptions &options,
                llvm::raw_ostream &outs, llvm::raw_ostream &errs);

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_EXPLAIN_H
