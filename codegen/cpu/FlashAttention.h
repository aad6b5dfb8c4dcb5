// The flash-attention CPU kernel of attn.attention: online softmax over key
// tiles, never an Sq x Skv buffer, AVX-512-width vector microkernels.
#ifndef ATTNC_CODEGEN_CPU_FLASHATTENTION_H
#define ATTNC_CODEGEN_CPU_FLASHATTENTION_H

#include "dialect/AttnOps.h"
#include "passes/TilePlan.h"

#include "mlir/IR/Builders.h"

namespace attnc {

/// Whether the flash kernels cover `op`: f32, f16 or bf16 (computed in
/// f32), head dimensions that are multiples of 16 (Dv for the forward, D and
/// Dv for the backward), score_mod and mask_mod regions that canWidenRegion
/// evaluates on 16 lanes, and for the backward float score captures whose
/// per-task partial gradients fit in 64 MB. Other ops keep the unfused
/// lowering.
bool canLowerToFlashCpu(attn::AttentionOp op);
bool canLowerToFlashCpu(attn::AttentionGradOp op,
                        const TilePlan &plan);

/// Whether the forward kernel of `op` multiplies on AMX tiles
/// (usesAmxTiles, with a plan of 16-row tiles and 32-key steps). Entry
/// points of a module with such kernels must first get the OS's leave
/// (attnc_amx_init; attn-lower-cpu marks the module attnc.uses_amx).
bool flashForwardUsesAmx(attn::AttentionOp op, const TilePlan &plan,
                         const TileTarget &target);

/// Builds the kernel at `b` (before bufferization: inputs go through
/// bufferization.to_buffer, results come back through to_tensor) and
/// returns (O, LSE).
std::pair<mlir::Value, mlir::Value>
buildFlashAttentionCpu(mlir::OpBuilder &b, attn::AttentionOp op,
                       const TilePlan &plan, const TileTarget &target);

/// The FlashAttention-2 backward in one pass over key tiles (dK/dV per key
/// tile, dQ into one copy per split of the key tiles summed in order:
/// deterministic, no atomics), recomputing P from LSE; returns
/// (dQ, dK, dV) and one gradient per score capture (zeros for integer ones).
llvm::SmallVector<mlir::Value>
buildFlashAttentionGradCpu(mlir::OpBuilder &b, attn::AttentionGradOp op,
                           const TilePlan &plan, const TileTarget &target);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHATTENTION_H
