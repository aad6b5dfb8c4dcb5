// The FlashAttention-2 CPU backward of attn.attention_grad in one pass over
// key blocks (FlashBackward.cpp): dK/dV per key block, dQ into one f32 copy
// per split of the key blocks summed in order, so that every gradient has a
// fixed order of accumulation; the exact Deltas that float score captures
// need from a narrow output in FlashBackwardCaptures.cpp (their gradients
// and the score_mod's reverse sweep: ScoreModGradients.h).
// Private to the CPU lowering; FlashAttention.h is the interface.
#ifndef ATTNC_CODEGEN_CPU_FLASHBACKWARD_H
#define ATTNC_CODEGEN_CPU_FLASHBACKWARD_H

#include "codegen/cpu/ScoreModGradients.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include <utility>

namespace attnc {

class FlashBackward : public ScoreModGradients {
public:
  FlashBackward(mlir::ImplicitLocOpBuilder &b, attn::AttentionGradOp op,
                attn::CpuPlanAttr plan, int64_t vectorBits)
      : ScoreModGradients(b, op, plan.getRows(), vectorBits),
        blockTiles(plan.getKeyBlock() / kCols), op(op), plan(plan),
        splits(plan.getSplits()), keyTasks(plan.getKeyTasks()),
        dot(plan.getDotBf16() || plan.getAmx()), amx(plan.getAmx()) {
    if (keyTasks)
      shareCapturesReadAtTheirKeys();
  }

  /// With the entropy's cotangents folded in (FlashAttention.h,
  /// EntropyGradient): the rows' entropies H (a buffer [B, H, Sq], from the
  /// statistics kernel) and the cotangents of the entropies and of their
  /// means (buffers, either may be null).
  void addEntropyGradient(mlir::Value entropy, mlir::Value entropyGrad,
                          mlir::Value meanEntropyGrad) {
    entropyBuf = entropy;
    entropyGradBuf = entropyGrad;
    meanEntropyGradBuf = meanEntropyGrad;
  }

  mlir::SmallVector<mlir::Value> build();

  /// The dK/dV tasks of `plan`: one per (batch, KV head, split), or with
  /// key_tasks one per split.
  static int64_t kvTaskCount(attn::AttentionGradOp op, attn::CpuPlanAttr plan) {
    int64_t pairs = plan.getKeyTasks()
                        ? 1
                        : shapeOf(op.getQuery())[0] * shapeOf(op.getKey())[1];
    return pairs * plan.getSplits();
  }

private:
  /// The entropy's part: g_i, the row's entropy cotangent (plus its share
  /// of the mean's), into a new buffer, and Delta_i -= g_i mu_i with
  /// mu_i = LSE_i - H_i = sum_j P_ij S'_ij, so that dS' = P (dP - Delta -
  /// g S') is the attention's and the entropy's: -g P (S' - mu).
  mlir::Value entropyCoefficients(mlir::Value lse, mlir::Value delta);

  /// Delta[b, h, i] = rowsum(dO * O) - dLSE (the dLSE term of the LSE's own
  /// gradient folds in here).
  mlir::Value rowDeltas(mlir::Value o, mlir::Value dO, mlir::Value dLse);

  /// rowDeltas as rowsum(P * dP) - dLSE, with P and dP recomputed from the
  /// packed Q, dO, K^T and V^T tiles (two of the backward's products once
  /// more) rather than from O in its narrow type: one task per (batch, head,
  /// query tile) over the key tiles its rows see. With dot products: Q's
  /// and dO's rows and K and V in column pairs (pairedColumnsOf).
  mlir::Value exactRowDeltas(mlir::Value qT, mlir::Value kt, mlir::Value vt,
                             mlir::Value dOT, mlir::Value lse, mlir::Value dLse,
                             mlir::Value lengths);

  /// rowDeltas for one (batch, head); args: O, dO, Delta[, dLSE].
  void rowDeltasOfHead(mlir::ArrayRef<mlir::Value> args, mlir::Value bi,
                       mlir::Value h);

  /// P = exp(S' - LSE) and dS = P * (dP - Delta) * dS'/dS of the
  /// rows x 32 tile of rows i0.. and key tile t of the block (keys from
  /// j0) into pBuf and dsBuf (0 outside each row's [lo, hi); rows past Sq
  /// see no key, so that they add no capture gradient); the task's rows of
  /// the float captures' partial gradients receive theirs. `common`: qT,
  /// K, V, dOT, lse, delta; `rest`: pBuf, dsBuf, the block's K^T and V^T
  /// ([1, 1, tiles, D or Dv, 32]), bi, h, j0, i0, limit, task, t and the
  /// entropy's coefficients g (entropyCoefficients; null without); with
  /// dot products, then Q and dO, and the tile's dS in bf16, P and dS
  /// with pairs of rows (KeyBlock's), with K's and V's pairs in place of
  /// K^T and V^T.
  /// With `headSums` (a task's scratch, headSumsScratch), the reads per
  /// head add their adjoints' lanes there (scoreGrad). With `rowVecs`
  /// ([rows, 1 + corrected reads, 16], rowVecsScratch), each row's P dP
  /// and, per corrected read, P dS'/dC over the tile's keys are added to
  /// its lanes (chunkProbabilities sums both after a block's tiles).
  void probabilities(mlir::ArrayRef<mlir::Value> common,
                     mlir::ArrayRef<mlir::Value> caps,
                     mlir::ArrayRef<mlir::Value> partials,
                     mlir::ArrayRef<mlir::Value> rest, mlir::Value rowVecs,
                     mlir::Value headSums);

  /// Adds to the corrected reads' captures' gradients what Delta from the
  /// rounded O took: sum_i (Delta~_i - Delta_i) sum_j P dS'/dC, with
  /// Delta_i = sum_j P dP - dLSE_i from the splits' row sums ([splits, B,
  /// H, Sq, 1 + reads]).
  void correctRowSums(mlir::Value rowSums, mlir::Value delta, mlir::Value dLse,
                      mlir::ArrayRef<mlir::Value> partials);

  /// accumulateTransposed(args[0..2], {args[3], args[4]}, args[5..8])
  /// as a call of one function per operand types: dK's and dV's (D = Dv)
  /// share it, which took mha_causal's JIT work from 1.93 to 1.81 G
  /// instructions (the backward ran as fast: 4 process pairs).
  void callAccumulateTransposed(mlir::ArrayRef<mlir::Value> args);

  /// Zeros the rows of split `split`'s dQ copy for the heads of KV head g.
  void zeroCopies(mlir::Value copies, mlir::Value split, mlir::Value bi,
                  mlir::Value g);

  /// The key blocks of blockTiles key tiles each.
  int64_t keyBlocks() const { return (tiles + blockTiles - 1) / blockTiles; }

  /// One key block of a dK/dV task: its (batch, KV head), first key tile
  /// and key, the keys it has (`valid`) and those some row sees (before
  /// `seen`), the batch's key limit, the task's arguments and scratch.
  struct KeyBlock {
    mlir::ArrayRef<mlir::Value> args, scratch;
    mlir::Value bi, g, split, task, tile0, j0, valid, limit, seen;
    // P, dS, dK^T and dV^T in key tiles ([tiles, chunk rows, 32], [tiles,
    // D or Dv, 32]), the block's K^T and V^T tiles and K's column chunks.
    mlir::Value pBuf() const { return scratch[0]; }
    mlir::Value dsBuf() const { return scratch[1]; }
    mlir::Value dkBuf() const { return scratch[2]; }
    mlir::Value dvBuf() const { return scratch[3]; }
    mlir::Value ktTile() const { return scratch[4]; }
    mlir::Value vtTile() const { return scratch[5]; }
    mlir::Value kChunks() const { return scratch[6]; }
    // With dot products (FlashBackwardDot.cpp): scratch[4] and [5] hold the
    // block's K and V with pairs of columns side by side, [6] K with pairs
    // of keys ([2 blockTiles, D / 2, 32], [blockTiles, 16, 2 D]); then dS
    // in bf16 ([tiles, chunk rows, 32]), and P and dS with pairs of rows
    // side by side ([tiles, chunk rows / 2, 64]).
    mlir::Value dsBf16() const { return scratch[7]; }
    mlir::Value pRowPairs() const { return scratch[8]; }
    mlir::Value dsRowPairs() const { return scratch[9]; }
  };

  /// The query rows [first, end) that can see key tile t of `kb` (keys
  /// from jt on; first a multiple of rows).
  std::pair<mlir::Value, mlir::Value> rowsSeeing(const KeyBlock &kb,
                                                 mlir::Value jt);

  /// The dK and dV rows of key block `block` of (bi, g), and its dS K terms
  /// of dQ into split `split`'s copy; `task` owns a partial row of the
  /// capture gradients.
  void keyBlockTask(mlir::ArrayRef<mlir::Value> args,
                    mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
                    mlir::Value g, mlir::Value block, mlir::Value split,
                    mlir::Value task);

  /// Zeros the block's dK^T and dV^T and packs its K^T and V^T tiles and
  /// K's column chunks.
  KeyBlock startKeyBlock(mlir::ArrayRef<mlir::Value> args,
                         mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
                         mlir::Value g, mlir::Value block, mlir::Value split,
                         mlir::Value task);

  /// The first key of the block's key tile t.
  mlir::Value tileStart(const KeyBlock &kb, mlir::Value t);

  /// Whether some row may see the key tile from jt (the key lengths).
  mlir::Value tileSeen(const KeyBlock &kb, mlir::Value jt);

  /// P and dS of the query tiles [c0, cEnd) of head h over the block's key
  /// tiles, into the chunk's rows of pBuf and dsBuf.
  void chunkProbabilities(const KeyBlock &kb, mlir::Value h, mlir::Value c0,
                          mlir::Value cEnd);

  /// dQ += dS K for the query tiles [c0, cEnd) of head h, into the split's
  /// copy: a column chunk of K at a time over the chunk's query tiles (the
  /// other way round, each tile over all of K's chunks, ran the backward 9%
  /// slower at S = 2048, D = 128: interleaved A/B).
  void chunkQueryGrads(const KeyBlock &kb, mlir::Value h, mlir::Value c0,
                       mlir::Value cEnd);

  /// dV^T += dO^T P and dK^T += Q^T dS per key tile, over the query tiles
  /// [c0, cEnd) of head h that see it.
  void chunkKeyGrads(const KeyBlock &kb, mlir::Value h, mlir::Value c0,
                     mlir::Value cEnd);

  /// The block's rows of dK and dV, from its dK^T and dV^T tiles.
  void storeKeyGrads(const KeyBlock &kb);

  /// dQ = scale dS K: the splits' copies summed in order, times the scale.
  void sumQueryGradCopies(mlir::Value dqCopies, mlir::Value dQ);

  //===--------------------------------------------------------------------===//
  // AVX-512 BF16 dot products (FlashBackwardDot.cpp, plan dot_bf16): the
  // five products of bf16 operands (Q, K, V, dO as given; P and dS rounded
  // to bf16, as FlashAttention's GPU backward does) into f32 sums.
  //===--------------------------------------------------------------------===//

  /// K or V with pairs of columns side by side, every KV head's ([B, Hkv,
  /// 2 tiles, width / 2, 32] bf16, pairColumns).
  mlir::Value pairedColumnsOf(mlir::Value x);

  /// The task scratch of a key block (KeyBlock's).
  mlir::SmallVector<mlir::Value> dotScratch();

  /// Packs the block's K and V pairs (KeyBlock).
  void dotPairBlock(const KeyBlock &kb, const KeySource &k, const KeySource &v);

  /// The rows x 32 tile of x[bi, h, i0 + r, :] (bf16, row-major; rows past
  /// Sq repeat its last) times the 16-key tiles 2 t and 2 t + 1 of
  /// pairs[prefix...] (pairColumns): unscaled S (Q, K) or dP (dO, V).
  mlir::SmallVector<mlir::Value> dotTile(mlir::Value x, mlir::Value pairs,
                                         mlir::ValueRange prefix,
                                         mlir::Value bi, mlir::Value h,
                                         mlir::Value i0, mlir::Value t);

  /// P and dS of a rows x 32 tile (f32, [rows, 32]) into dS in bf16 and
  /// both with pairs of rows side by side (KeyBlock's).
  void dotPairRows(mlir::Value pTile, mlir::Value dsTile, mlir::Value dsBf,
                   mlir::Value pPairs, mlir::Value dsPairs);

  /// dQ's copy rows [rows, D] += dS (bf16, the rows' [tiles, rows, 32])
  /// times the block's keys below `keys` (pairKeys), columns [col, col +
  /// 16 n).
  void dotQueryGrads(mlir::Value y, mlir::Value dsRows, mlir::Value kPairs,
                     mlir::Value keys, mlir::Value col, int64_t n);

  /// accumulateTransposed's product with pairs of rows: zt[block, d, 0:32]
  /// += sum over rows of packed (bf16) times c's row pairs ([blocks, rows /
  /// 2, 64]).
  void dotAccumulateTransposed(mlir::Value zt, mlir::Value c,
                               mlir::Value packed, mlir::ValueRange prefix,
                               mlir::Value tile0, mlir::Value tiles,
                               mlir::Value block, mlir::Value row0);

  /// The unscaled S (x = Q, pairs = K's) or dP (dO, V's) of the rows x 32
  /// tile of rows i0.. and key tile t into dst ([rows, 32] f32): dotTile's
  /// product, or with AMX the same on tiles (x then has whole tiles of
  /// rows: padRows).
  void rowProducts(mlir::Value x, mlir::Value pairs, mlir::ValueRange prefix,
                   mlir::Value bi, mlir::Value h, mlir::Value i0, mlir::Value t,
                   mlir::Value dst);

  //===--------------------------------------------------------------------===//
  // AMX tiles (FlashBackwardAmx.cpp, plan amx): the dot products' layouts
  // and bf16 rounding, the five products as tdpbf16ps on 16 x 16 f32 tiles
  // (rows = 32: a query tile is two tiles of rows, and one reduction step
  // of dK's and dV's products).
  //===--------------------------------------------------------------------===//

  /// x's rows (bf16, [B, H, Sq, width]) in whole query tiles ([B, H, qTiles
  /// rows, width]), rows past Sq repeating its last, for tile loads.
  void padRows(mlir::Value x, mlir::Value padded, mlir::Value bi,
               mlir::Value h);

  /// dotQueryGrads on tiles.
  void amxQueryGrads(mlir::Value y, mlir::Value dsRows, mlir::Value kPairs,
                     mlir::Value keys, mlir::Value col, int64_t n);

  /// dotAccumulateTransposed on tiles: zt[block] += packed's rows (Q^T or
  /// dO^T of query tiles tile0.., 32 rows each) times c's row pairs.
  void amxAccumulateTransposed(mlir::Value zt, mlir::Value c,
                               mlir::Value packed, mlir::ValueRange prefix,
                               mlir::Value tile0, mlir::Value tiles,
                               mlir::Value block, mlir::Value row0);

  /// The query tiles whose P and dS one pass of accumulateTransposed sums
  /// into a key block's dK and dV (two [blockTiles, 8 tiles x rows, 32] f32
  /// scratch buffers).
  static constexpr int64_t kChunkTiles = 8;
  const int64_t blockTiles; // key tiles per key block

  attn::AttentionGradOp op;
  attn::CpuPlanAttr plan;
  int64_t splits; // the plan's dQ splits
  bool keyTasks;  // one task per split, over every (batch, KV head)
  bool dot;       // bf16 products in the dot products' layouts
  bool amx;       // those products on AMX tiles (dot is then set too)
  size_t rowMajorArg = 0; // with dot: where Q and dO are in task args
  size_t partialBase = 0; // where their partial buffers start in task args
  mlir::Value entropyBuf, entropyGradBuf, meanEntropyGradBuf;
  size_t entropyArg = 0; // where g is in task args (with entropyBuf)
  // The reads (of `reads`) of captures read per head, whose gradients
  // correctRowSums corrects (with a narrow output, for Delta from O).
  llvm::SmallVector<size_t> correctedReads;
  size_t rowSumsArg = 0; // where the row sums are in task args
  // Where the [reads, 16] lane sums of the reads per head and the rows'
  // [rows, 1 + corrected reads, 16] are in a task's scratch (0: none).
  size_t headSumsScratch = 0, rowVecsScratch = 0;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHBACKWARD_H
