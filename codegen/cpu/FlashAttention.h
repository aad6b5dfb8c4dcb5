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
/// attn.attention_stats: float Q and K and widenable regions.
bool canLowerToFlashCpu(attn::AttentionStatsOp op);

/// What lowerToFlashForward built: O and LSE.
struct FlashForwardResult {
  mlir::Value output, lse;
};

/// The attn.attention_stats over `op`'s LSE with its Q, K, options and
/// regions that asks for the entropies (entropy or mean_entropy), if any:
/// lowerToFlashForward computes them in the forward kernel, online.
attn::AttentionStatsOp entropyCompanion(attn::AttentionOp op);

/// Builds the forward kernel of `op` as `plan` says, for vector registers
/// `vectorBits` wide (512: exp through AVX-512's vscalefps), before
/// bufferization (inputs through bufferization.to_buffer, results back
/// through to_tensor), and replaces `op` with it. With plan.amx the
/// products run on AMX tiles and the module is marked attn.uses_amx (its
/// entry points must first get the OS's leave: attn-export-abi). With an
/// entropyCompanion, the kernel computes its entropies too, and the
/// companion keeps only its other statistics (or goes). Fails, changing
/// nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<FlashForwardResult>
lowerToFlashForward(mlir::RewriterBase &rewriter, attn::AttentionOp op,
                    attn::CpuPlanAttr plan, int64_t vectorBits);

/// The FlashAttention-2 backward in one pass over key blocks (dK/dV per key
/// block, dQ into one copy per split of the key blocks summed in order:
/// deterministic, no atomics), recomputing P from LSE, in place of `op`;
/// returns its results: (dQ, dK, dV) and one gradient per score capture
/// (zeros for integer ones). Fails, changing nothing, when
/// !canLowerToFlashCpu(op, plan).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashBackward(mlir::RewriterBase &rewriter, attn::AttentionGradOp op,
                     attn::CpuPlanAttr plan, int64_t vectorBits);

/// The statistics of attn.attention_stats from P recomputed a score tile
/// at a time (FlashStats.h), in place of `op`; returns its results. Fails,
/// changing nothing, when !canLowerToFlashCpu(op).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToFlashStats(mlir::RewriterBase &rewriter, attn::AttentionStatsOp op,
                  attn::CpuPlanAttr plan, int64_t vectorBits);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHATTENTION_H
