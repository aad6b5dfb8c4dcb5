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

/// The arguments of `func` that give the lengths of a `cache` op in it
/// (attn.attention, attn.attention_grad, attn.mask, attn.append) or the
/// block table of a paged one, by argument number, each with the largest value
/// its entries may hold: the least capacity (Skv) of those caches, or the last
/// page, N - 1 (attn-mark-length-bounds marks them; attnc run, bench and
/// explain draw random entries within them).
llvm::DenseMap<unsigned, int64_t> cacheInputBounds(mlir::func::FuncOp func);

} // namespace attnc

#endif // ATTNC_PASSES_PASSES_H
