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

/// What attn-derive-backward's "has no gradient rule" errors end with: the
/// way to compile a spec's forward alone (attnc compile, run and bench take
/// --no-backward; the JIT has Options::backward).
inline constexpr const char *kNoBackwardHint =
    "; or compile with --no-backward (jit::Options::backward = false) for "
    "the forward only";

/// Emits a located error for the first op of a score_mod region that has no
/// gradient rule, ending with `hint` (kNoBackwardHint where the gradient is
/// derived; nothing for a hand-written gradient op, which needs its rules
/// whatever the options).
mlir::LogicalResult checkDifferentiable(mlir::Region &region,
                                        llvm::StringRef hint = {});

/// Clones the score_mod `region` at `b` with its arguments bound to
/// (score, b, h, i, j, captures...), then builds the reverse sweep seeded
/// with `seed` (an f32). The region must pass checkDifferentiable.
ScoreModAdjoints buildScoreModAdjoints(mlir::OpBuilder &b, mlir::Location loc,
                                       mlir::Region &region,
                                       mlir::ValueRange arguments,
                                       mlir::Value seed);

/// Whether the score_mod `region` reads score capture `capture` only as
/// `tensor.extract %c[..., %j]`, at the key j of the score as its last
/// index, and its last dimension holds `keys` keys or more: then its
/// gradient's element (..., j) takes terms of key j alone, and backward
/// tasks that own disjoint keys can sum into one gradient without copies.
bool isReadAtItsKey(mlir::Region &region, unsigned capture, int64_t keys);

/// Whether the score_mod `region` reads score capture `capture` only as
/// `tensor.extract` whose last index is the key j plus or minus values
/// that do not depend on j (`rel[h, j - i + 127]`), its other indices
/// independent of j: each of a row's keys reads its own element, so no
/// element of the capture's gradient sums terms of one row's keys (whose
/// sum cancels: sum_j P (dP - Delta) = 0).
bool isReadOncePerRow(mlir::Region &region, unsigned capture);

} // namespace attnc

#endif // ATTNC_PASSES_SCALARGRADIENTS_H
