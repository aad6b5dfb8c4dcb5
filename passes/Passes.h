// Graph-level passes over the attn dialect, and the graph pipeline every
// target's compile starts with.
#ifndef ATTNC_PASSES_PASSES_H
#define ATTNC_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace attnc {

/// Which entry points of a spec a compile emits (attn-keep-entry-points).
enum class EntryPoints { All, Forward, Backward };

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The graph stage of every compile: with `fuse`, calls inlined and
/// attention chains fused (attn-fuse); with `backward`, calls inlined and
/// @f_fwd/@f_bwd derived (attn-derive-backward).
void buildGraphPipeline(mlir::OpPassManager &pm, bool fuse, bool backward);

/// What the entries of an integer argument must satisfy for the kernels:
/// lie in [0, max], and with `sorted` be in nondecreasing order.
struct InputBound {
  int64_t max = 0;
  bool sorted = false;
};

/// The arguments of `func` whose entries the kernels bound, by argument
/// number: the lengths of a `cache` op in it (attn.attention,
/// attn.attention_grad, attn.mask, attn.append), up to the least capacity
/// (Skv) of those caches; the block table of a paged one, up to its last
/// page, N - 1; the sequence offsets of a `varlen` op, sorted, up to Skv
/// (attn-mark-length-bounds marks them; attnc run, bench and explain draw
/// random entries within them).
llvm::DenseMap<unsigned, InputBound>
integerInputBounds(mlir::func::FuncOp func);

} // namespace attnc

#endif // ATTNC_PASSES_PASSES_H
