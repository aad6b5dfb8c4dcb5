// The GPU tile planner (see GpuTilePlan.h).
#include "passes/GpuTilePlan.h"

#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"

using namespace mlir;

namespace attnc {

int64_t gpuSharedWords(Operation *op, int64_t queryBlock, int64_t keyBlock) {
  auto heads = [](Value query, Value value) {
    return std::pair(shapeOf(query)[3], shapeOf(value)[3]);
  };
  int64_t q = queryBlock, k = keyBlock;
  if (auto fwd = dyn_cast<attn::AttentionOp>(op)) {
    auto [d, dv] = heads(fwd.getQuery(), fwd.getValue());
    // Q, K, V, P and O tiles; row max, sum and rescale.
    return q * d + k * d + k * dv + q * k + q * dv + 3 * q;
  }
  if (auto stats = dyn_cast<attn::AttentionStatsOp>(op)) {
    int64_t d = shapeOf(stats.getQuery())[3], h = shapeOf(stats.getQuery())[1],
            group = h / shapeOf(stats.getKey())[1];
    // Rows kernel: Q, K and P tiles, the rows' entropy sums; similarity
    // kernel: the Q rows of one KV head's group, K, and every head's P.
    int64_t rows = q * d + k * d + q * k + q;
    int64_t similarity = group * q * d + k * d + h * q * k;
    return stats.getSimilarity() ? std::max(rows, similarity) : rows;
  }
  if (isa<attn::DistillOp, attn::DistillGradOp>(op)) {
    int64_t ds = shapeOf(op->getOperand(0))[3],
            dt = shapeOf(op->getOperand(3))[3];
    // KL (and dQ) kernel: both sides' Q and K tiles (with the gradients,
    // both dS and dQ tiles), the rows' sums; dK kernel: both sides' Q and K
    // tiles, dS^T and one side's dK.
    if (isa<attn::DistillOp>(op))
      return (q + k) * (ds + dt) + q;
    return std::max(2 * q * (ds + dt) + k * (ds + dt) + 2 * q * k + 2 * q,
                    (q + k) * (ds + dt) + k * q + k * std::max(ds, dt));
  }
  if (auto statsGrad = dyn_cast<attn::AttentionStatsGradOp>(op)) {
    int64_t d = shapeOf(statsGrad.getQuery())[3];
    // dQ kernel: Q, K, dS and dQ tiles, the rows' dLSE sums; dK kernel: K,
    // Q, dS^T and dK tiles.
    return std::max(2 * q * d + k * d + q * k + q, 2 * k * d + q * d + k * q);
  }
  auto grad = cast<attn::AttentionGradOp>(op);
  auto [d, dv] = heads(grad.getQuery(), grad.getValue());
  // dQ kernel: Q, dO, K, V, dS and dQ tiles; LSE, Delta and dLSE.
  int64_t dq = q * d + q * dv + k * d + k * dv + q * k + q * d + 3 * q;
  // dK/dV kernel: K, V, Q and dO tiles, P and dS (transposed), and the dK
  // and dV accumulators.
  int64_t dkv = 2 * k * d + 2 * k * dv + q * d + q * dv + 2 * q * k;
  return std::max(dq, dkv);
}

attn::GpuPlanAttr planGpuTiles(Operation *op, const GpuTarget &target) {
  int64_t budget = target.sharedMemoryBytes / 4;
  // Halve the key block first (it costs K and V tiles), then the rows.
  for (int64_t queryBlock = 16; queryBlock >= 1; queryBlock /= 2)
    for (int64_t keyBlock = 32; keyBlock >= 4; keyBlock /= 2)
      if (gpuSharedWords(op, queryBlock, keyBlock) <= budget)
        return attn::GpuPlanAttr::get(
            op->getContext(), queryBlock, keyBlock, target.workgroupSize,
            std::max<int64_t>(1, target.workgroupSize / target.subgroupSize),
            /*stages=*/1, /*shared_kv=*/true);
  return nullptr;
}

attn::MmaPlanAttr planMmaTiles(Operation *op, bool wgmma, bool atomicDq) {
  auto covered = [](ArrayRef<Value> tensors) {
    Type element = elementTypeOf(tensors.front());
    if (!element.isF16() && !element.isBF16())
      return false;
    return llvm::all_of(tensors,
                        [&](Value t) { return elementTypeOf(t) == element; });
  };
  auto headsFit = [](Value query, Value value) {
    int64_t d = shapeOf(query)[3], dv = shapeOf(value)[3];
    return d % 16 == 0 && dv % 16 == 0 && d <= 128 && dv <= 128;
  };
  MLIRContext *context = op->getContext();
  if (auto fwd = dyn_cast<attn::AttentionOp>(op)) {
    if (fwd.getPages() ||
        !covered(
            {fwd.getQuery(), fwd.getKey(), fwd.getValue(), fwd.getOutput()}) ||
        !headsFit(fwd.getQuery(), fwd.getValue()))
      return nullptr;
    int64_t d = shapeOf(fwd.getQuery())[3], dv = shapeOf(fwd.getValue())[3];
    // One warpgroup of 64 rows; K and V of 128 keys (64 with heads of
    // 128), two stages each: 73 and 81 KiB of shared memory.
    if (wgmma && d % 64 == 0 && dv % 64 == 0)
      return attn::MmaPlanAttr::get(context, /*warps=*/4, /*queryBlock=*/64,
                                    /*keyBlock=*/std::max(d, dv) > 64 ? 64
                                                                      : 128,
                                    /*wgmma=*/true, /*atomicDq=*/false);
    // 4 warps of 16 query rows; 64 keys a step (K and V tiles, two stages
    // of each, in shared memory).
    return attn::MmaPlanAttr::get(context, /*warps=*/4, /*queryBlock=*/64,
                                  /*keyBlock=*/64, /*wgmma=*/false,
                                  /*atomicDq=*/false);
  }
  auto grad = dyn_cast<attn::AttentionGradOp>(op);
  if (!grad ||
      !covered({grad.getQuery(), grad.getKey(), grad.getValue(),
                grad.getOutput(), grad.getOutputGrad()}) ||
      !headsFit(grad.getQuery(), grad.getValue()) ||
      llvm::any_of(grad.getScoreCaptures(),
                   [](Value c) { return isFloatTensor(c); }))
    return nullptr;
  // The dQ kernel keeps dQ, Q and dO fragments in registers, the dK/dV
  // kernel dK and dV: with heads over 64, half the step.
  int64_t d =
      std::max(shapeOf(grad.getQuery())[3], shapeOf(grad.getValue())[3]);
  int64_t step = d > 64 ? 32 : 64;
  return attn::MmaPlanAttr::get(context, /*warps=*/4, step, step,
                                /*wgmma=*/false, atomicDq);
}

} // namespace attnc
