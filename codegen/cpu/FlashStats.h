// The CPU kernel of attn.attention_stats (FlashStats.cpp): P recomputed
// from the LSE a score tile at a time (P = exp(S' - LSE), no online
// softmax), folded into the statistics and dropped, never an Sq x Skv
// buffer. Private to the CPU lowering; FlashAttention.h is the interface.
#ifndef ATTNC_CODEGEN_CPU_FLASHSTATS_H
#define ATTNC_CODEGEN_CPU_FLASHSTATS_H

#include "codegen/cpu/FlashCommon.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

namespace attnc {

/// A task is one (batch, row cell): the rows of one cell of the pooled
/// grid (or of a chunk of query tiles without one), all heads, so that it
/// owns its rows of the pooled maps and has every head's P of a score tile
/// at once for the head similarity. Per task and key block, each head's
/// scores come from the tile products of FlashCommon, then per element
///   p = exp(S' - LSE), entropy terms p (LSE - S') summed in 16 lanes a row,
///   p summed over the tile's rows per key (the pooled map's columns),
///   and with similarity every head's p kept, so that after the heads
///   sum_{r, j} p_h p_g adds into the task's H x H partial.
/// The similarity's partials are summed over the cells in order afterwards,
/// and the mean entropy over the rows (deterministic for any thread count).
class FlashStats : public FlashCommon {
public:
  FlashStats(mlir::ImplicitLocOpBuilder &b, attn::AttentionStatsOp op,
             attn::CpuPlanAttr plan, int64_t vectorBits);

  /// The statistics the op returns, in its result order.
  llvm::SmallVector<mlir::Value> build();

private:
  /// One task: the rows of cell `cell` of batch bi.
  void task(mlir::ArrayRef<mlir::Value> args,
            mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
            mlir::Value cell);
  /// The keys [j0, j0 + width) for the query tile from i0 (rows below
  /// rowEnd), every head.
  void keyBlock(mlir::ArrayRef<mlir::Value> args,
                mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
                mlir::Value cell, mlir::Value i0, mlir::Value rowEnd,
                mlir::Value limit, const MaskTiles::KeyRange &keys,
                mlir::Value j0);
  /// pooled[bi, h, cell, J] += the column sums of the block's keys, each
  /// key into its cell J.
  void addColumnSums(mlir::Value pooled, mlir::Value colSums, mlir::Value bi,
                     mlir::Value h, mlir::Value cell, mlir::Value j0);

  attn::AttentionStatsOp op;
  bool entropy, meanEntropy, similarity;
  int64_t gq = 0, gk = 0; // the pooled grid (0: none)
  int64_t cells;          // row cells (tasks per batch)
  int64_t blockTiles;     // 32-key tiles per key block
  int64_t width;          // keys per block
  bool amx;               // Q K^T on AMX tiles (bf16, 16-row tiles)
  // The arguments' positions in a task.
  static constexpr unsigned kQ = 0, kKt = 1, kLse = 2, kEntropy = 3,
                            kPooled = 4, kSimParts = 5, kLengths = 6;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHSTATS_H
