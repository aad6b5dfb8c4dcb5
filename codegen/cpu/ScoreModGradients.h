// What the CPU kernels that differentiate through a score_mod share
// (ScoreModGradients.cpp): P recomputed from a saved or given LSE, the
// score_mod's reverse sweep widened to 16 lanes, the float score captures'
// partial gradients (a row per task, summed in task order afterwards:
// deterministic for any thread count), and the rows' cotangents of the
// entropies. The attention backward (FlashBackward.h) and the statistics'
// gradient (FlashStatsGrad.cpp) derive from it. Private to the CPU lowering.
#ifndef ATTNC_CODEGEN_CPU_SCOREMODGRADIENTS_H
#define ATTNC_CODEGEN_CPU_SCOREMODGRADIENTS_H

#include "codegen/cpu/FlashCommon.h"

#include "mlir/IR/Region.h"

#include <memory>

namespace attnc {

class ScoreModGradients : public FlashCommon {
public:
  /// Whether `tasks` rows of partial gradients of the float score captures
  /// whose gradients (`grads`) something reads take at most 2^24 floats
  /// (64 MB) or four score matrices' worth (of `scoreFloats` each; the
  /// unfused lowering, which would take the op instead, keeps several of
  /// those: a [Sq, Skv] bias at S = 2048 took 29 s there, 0.1 s here).
  /// With `keyTaskKeys` > 0 (a backward's key_tasks over that many keys),
  /// a capture read at its keys (isReadAtItsKey) has one row whatever the
  /// tasks.
  static bool partialsFit(mlir::Region &scoreMod,
                          mlir::ValueRange scoreCaptures,
                          mlir::ValueRange grads, int64_t tasks,
                          int64_t scoreFloats, int64_t keyTaskKeys = 0);

protected:
  template <typename OpTy>
  ScoreModGradients(mlir::ImplicitLocOpBuilder &b, OpTy op, int64_t rows,
                    int64_t vectorBits)
      : FlashCommon(b, op, rows, vectorBits) {
    // A float capture's gradient that nothing reads (a constant table's:
    // attn-derive-backward returns gradients of the function's inputs
    // only) is not computed: no partials, no reads in the reverse sweep,
    // and a narrow output's Delta needs no exact pass for it.
    for (auto [k, capture] : llvm::enumerate(op.getScoreCaptures()))
      if (isFloatTensor(capture) && isUsed(op.getScoreCapturesGrad()[k]))
        floatCaptures.push_back(k);
    if (!scoreMod.empty())
      buildAdjointBlock();
  }

  /// P = exp(S' - LSE) on the lanes the masks keep, else 0; `lse` is
  /// rowLse's.
  mlir::Value recomputedP(const Scores &sc, mlir::Value lse);

  /// LSE[bi, h, row] splat to 16 lanes for recomputedP, +inf where it is
  /// -inf: a row whose keys are all masked or whose scores are all -inf
  /// (a score_mod that masks, FlexAttention's idiom) has P = 0, and
  /// exp(S' - LSE) would be exp(-inf + inf) = NaN on its kept lanes.
  mlir::Value rowLse(mlir::Value lse, mlir::Value bi, mlir::Value h,
                     mlir::Value row);

  /// dS from dS' (16 lanes of the scores `sc` of row `row`, head h): times
  /// the score_mod's derivative (dS' itself without a score_mod); with
  /// `partials`, the reads of float captures add their adjoints to the
  /// task's rows of them (accumulateCaptureGrads), or with `headSums` (a
  /// [reads, 16] f32 buffer), the reads per head (readsPerHead) add their
  /// 16 lanes to its row r (flushHeadSums sums them into the partials
  /// once). dS' must be 0 where the masks drop a lane (the region's
  /// adjoints there may be anything).
  mlir::Value scoreGrad(const Scores &sc, mlir::ArrayRef<mlir::Value> caps,
                        mlir::Value bi, mlir::Value h, mlir::Value row,
                        mlir::Value dsModified,
                        mlir::ArrayRef<mlir::Value> partials, mlir::Value task,
                        mlir::Value headSums = mlir::Value());

  /// Whether some read is per head (a headSums buffer then pays), and
  /// zeroing headSums; adding its rows' lanes into the partials (of
  /// `task`) at the elements of batch bi and head h, and zeroing it.
  bool hasReadsPerHead() const;
  void zeroHeadSums(mlir::Value headSums);
  void flushHeadSums(mlir::Value headSums, mlir::ArrayRef<mlir::Value> partials,
                     mlir::Value task, mlir::Value bi, mlir::Value h);

  /// g [B, H, Sq]: the entropy's cotangent of each row plus its share of
  /// the mean entropy's (divided among the rows of the head that see a
  /// key: LSE not -inf, NaN too), 0 for a row that sees none; either
  /// cotangent may be null.
  mlir::Value entropyCotangents(mlir::Value lse, mlir::Value entropyGrad,
                                mlir::Value meanEntropyGrad);

  /// Float captures' gradients: one partial row per task (zeroed here, by
  /// tasks on the pool; rows of whole vectors), summed in task order
  /// afterwards (deterministic for any thread count); one row in all for a
  /// shared capture (shareCapturesReadAtTheirKeys).
  mlir::SmallVector<mlir::Value> zeroedPartials(int64_t tasks);

  /// For tasks that own disjoint keys (a backward's key_tasks): the float
  /// captures read at their keys (isReadAtItsKey) get one partial row,
  /// which every task adds to (only the kept lanes, at elements of their own
  /// keys): no copy per task, no race.
  void shareCapturesReadAtTheirKeys();

  /// The gradient of every score capture (of types `gradTypes`): its
  /// partials summed (sumPartials), zeros for an integer capture, which has
  /// none, and for a float one whose gradient nothing reads.
  mlir::SmallVector<mlir::Value>
  captureGrads(mlir::ArrayRef<mlir::Value> partials, mlir::TypeRange gradTypes);

  /// The 16 lanes' adjoints of reads `which` (indices into `reads`) of the
  /// scores `sc` with the reverse sweep seeded by `seed` (16 lanes), 0
  /// outside sc.keep: seeded with P, a read's sum_j P dS'_j/dC.
  mlir::SmallVector<mlir::Value> readAdjoints(const Scores &sc,
                                              mlir::ArrayRef<mlir::Value> caps,
                                              mlir::Value bi, mlir::Value h,
                                              mlir::Value row, mlir::Value seed,
                                              mlir::ArrayRef<size_t> which);

  /// Whether read `r`'s indices are the batch b, the head h or constants
  /// (`slopes[%h]`, `temperature[]`): one element per (b, h), whose
  /// gradient sums every row's terms.
  bool readsPerHead(size_t r) const;
  /// The offset of that element in its flattened capture.
  mlir::Value perHeadOffset(size_t r, mlir::Value bi, mlir::Value h);

  /// Where float score capture `capture`'s partial buffer is among them.
  size_t partialIndex(unsigned capture);

  struct CaptureRead {
    unsigned capture; // among the score captures
    size_t rank;      // the number of indices
  };
  // The reads of the float captures in floatCaptures, in the order of the
  // adjoint block's results.
  llvm::SmallVector<CaptureRead> reads;

  // The score captures whose gradients are computed: float ones whose
  // gradient something reads.
  llvm::SmallVector<unsigned> floatCaptures;
  // Those of them whose partial is one row shared by the tasks.
  llvm::SmallVector<unsigned> sharedCaptures;

private:
  /// The gradient of a capture: the rows of its partial buffer summed in
  /// task order, in the capture's shape and element type (16 elements at a
  /// time, by tasks on the pool).
  mlir::Value sumPartials(mlir::Value partial, mlir::Value capture);

  /// Adds the adjoints of the capture reads (adjoint block results after
  /// the first: per read, the adjoint then the read's indices) to the
  /// task's partial gradients; lanes outside `keep` add nothing. A read at
  /// the same element in every lane (ALiBi's slopes[h]) adds one lane sum.
  /// `queryRow`: the scores' row i (the region's argument).
  void accumulateCaptureGrads(mlir::ArrayRef<mlir::Value> partials,
                              mlir::Value task, mlir::Value queryRow,
                              mlir::ArrayRef<mlir::Value> adjoints,
                              mlir::Value keep, mlir::Value headSums);

  /// body(args, e) for e = 0, 16, ... below `count` (a multiple of 16),
  /// chunks of them as tasks `name` on the pool; `args` stand for
  /// `captured` there.
  void forVectorsOnPool(
      llvm::StringRef name, llvm::ArrayRef<mlir::Value> captured,
      int64_t count,
      llvm::function_ref<void(llvm::ArrayRef<mlir::Value>, mlir::Value)> body);

  /// The score_mod's reverse sweep as scalar code in a block of its own:
  /// (score, b, h, i, j, captures..., seed) -> (seed * d score_mod / d score,
  /// then per read of a float capture: its adjoint and its indices), which
  /// the kernel widens to 16 lanes like the region itself. The block ends
  /// in a func.return only as a holder of these values (never verified).
  void buildAdjointBlock();

  /// Where read `r`'s adjoint is among the adjoint block's results (its
  /// indices follow it), and its indices.
  size_t readResult(size_t r) const;
  mlir::OperandRange readIndices(size_t r) const;

  std::unique_ptr<mlir::Region> adjointRegion;
  mlir::Block *adjointBlock = nullptr;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_SCOREMODGRADIENTS_H
