// Compile-time analysis of mask_mod regions: conjuncts that compare affine
// functions of the query index i and the key index j become named masks
// (causal, window), which the tiled kernels analyse per tile: tiles such a
// mask empties are skipped, tiles it leaves whole run without evaluating
// any mask, only boundary tiles evaluate it.
#ifndef ATTNC_PASSES_MASKANALYSIS_H
#define ATTNC_PASSES_MASKANALYSIS_H

#include "dialect/AttnOps.h"

namespace attnc {

/// Bounds on i - j that a mask_mod region implies through a conjunction
/// (arith.andi) of arith.cmpi on index expressions built from i, j and
/// constants with addi, subi and muli by a constant. `exact` when the
/// region is nothing but those conjuncts.
struct IndexBounds {
  std::optional<int64_t> lo, hi; // lo <= i - j <= hi
  bool exact = false;
};
IndexBounds analyzeMaskMod(mlir::Region &maskMod);

/// Adds the named masks (causal, a narrower window) that the op's mask_mod
/// region implies, and drops the region and its captures when the named
/// masks say all it says. Returns whether the op changed.
bool promoteMaskMod(attn::AttentionOp op);
bool promoteMaskMod(attn::AttentionGradOp op);
bool promoteMaskMod(attn::AttentionStatsGradOp op);

/// What the tile planners do first: for an attn.attention(_grad),
/// attn.attention_stats(_grad) or attn.distill(_grad), promoteMaskMod and
/// true;
/// false for other ops.
bool promoteMaskModOfFusedOp(mlir::Operation *op);

} // namespace attnc

#endif // ATTNC_PASSES_MASKANALYSIS_H
