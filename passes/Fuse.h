// Rewriting unfused attention chains into attn.attention (see attn-fuse).
#ifndef ATTNC_PASSES_FUSE_H
#define ATTNC_PASSES_FUSE_H

#include "dialect/AttnOps.h"

#include "mlir/IR/PatternMatch.h"

namespace attnc {

/// Replaces the chain that ends in `apply`,
///   attn.scores -> attn.scale* -> attn.score_mod? -> attn.mask* ->
///   attn.softmax -> attn.apply,
/// by one attn.attention when every intermediate value has exactly that one
/// use, Q/K/V share an element type, and the masks combine (at most one
/// lengths tensor and one mask_mod region; no zero_fill). Returns the new op
/// or failure, leaving the IR untouched.
mlir::FailureOr<attn::AttentionOp>
fuseAttentionChain(mlir::RewriterBase &rewriter, attn::ApplyOp apply);

/// Adds the pattern that applies fuseAttentionChain to every attn.apply.
void populateAttnFusePatterns(mlir::RewritePatternSet &patterns);

} // namespace attnc

#endif // ATTNC_PASSES_FUSE_H
