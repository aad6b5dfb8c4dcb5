// Reverse-mode gradients of the scalar code in score_mod regions.
//
// The rule table (ScalarGradients.cpp) is the one place that says which
// arith/math ops can be differentiated and how; attn-derive-backward checks
// regions against it and the lowering of attn.score_mod_grad and
// attn.attention_grad builds the reverse sweep with it.
#ifndef ATTNC_PASSES_SCALARGRADIENTS_H
#define ATTNC_PASSES_SCALARGRADIENTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

namespace attnc {

/// The adjoint of one read `tensor.extract %capture[indices]`.
struct CaptureAdjoint {
  unsigned capture;                    // index among the region's captures
  llvm::SmallVector<mlir::Value> indices; // the read's indices, at the builder
  mlir::Value adjoint; // d result / d element, times the seed, in f32
};

struct ScoreModAdjoints {
  mlir::Value result;    // the region's value
  mlir::Value scoreAdjoint; // seed * d result / d score
  llvm::SmallVector<CaptureAdjoint> captures;
};

/// Emits a located error for the first op of a score_mod region that has no
/// gradient rule.
mlir::LogicalResult checkDifferentiable(mlir::Region &region);

/// Clones the score_mod `region` at `b` with its arguments bound to
/// (score, b, h, i, j, captures...), then builds the reverse sweep seeded
/// with `seed` (an f32). The region must pass checkDifferentiable.
ScoreModAdjoints buildScoreModAdjoints(mlir::OpBuilder &b, mlir::Location loc,
                                       mlir::Region &region,
                                       mlir::ValueRange arguments,
                                       mlir::Value seed);

} // namespace attnc

#endif // ATTNC_PASSES_SCALARGRADIENTS_H
