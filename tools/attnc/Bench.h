// attnc bench: time a spec's kernels on random inputs and report GFLOP/s,
// the fraction of the machine's measured FMA peak, and peak memory.
#ifndef ATTNC_TOOLS_ATTNC_BENCH_H
#define ATTNC_TOOLS_ATTNC_BENCH_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnc {

struct BenchOptions {
  int threads = 0; // 0: the runtime's default (ATTNC_NUM_THREADS or cores)
  int reps = 10;
  bool json = false;
  bool backward = true;
  int64_t batch = 0; // a dynamic batch's size (--batch; 0: not given)
  /// Integer inputs given one value each instead of random ones (NAME=N:
  /// e.g. the key lengths of a cache), by the spec's argument names.
  std::vector<std::pair<std::string, int64_t>> fills;
  /// Integer inputs given a random permutation of 0 .. n - 1 over their n
  /// entries (NAME=shuffled: a paged cache's block table naming each page
  /// of its pool once, in scattered order).
  std::vector<std::string> shuffled;
};

int benchSpec(const std::string &path, const BenchOptions &options,
              llvm::raw_ostream &outs, llvm::raw_ostream &errs);

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_BENCH_H
