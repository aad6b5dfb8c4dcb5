// The GPU tile planner: how many query rows a workgroup owns, how many keys
// one online-softmax step stages in workgroup memory, and how many
// invocations a workgroup has. attn-plan-gpu-tiles records the decisions on
// each op as a typed #attn.gpu_plan (dialect/AttnAttrs.td); attn-lower-gpu
// reads every decision from it.
#ifndef ATTNC_PASSES_GPUTILEPLAN_H
#define ATTNC_PASSES_GPUTILEPLAN_H

#include "dialect/AttnAttrs.h"

#include "mlir/IR/Operation.h"

namespace attnc {

/// What a GPU plan depends on in the target.
struct GpuTarget {
  /// Workgroup memory one kernel may use.
  int64_t sharedMemoryBytes = 32768;
  int64_t workgroupSize = 64;
  /// The usual subgroup size (the kernels do not depend on it).
  int64_t subgroupSize = 32;
};

/// The f32 words of workgroup memory the flash kernels of `op` (an
/// attn.attention, attn.attention_grad, attn.attention_stats(_grad) or
/// attn.distill(_grad)) stage for
/// `queryBlock` rows and `keyBlock` keys: the forward's, or the largest of
/// the backward's or the statistics' kernels.
int64_t gpuSharedWords(mlir::Operation *op, int64_t queryBlock,
                       int64_t keyBlock);

/// The plan of `op` on `target`, or null when no tiles fit.
attn::GpuPlanAttr planGpuTiles(mlir::Operation *op, const GpuTarget &target);

/// The tensor-core plan of `op` (an attn.attention or attn.attention_grad)
/// for NVIDIA's mma.sync kernels, or null when they do not cover it: Q, K,
/// V (and O, dO) of one type, f16 or bf16; head dimensions multiples of 16
/// up to 128; no paged cache; for a gradient, no float score captures
/// (their gradients keep the portable kernels).
/// With `wgmma` (sm_90a), forwards whose heads are 64 or 128 wide get
/// Hopper's warpgroup MMA.
/// With `atomicDq`, a backward's dK/dV kernel adds dQ with atomics (else
/// dQ has a kernel of its own, deterministic).
attn::MmaPlanAttr planMmaTiles(mlir::Operation *op, bool wgmma, bool atomicDq);

} // namespace attnc

#endif // ATTNC_PASSES_GPUTILEPLAN_H
