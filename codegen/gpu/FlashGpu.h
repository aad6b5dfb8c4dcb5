// The target-neutral GPU flash-attention kernels of attn.attention,
// attn.attention_grad, attn.attention_stats(_grad) and attn.distill(_grad):
// gpu.launch ops whose workgroups stage query rows and key blocks in workgroup
// memory between barriers, keep the online softmax's row statistics with
// subgroup reductions (any subgroup size: each subgroup owns whole rows, its
// lanes stride over keys, then over the value dimension) and skip the key
// blocks the named masks empty (MaskTiles, as the CPU kernels do). Built before
// bufferization: inputs through bufferization.to_buffer, results back through
// to_tensor.
#ifndef ATTNC_CODEGEN_GPU_FLASHGPU_H
#define ATTNC_CODEGEN_GPU_FLASHGPU_H

#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/PatternMatch.h"

namespace attnc {

/// Whether the GPU flash kernels cover `op`: every attn.attention (a
/// paged cache's pages read through its table), and
/// every attn.attention_grad whose float score captures' per-key partial
/// gradients fit in 64 MiB (others keep the unfused lowering).
bool canLowerToFlashGpu(attn::AttentionOp op);
bool canLowerToFlashGpu(attn::AttentionGradOp op);

/// Builds the forward kernel of `op` as `plan` says in place of `op`.
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::AttentionOp op,
                                    attn::GpuPlanAttr plan);

/// Builds the backward kernels of `op` (dQ with the exact row Deltas, then
/// dK and dV per key block summed over the query heads of each KV head; no
/// atomics) in place of `op`.
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::AttentionGradOp op,
                                    attn::GpuPlanAttr plan);

/// Builds the statistics kernels of `op` in place of `op`: the entropies
/// and pooled rows from P recomputed from the LSE a key block at a time,
/// the head similarity's partials from every head's P of a key block in
/// workgroup memory, then the means and norms (FlashGpuStats.cpp). No
/// Sq x Skv buffer; no atomics.
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::AttentionStatsOp op,
                                    attn::GpuPlanAttr plan);

/// Whether the GPU kernels cover `op`: those whose float score captures'
/// per-key partial gradients fit in 64 MiB (others keep the unfused
/// lowering).
bool canLowerToFlashGpu(attn::AttentionStatsGradOp op);

/// Builds the entropy's gradient kernels of `op` in place of `op`: g per
/// row, then dQ and dLSE per query block and dK per key block from P
/// recomputed from the LSE (FlashGpuStatsGrad.cpp). No Sq x Skv buffer; no
/// atomics.
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::AttentionStatsGradOp op,
                                    attn::GpuPlanAttr plan);

/// Builds the kernels of `op` in place of `op`: the KL per row from both
/// sides' scores a key block at a time (and its mean over the rows that see
/// a key), or its gradients: both sides' dQ and dLSE per query block, each
/// side's dK per key block of its KV heads (FlashGpuDistill.cpp). No Sq x
/// Skv buffer; no atomics.
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::DistillOp op, attn::GpuPlanAttr plan);
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::DistillGradOp op,
                                    attn::GpuPlanAttr plan);

/// attn.append in place of `op` (AppendGpu.cpp): a kernel that copies the
/// new rows into the cache's own buffer, the op's result (in place, nothing
/// of the cache copied). Rows at positions outside the capacity, and
/// positions whose page-table entry is outside the pool, are not written
/// (the lengths and tables are on the device: no status).
mlir::LogicalResult lowerToFlashGpu(mlir::RewriterBase &rewriter,
                                    attn::AppendOp op);

} // namespace attnc

#endif // ATTNC_CODEGEN_GPU_FLASHGPU_H
