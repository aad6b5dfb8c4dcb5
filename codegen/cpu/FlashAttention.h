// The flash-attention CPU kernels of attn.attention and
// attn.attention_grad: online softmax over key tiles, never an Sq x Skv
// buffer, AVX-512-width vector microkernels (and AMX tiles for bf16
// forwards where the plan says so). Entry points in the style of Linalg's
// transforms: each builds the kernel in place of the op and replaces it.
#ifndef ATTNC_CODEGEN_CPU_FLASHATTENTION_H
#define ATTNC_CODEGEN_CPU_FLASHATTENTION_H

#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/PatternMatch.h"

namespace attnc {

/// Whether the flash kernels cover `op`: f32, f16 or bf16 (computed in
/// f32), head dimensions that are multiples of 16 (Dv for the forward, D and
/// Dv for the backward), score_mod and mask_mod regions that canWidenRegion
/// evaluates on 16 lanes, and for the backward float score captures whose
/// per-task partial gradients (one per task of `plan`) fit in 64 MB. Other
/// ops keep the unfused lowering.
bool canLowerToFlashCpu(attn::AttentionOp op);
bool canLowerToFlashCpu(attn::AttentionGradOp op, attn::CpuPlanAttr plan);
/// attn.attention_stats: float Q and K and widenable regions; attn.distill
/// likewise (its mask_mod region).
bool canLowerToFlashCpu(attn::AttentionStatsOp op);
bool canLowerToFlashCpu(attn::DistillOp op);
/// attn.distill_grad: also head dimensions that are multiples of 16 (its dQ
/// products).
bool canLowerToFlashCpu(attn::DistillGradOp op);
/// attn.attention_stats_grad: float Q and K, widenable regions, a head
/// dimension that is a multiple of 16 and float score captures whose
/// partial gradients (one per query tile of `plan`) fit as the backward's.
bool canLowerToFlashCpu(attn::AttentionStatsGradOp op, attn::CpuPlanAttr plan);

/// What lowerToFlashForward built: O and LSE.
struct FlashForwardResult {
  mlir::Value output, lse;
};

/// What the forward kernel of `op` computes, online, for an
/// attn.attention_stats over its LSE with its Q, K, options and regions
/// (the first such user): the entropies (entropy, mean_entropy), the head
/// similarity, and the pooled map when each query tile of `plan` spans at
/// most two of its row cells (Sq / Gq >= rows). Null `op` when there is no
/// such user or it asks for none of these.
struct ForwardStatistics {
  attn::AttentionStatsOp op;
  bool entropy = false, similarity = false;
  int64_t gq = 0, gk = 0; // the pooled grid, 0 when not computed
};
ForwardStatistics forwardStatistics(attn::AttentionOp op,
                                    attn::CpuPlanAttr plan);

/// Builds the forward kernel of `op` as `plan` says, for vector registers
/// `vectorBits` wide (512: exp through AVX-512's vscalefps), before
/// bufferization (inputs through bufferization.to_buffer, results back
/// through to_tensor), and replaces `op` with it. With plan.amx the
/// products run on AMX tiles and the module is marked attn.uses_amx (its
/// entry points must first get the OS's leave: attn-export-abi). With
/// forwardStatistics, the kernel computes those statistics too, and the
/// companion keeps only its others (or goes). Fails, changing
/// nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<FlashForwardResult>
lowerToFlashForward(mlir::RewriterBase &rewriter, attn::AttentionOp op,
                    attn::CpuPlanAttr plan, int64_t vectorBits);

/// An attn.attention_stats_grad whose gradients add to those of an
/// attn.attention_grad: the same Q, K, LSE, options and regions, its LSE
/// gradient the attention's lse_grad and nothing else's, and each of its dQ,
/// dK and capture gradients used once, by an arith.addf with the
/// attention's (as attn-derive-backward builds an entropy penalty's
/// backward). lowerToFlashBackward computes both in one kernel.
struct EntropyGradient {
  attn::AttentionStatsGradOp op;
  /// The sums to replace: with dQ, dK, then each score capture's gradient
  /// (null where op's gradient is unused).
  llvm::SmallVector<mlir::Operation *> sums;
};
EntropyGradient entropyGradientOf(attn::AttentionGradOp op);

/// The FlashAttention-2 backward in one pass over key blocks (dK/dV per key
/// block, dQ into one copy per split of the key blocks summed in order:
/// deterministic, no atomics), recomputing P from LSE, in place of `op`;
/// returns its results: (dQ, dK, dV) and one gradient per score capture
/// (zeros for integer ones). With an entropyGradientOf(op), the kernel
/// adds the entropy's gradients (dS' -= g P (S' - mu), the rows' entropies
/// from a statistics kernel first) and replaces the sums of the two ops'
/// gradients. Fails, changing nothing, when !canLowerToFlashCpu(op, plan).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashBackward(mlir::RewriterBase &rewriter, attn::AttentionGradOp op,
                     attn::CpuPlanAttr plan, int64_t vectorBits);

/// The statistics of attn.attention_stats from P recomputed a score tile
/// at a time (FlashStats.h), in place of `op`; returns its results. Fails,
/// changing nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashStats(mlir::RewriterBase &rewriter, attn::AttentionStatsOp op,
                  attn::CpuPlanAttr plan, int64_t vectorBits);

/// attn.attention_stats_grad's gradients (dQ, dK, dLSE, then one per score
/// capture) in two passes (FlashStatsGrad.cpp): per query tile dQ, dLSE and
/// the capture gradients' partials, per key block dK, each recomputing P
/// from the LSE; in place of `op`. For one that no attention backward took
/// in (entropyGradientOf). Fails, changing nothing, when
/// !canLowerToFlashCpu(op, plan).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashStatsGrad(mlir::RewriterBase &rewriter,
                      attn::AttentionStatsGradOp op, attn::CpuPlanAttr plan,
                      int64_t vectorBits);

/// attn.distill's KL per row (or its mean) from both sides' score tiles and
/// LSEs a key block at a time (FlashDistill.cpp), in place of `op`; returns
/// it. Fails, changing nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<mlir::Value> lowerToFlashDistill(mlir::RewriterBase &rewriter,
                                                 attn::DistillOp op,
                                                 attn::CpuPlanAttr plan,
                                                 int64_t vectorBits);

/// attn.distill_grad's six gradients in two passes (FlashDistill.cpp): per
/// query tile dQ and dLSE of both sides, per key block and side its dK,
/// each recomputing the score tiles; in place of `op`. Fails, changing
/// nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashDistillGrad(mlir::RewriterBase &rewriter, attn::DistillGradOp op,
                        attn::CpuPlanAttr plan, int64_t vectorBits);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHATTENTION_H
