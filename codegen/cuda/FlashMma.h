// The NVIDIA tensor-core flash kernels of attn.attention and
// attn.attention_grad: gpu.launch ops whose warps each own 16 rows (query
// rows, or keys in the dK/dV kernel) of the tiles they accumulate in
// registers with mma.sync.m16n8k16 (f16 or bf16 operands, f32
// accumulators), read their multiplicands from shared memory with ldmatrix
// and stage the next key (or query) block with cp.async while they compute
// on the current one. The scores' rule (scale, score_mod, named masks,
// mask_mod) is the portable kernels' (GpuKernelBuilder.h), evaluated per
// accumulator element on the key blocks MaskTiles does not skip. Built
// before bufferization, as the portable kernels are; what they need from
// the plan is in #attn.mma_plan (attn-plan-gpu-tiles with tensor-cores).
#ifndef ATTNC_CODEGEN_CUDA_FLASHMMA_H
#define ATTNC_CODEGEN_CUDA_FLASHMMA_H

#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/PatternMatch.h"

namespace attnc {

/// The forward kernel of `op`: a workgroup per (query block, batch x head),
/// O, the running maximum and sum in registers, O and the LSE stored once.
mlir::LogicalResult lowerToFlashMma(mlir::RewriterBase &rewriter,
                                    attn::AttentionOp op,
                                    attn::MmaPlanAttr plan);

/// The forward kernel of `op` on Hopper's warpgroup MMA (a plan with
/// `wgmma`): a warpgroup per (64 query rows, batch x head), Q, K and V
/// staged in shared memory in wgmma's swizzled layout, P V from registers.
mlir::LogicalResult lowerToFlashWgmma(mlir::RewriterBase &rewriter,
                                      attn::AttentionOp op,
                                      attn::MmaPlanAttr plan);

/// The backward kernels of `op` (FlashAttention-2's, deterministic: no
/// atomics): Delta = rowsum(dO * O) - dLSE; dQ per (query block, batch x
/// head); dK and dV per (key block, batch x KV head), summed over the
/// query heads of the group in head order.
mlir::LogicalResult lowerToFlashMma(mlir::RewriterBase &rewriter,
                                    attn::AttentionGradOp op,
                                    attn::MmaPlanAttr plan);

} // namespace attnc

#endif // ATTNC_CODEGEN_CUDA_FLASHMMA_H
