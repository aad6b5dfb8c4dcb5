// The flash-attention CPU kernel of attn.attention: online softmax over key
// tiles, never an Sq x Skv buffer, AVX-512-width vector microkernels.
#ifndef ATTNC_CODEGEN_CPU_FLASHATTENTION_H
#define ATTNC_CODEGEN_CPU_FLASHATTENTION_H

#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/Builders.h"

namespace attnc {

/// Whether the flash kernels cover `op`: f32, f16 or bf16 (computed in
/// f32), head dimensions that are multiples of 16 (Dv for the forward, D and
/// Dv for the backward), score_mod and mask_mod regions that canWidenRegion
/// evaluates on 16 lanes, and for the backward float score captures whose
/// per-task partial gradients fit in 64 MB. Other ops keep the unfused
/// lowering.
bool canLowerToFlashCpu(attn::AttentionOp op);
bool canLowerToFlashCpu(attn::AttentionGradOp op, attn::CpuPlanAttr plan);

/// Builds the kernel at `b` (before bufferization: inputs go through
/// bufferization.to_buffer, results come back through to_tensor) as `plan`
/// says (on AMX tiles with plan.amx; entry points of a module with such
/// kernels must first get the OS's leave: attn-lower-cpu marks the module
/// attn.uses_amx), for vector registers `vectorBits` wide (512: exp uses
/// AVX-512's vscalefps), and returns (O, LSE).
std::pair<mlir::Value, mlir::Value>
buildFlashAttentionCpu(mlir::OpBuilder &b, attn::AttentionOp op,
                       attn::CpuPlanAttr plan, int64_t vectorBits);

/// The FlashAttention-2 backward in one pass over key tiles (dK/dV per key
/// tile, dQ into one copy per split of the key tiles summed in order:
/// deterministic, no atomics), recomputing P from LSE; returns
/// (dQ, dK, dV) and one gradient per score capture (zeros for integer ones).
llvm::SmallVector<mlir::Value>
buildFlashAttentionGradCpu(mlir::OpBuilder &b, attn::AttentionGradOp op,
                           attn::CpuPlanAttr plan, int64_t vectorBits);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHATTENTION_H
