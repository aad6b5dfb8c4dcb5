// attnc run: JIT a spec, run it on random inputs and compare the forward and
// every gradient with the float64 reference.
#ifndef ATTNC_TOOLS_ATTNC_RUN_H
#define ATTNC_TOOLS_ATTNC_RUN_H

#include "attnc/jit.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace attnc {

struct RunOptions {
  bool check = false;   // fail when an error exceeds its dtype's tolerance
  bool backward = true; // also check <f>_bwd
  uint64_t seed = 1;
  jit::Target target = jit::Target::Cpu; // what the kernels run on (--target)
  int64_t batch = 0; // a dynamic batch's size (--batch; 0: not given)
};

/// Returns the process exit code; diagnostics go to `errs`.
int runSpec(const std::string &path, const RunOptions &options,
            llvm::raw_ostream &outs, llvm::raw_ostream &errs);

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_RUN_H
