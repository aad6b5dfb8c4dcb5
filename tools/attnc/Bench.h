// attnc bench: time a spec's kernels on random inputs and report GFLOP/s,
// the fraction of the machine's measured FMA peak, and peak memory.
#ifndef ATTNC_TOOLS_ATTNC_BENCH_H
#define ATTNC_TOOLS_ATTNC_BENCH_H

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace attnc {

struct BenchOptions {
  int threads = 0; // 0: the runtime's default (ATTNC_NUM_THREADS or cores)
  int reps = 10;
  bool json = false;
  bool backward = true;
};

int benchSpec(const std::string &path, const BenchOptions &options,
              llvm::raw_ostream &outs, llvm::raw_ostream &errs);

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_BENCH_H
