// The flash-attention CPU forward of attn.attention (FlashForward.cpp), with
// its products on AMX tiles where the plan says so (FlashForwardAmx.cpp):
// an online softmax over the plan's key steps, never an Sq x Skv buffer.
// Private to the CPU lowering; FlashAttention.h is the interface.
#ifndef ATTNC_CODEGEN_CPU_FLASHFORWARD_H
#define ATTNC_CODEGEN_CPU_FLASHFORWARD_H

#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/FlashCommon.h"
#include "codegen/cpu/WidenRegion.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <utility>

namespace attnc {

class FlashForward : public FlashCommon {
public:
  /// With `stats`, the kernel also computes those statistics online.
  FlashForward(mlir::ImplicitLocOpBuilder &b, attn::AttentionOp op,
               attn::CpuPlanAttr plan, int64_t vectorBits,
               const ForwardStatistics &stats = {})
      : FlashCommon(b, op, plan.getRows(), vectorBits), op(op),
        entropy(stats.entropy), similarity(stats.similarity), gq(stats.gq),
        gk(stats.gk), amx(plan.getAmx()), dot(plan.getDotBf16()),
        paired(amx || dot),
        base2(paired && scalefExp && !hasGradientCaptures(op)),
        foldScale(base2 && scoreMod.empty() && scale > 0),
        bf16(b.getBF16Type()), blockTiles(plan.getKeyBlock() / kCols),
        foldHeads(Sq == 1 && H > Hkv && rows > 1 && !amx && !entropy && !gk &&
                  !similarity && scoreMod.empty() && maskMod.empty()) {
    if (foldHeads) {
      // The kernel's view: Hkv heads of H / Hkv rows (masks: op's Sq = 1).
      Sq = H / Hkv;
      H = Hkv;
    }
    qTiles = (Sq + rows - 1) / rows;
    pairs = H * (H + 1) / 2;
    groupTiles = std::min(qTiles, similarity ? similarityGroupTiles(plan)
                                             : plan.getQueryBlock() / rows);
    if (foldHeads)
      groupTiles = qTiles;
    packedBlocks = !similarity && (qTiles <= groupTiles || op.getPages() ||
                                   perCallCopyBytes() > kMaxCopyBytes);
    pipelined = amx && rows > kAmxRows && (similarity ? H : groupTiles) > 1 &&
                !hasExpandedMath(scoreMod) && !hasExpandedMath(maskMod);
    lazyMax = amx;
    kvSplits = packedBlocks && !entropy && !gk ? plan.getSplits() : 1;
    headsPerTask = similarity ? H
                   : packedBlocks && (B * Hkv >= kMinTasks || kvSplits > 1)
                       ? H / Hkv
                       : 1;
    valuesInPlace = packedBlocks && !paired &&
                    headsPerTask * Sq <= kMaxRowsForValuesInPlace;
    prefetchNextBlock = dot && packedBlocks && qTiles == 1 && headsPerTask == 1;
    directScores =
        packedBlocks && (paired ? !amx && rows == 1 && D % (2 * kLanes) == 0
                                : rows <= kMaxDirectRows && D % kLanes == 0);
  }

  /// Whether the score_mod captures a float tensor that may get a
  /// gradient: one that is not a constant of the spec (attn-derive-backward
  /// differentiates into the function's inputs only).
  static bool hasGradientCaptures(attn::AttentionOp op) {
    return llvm::any_of(op.getScoreCaptures(), [](mlir::Value capture) {
      return mlir::isa<mlir::FloatType>(elementTypeOf(capture)) &&
             !mlir::matchPattern(capture, mlir::m_Constant());
    });
  }

  /// O and LSE (tensors), the buffer of the LSE, and the statistics'
  /// buffers: the entropies [B, H, Sq], the pooled map [B, H, Gq, Gk] and
  /// the head similarity [B, H, H].
  struct Built {
    mlir::Value output, lse, lseBuf, entropyBuf, pooledBuf, similarityBuf;
  };
  Built build();

private:
  /// The state of one query tile: views of the group's scratch buffers.
  /// With entropy, tBuf holds sum_j exp(S'_j - m) (S'_j - m) per row,
  /// rescaled with the running sum: the entropy is log l - t / l. With a
  /// pooled grid, cellBuf [rows, >= Gk] holds sum_j exp(S'_j - m) per row
  /// and key cell, rescaled likewise.
  struct TileState {
    mlir::Value t, oBuf, maxBuf, sumBuf, qPacked, tBuf, cellBuf;
  };
  // With similarity, a task covers every head of its query tiles, and per
  // tile and row the sums A_hg = sum_j exp(S'_hj - m_h) exp(S'_gj - m_g)
  // (g <= h, 16 lanes each) move to each new pair of maxima with
  // alpha_h alpha_g, like O: row i adds A_hg / (l_h l_g) = <P_hi, P_gi> to
  // its task's H x H partial at the end.

  TileState stateOf(mlir::ArrayRef<mlir::Value> scratch, mlir::Value t);
  /// A buffer whose dimensions 1 and 2 are (heads, rows) seen as `shape`
  /// (the same heads x rows regrouped): Q, O and LSE with foldHeads.
  mlir::Value regroup(mlir::Value memref, llvm::ArrayRef<int64_t> shape);
  /// K (n = 1) or V (n = 2) where the caller put them, from a task's
  /// arguments: paged through the block table (args[6]) with `pages`.
  KeySource sourceOf(mlir::ArrayRef<mlir::Value> args, unsigned n);

  /// The scores of the tile's rows against the block's keys from j0 below
  /// `end`, 16 at a time, from K's rows where they are (directScores):
  /// into pBuf's columns (a 16-key group at or past `end` is left as it
  /// was: the masks drop it). f32: from qPacked ([D, rows], Q times the
  /// scale); bf16 (dot products): from Q's rows in bf16 (qRows[t], as
  /// dotScores takes them, unscaled).
  /// `perTile(kt)` runs before each 32-key tile kt (dotScores').
  void directScoresOf(const KeySource &keys, mlir::Value qPacked, mlir::Value t,
                      mlir::Value bi, mlir::Value g, mlir::Value j0,
                      mlir::Value end, mlir::Value pBuf,
                      mlir::function_ref<void(mlir::Value)> perTile = nullptr);
  /// The state of query tile t of the task's head hh: hh groupTiles + t.
  mlir::Value stateIndex(mlir::Value hh, mlir::Value t);

  /// The query tiles [first, first + count) of group `group` of (bi, h)
  /// for the heads h0 .. h0 + headsPerTask - 1:
  /// the key blocks some tile sees are visited once, each by every tile
  /// that sees it, so that a block read from L2 serves the whole group.
  void task(mlir::ArrayRef<mlir::Value> args,
            mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi, mlir::Value h0,
            mlir::Value group, mlir::Value split);

  /// O and LSE from the kvSplits partial results [kvSplits, B, H, Sq, Dv]
  /// and [kvSplits, B, H, Sq] (f32): LSE = log sum_s exp(LSE_s), O =
  /// sum_s exp(LSE_s - LSE) O_s, summed in split order; a row no split saw
  /// gets O = 0 and LSE = -inf.
  void mergeSplits(mlir::Value partO, mlir::Value partL, mlir::Value o,
                   mlir::Value l);

  /// Where a key block's products read K and V: the per-call pairs from
  /// the block's tile on, or (packedBlocks) the block's own from its first
  /// key (bi, g and tile then 0), and the keys the tile sees from there.
  struct KeyPairs {
    mlir::Value k, v, bi, g, tile, end;
  };
  KeyPairs keyPairsOf(mlir::ArrayRef<mlir::Value> args,
                      mlir::ArrayRef<mlir::Value> scratch, const QueryTile &qt,
                      mlir::Value bi, mlir::Value j0);

  /// With pipelined: the scores buffer of this step (computed before), and
  /// the next step's state, key pairs and scores buffer, whose Q K^T the
  /// step computes between its softmax rows where `next` holds.
  struct Pipeline {
    mlir::Value scores, next, nextState;
    KeyPairs nextPairs;
    mlir::Value nextScores;
  };

  /// One step of the online softmax: query tile `qt` (state `st`) over the
  /// keys [j0, j0 + width).
  void keyBlock(mlir::ArrayRef<mlir::Value> args,
                mlir::ArrayRef<mlir::Value> scratch, const TileState &st,
                const QueryTile &qt, mlir::Value bi, mlir::Value h,
                mlir::Value j0, const Pipeline *pipe = nullptr);

  /// One of a sequence of key-block steps: a query tile of a head, and
  /// its state's index.
  struct Step {
    QueryTile qt;
    mlir::Value h, state;
  };
  /// The key block j0 for steps 0 to count - 1 (a head's query tiles, or
  /// with similarity a query tile's heads), pipelined: step n's softmax
  /// rows interleaved with step n + 1's Q K^T (the scores double-buffered).
  void pipelinedKeyBlocks(mlir::ArrayRef<mlir::Value> args,
                          mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
                          mlir::Value count,
                          mlir::function_ref<Step(mlir::Value)> stepOf,
                          mlir::Value j0);

  //===--------------------------------------------------------------------===//
  // AMX: the products on 16 x 16 f32 tiles, bf16 operands with pairs of
  // the reduction dimension side by side (tdpbf16ps's VNNI layout); the
  // softmax stays on AVX-512.
  //===--------------------------------------------------------------------===//

  /// K as [B, Hkv, 16-key tile, D / 2, 32] with (d, d + 1) pairs of a key
  /// side by side, V as [B, Hkv, 32-key tile, 16, 2 Dv] with (j, j + 1)
  /// pairs side by side; zeros past Skv, and V's past each batch's length
  /// (`lengths`, when given).
  std::pair<mlir::Value, mlir::Value>
  pairedKeysAndValues(mlir::Value k, mlir::Value v, mlir::Value lengths);

  /// O = alpha O + P V for the step's P (bf16, written by the softmax)
  /// and V's 32-key tiles from `tile` (pairs): P V on tiles of 16 columns,
  /// the rescale on AVX-512.
  /// With lazyMax, where no row's max moved (every alpha 1), P V
  /// accumulates into O's tiles instead.
  void amxUpdate(mlir::ArrayRef<mlir::Value> scratch, mlir::Value oBuf,
                 mlir::Value vp, mlir::Value bi, mlir::Value g,
                 mlir::Value tile);
  /// O = alpha O + P V: `products(pv, false)` puts P V in pv, then a pass
  /// over O's rows rescales and adds.
  void rescaledUpdate(llvm::function_ref<void(mlir::Value, bool)> products,
                      mlir::Value oBuf, mlir::Value pv, mlir::Value alphaBuf);

  /// With similarity, after every head's step of query tile t of the
  /// task: the tile's A_hg from each head's p and alpha of the step.
  void similarityStep(mlir::ArrayRef<mlir::Value> scratch, mlir::Value t);

  /// With similarity, after the key blocks: each row's <P_hi, P_gi> (rows
  /// that exist) summed into the task's partial [H, H] at parts[bi, group].
  void similarityOfRows(mlir::ArrayRef<mlir::Value> args,
                        mlir::ArrayRef<mlir::Value> scratch, mlir::Value bi,
                        mlir::Value group, mlir::Value count);

  /// The index of head pair (h, g), g <= h, in A's lower triangle.
  mlir::Value pairOf(mlir::Value h, mlir::Value g);

  /// Query tiles per task with similarity: the plan's query block, fewer
  /// where the A_hg of the tiles' rows would pass kMaxSimilarityBytes.
  int64_t similarityGroupTiles(attn::CpuPlanAttr plan) const {
    int64_t perTile = rows * pairs * kLanes * int64_t(sizeof(float));
    return std::max<int64_t>(1, std::min(plan.getQueryBlock() / rows,
                                         kMaxSimilarityBytes / perTile));
  }

  //===--------------------------------------------------------------------===//
  // AVX-512 BF16 (FlashForwardDot.cpp): the AMX layouts' pairs of bf16, each
  // vdpbf16ps adding two products into each of 16 f32 lanes, in register
  // blocks of rows x 32 keys (Q K^T) or rows x 32 columns (P V).
  //===--------------------------------------------------------------------===//

  /// pBuf[rows, 32 keyTiles] = the query rows qRows[t] (bf16, [., rows,
  /// D]) times the keys of the 32-key tiles from `tile` (paired, kp) below
  /// `end`: unscaled scores (tiles from `end` on are left as they are).
  void dotScores(mlir::Value qRows, mlir::Value t, mlir::Value kp,
                 mlir::Value bi, mlir::Value g, mlir::Value tile,
                 mlir::Value end, mlir::Value pBuf,
                 llvm::function_ref<void(mlir::Value)> perTile = nullptr);

  /// O = alpha O + P V for the step's P (bf16, scratch[6]) and V's 32-key
  /// tiles from `tile` (pairs, vp) below `end`.
  void dotUpdate(mlir::ArrayRef<mlir::Value> scratch, mlir::Value oBuf,
                 mlir::Value vp, mlir::Value bi, mlir::Value g,
                 mlir::Value tile, mlir::Value end);

  /// The pooled map from the tasks' partials [B, H, query tiles, 2, Gk]
  /// (each tile's rows in at most two row cells), summed in tile order.
  mlir::Value finishPooled(mlir::Value parts);

  attn::AttentionOp op;
  bool entropy;    // the rows' entropies too (FlashAttention.h)
  bool similarity; // the head similarity too
  int64_t gq, gk;  // the pooled grid too, when gk > 0
  // Where the statistics' buffers are in a task's arguments and their
  // running sums in its scratch.
  unsigned pairsScratch = 0; // paired with packedBlocks: the block's pairs
  unsigned pipeScratch = 0;  // with pipelined: the second scores buffer
  unsigned entropyArg = 0, entropyScratch = 0, poolArg = 0, poolScratch = 0,
           simArg = 0, simScratch = 0;
  bool amx; // the products on AMX tiles
  // On AMX with two tiles of rows and several query tiles a task (with
  // similarity: several heads): a tile's softmax rows for a key block are
  // interleaved with the next tile's (head's) Q K^T, a C tile of each tile
  // of rows every few rows, so that the tile unit works while the vector
  // units do (out-of-order execution overlaps them only within a few
  // hundred instructions, less than a tile's softmax). Not with a region
  // whose math expands into polynomials (hasExpandedMath): on a Xeon with
  // AMX (bf16, B=1, H=8, S=2048, D=64, causal, AOT host, min of 30) a
  // softcap's forward took 11.6 ms pipelined against 7.5 ms not, tanh(s)
  // 10.2 against 7.4, s / (1 + exp(-s / 10)) 12.6 against 8.3 (a stall
  // at each C tile between the rows, growing with the interleaved rows'
  // work), while plain, ALiBi, a division, min/max and 15 FMAs ran 3-8%
  // faster pipelined.
  bool pipelined;
  // On AMX, a row's running max moves only when a block's max passes it by
  // more than kLazyMaxSlack (FlashAttention-4's conditional rescale): p
  // then reaches up to e^slack = 256 (f32 sums, bf16's range), and in most
  // steps no row of a tile moves, so that the step skips alpha's exp per
  // row and P V accumulates into O's tiles (amxUpdate) with no rescale
  // pass. The LSE, m + log l, is the same.
  bool lazyMax;
  static constexpr float kLazyMaxSlack = 5.54517744f; // 8 ln 2
  bool dot; // the products as AVX-512 BF16 dot products (FlashForwardDot.cpp)
  // Either: Q, K, V and P in bf16, K and V copied into pairs per call.
  bool paired;
  // Paired: P = 2^((S' - m) log2 e), one FMA and 2^t to bf16's needs
  // (buildExp2ScalefForBf16, 8 instructions where exp takes 12). Not with
  // float score captures that may get gradients (constant ones do not):
  // their gradients (an ALiBi slope's, summed over j - i up to Skv) amplify
  // the LSE's error, and 2^t's 4e-6 made a slope's gradient over 4500 keys
  // 6% wrong (KernelTest.SplitKeys).
  bool base2;
  // base2 without a score_mod (and a positive scale): the scale folded into
  // that FMA, from the unscaled products: 10 instructions a vector where
  // the scale, the shift and exp took 14.
  bool foldScale;
  mlir::Type bf16;
  int64_t blockTiles; // 32-key tiles per online-softmax step
  // A decoding step (Sq = 1) of GQA without regions or statistics: the
  // query heads of a KV head are the rows of its query tiles, so that each
  // K^T vector and V row loaded feeds an FMA per head rather than one. The
  // kernel then sees Q, O and LSE as [B, Hkv, H / Hkv, ...] (H and Sq
  // below; the masks keep the op's Sq = 1, whose row every tile row is).
  bool foldHeads;
  int64_t qTiles;     // query tiles per (batch, head)
  int64_t pairs;      // head pairs g <= h (the similarity's)
  int64_t groupTiles; // query tiles per task and head
  // Whether each task packs the key block it is at (K^T tiles, V chunks)
  // into its scratch rather than reading per-call copies of K and V: where
  // one task covers all of a head's query tiles (decoding, short chunks),
  // so that no copy is shared, and its extra memory is a block per thread
  // whatever Skv; and wherever the copies would take more than
  // kMaxCopyBytes, so that a call's extra memory stays bounded
  // whatever Skv. Where several tasks share a head, the copy once per
  // call is a little cheaper than a pack per task (K's transposes, once
  // per task rather than per head): with query blocks of up to 16 tiles,
  // packing ran the forward 0-7% slower at S = 2048 (B=1, H=8, D=64 and
  // 128, f32 and bf16, causal or not; median of 5 interleaved rounds on a
  // 2-core Zen 5), hence copies up to 16 MiB (those shapes' are 4-16 MiB),
  // and 4% slower at S = 16384 (f32, H=4, D=64), where it took 1 MB beyond
  // inputs and outputs rather than 33 MB.
  // On AMX (tasks of 16 query tiles: passes/TilePlan.cpp) at B=1, H=8,
  // S=16384, D=128, bf16, 2 threads, packing took the forward's extra
  // memory from 65 MB to 1-2 MB, in 691-711 ms against 694-700 ms with the
  // copies, causal 386 against 395 ms (a Xeon with AMX, 2 rounds).
  // (Not with similarity: a task's heads then read different KV heads'
  // blocks.) With dot products or AMX tiles a block's K
  // and V are paired per task (pairColumns, pairKeys: the layout of the
  // per-call copies). A paged cache is always read so: its pages are never
  // copied whole.
  bool packedBlocks;
  // Split-KV (the plan's splits, with packed blocks and no statistics):
  // each query block's keys in kvSplits ranges of equal whole key blocks,
  // cut at run time from the keys it sees (so lengths and masks balance
  // them), one task each writing a partial (O, LSE) that mergeSplits
  // combines. With them every task takes all the query heads of its KV
  // head, whatever B Hkv.
  int64_t kvSplits;
  // Query heads per task: with packed blocks (and enough tasks), every
  // query head of a KV head, so that each block of K and V is read from
  // memory once for all of them: the GQA decode (B=4, H=32, Hkv=8, Sq=1,
  // Skv=4096, D=128, f32) ran in 11.8 ms instead of 24.3 ms.
  int64_t headsPerTask;
  // Whether P V reads V where the caller put it rather than from the
  // block's column chunks: for a task of few query rows, which read each V
  // row too few times to repay its copy. Interleaved A/B, 2 threads, B=4,
  // H=32, Sq=1, Skv=4096, D=128: GQA (Hkv=8) 9.7-10.2 -> 8.6-8.8 ms, MHA
  // 28-34 -> 25.1-25.6 ms; slower at Sq=16 (GQA: 19.2 -> 20.5-21.3). bf16
  // and f16 V, converted as read, were slower too (5.1-5.7 -> 6.2-6.7 ms)
  // while P V read each row once per 2 vectors of columns; since it reads
  // a row once per block (rowsTimesKeys' chunks of 8 vectors), in place
  // is faster for them too: on the 2-core Xeon with AMX (B=1, H=32, D=128,
  // f32 FMAs on bf16, AOT host, min of 20) GQA (Hkv=8) Skv=4096 0.55 ->
  // 0.48 ms, Skv=16384 2.22 -> 1.86, B=4 2.22 -> 1.89, MHA Sq=2 1.70 ->
  // 1.21, f16 GQA 0.55 -> 0.48.
  bool valuesInPlace;
  // Q K^T of few rows as dot products with K's rows where they are (f32:
  // up to kMaxDirectRows rows; bf16 on dot products: one row): no K^T
  // tiles or K pairs. A decoding step's transposes were half its time
  // (perf), and each row of K is now read as it lies. (bf16 GQA steps of 4
  // rows ran slower so: B=4, Hkv=8, Skv=4096, 1.67 -> 1.91 ms; each row
  // reloads K, where the pairs' products share each load among the rows.)
  bool directScores;
  static constexpr int64_t kMaxDirectRows = 4;
  static constexpr int64_t kMaxRowsForValuesInPlace = 8;
  // How many keys ahead the dot products' packedBlocks pairing prefetches
  // K's and V's rows: a decoding step's task reads each key's row for few
  // query rows, so its loads stall on memory between the hardware
  // prefetchers' streams (which stop at each 4 KiB page: 16 bf16 rows of
  // 128 columns). bf16, B=4, H=32, Hkv=8, Sq=1, Skv=4096, D=128, 2
  // threads, AOT host, five interleaved rounds (Zen 5): 2.52 -> 2.15 ms
  // (medians), a thread alone 16 GB/s before; 8 keys gained less, 32 to
  // 128 no more. f32's transposed K tiles ran slower with it (4.85 ->
  // 5.2-5.4 ms), AMX was not measured: neither takes it.
  static constexpr int64_t kPackPrefetchKeys = 16;
  // Whether a task of one query tile on dot products (a decoding step)
  // prefetches the next key block's rows of K and V while it multiplies
  // this one's, a 32-key tile each: its memory then stays busy while it
  // computes. bf16, H=32, D=128, Sq=1, 2 threads, interleaved rounds
  // (medians): B=4, Hkv=8, Skv=4096 (AOT host, 5) 2.26 -> 2.10 ms; Hkv=32
  // (7) 7.60 -> 7.43 ms; B=4, Hkv=8, Skv=16384 (`attnc bench`, 3) 8.54 ->
  // 8.23 ms; B=1 (split keys) 6.26 -> 6.13 ms; B=4, Hkv=32, Skv=16384
  // 29.5 -> 31.4 ms (minima 29.3 -> 29.0: noise). Tasks of several query
  // tiles or heads would prefetch the block once per tile or head.
  bool prefetchNextBlock;
  // The most the per-call copies of K and V may take (packedBlocks).
  static constexpr int64_t kMaxCopyBytes = 16 << 20;
  /// What the per-call copies of K and V would take: bf16 pairs, or f32
  /// K^T tiles and V chunks.
  int64_t perCallCopyBytes() const {
    int64_t keys = (Skv + kCols - 1) / kCols * kCols;
    return B * Hkv * keys * (D + Dv) * (paired ? 2 : 4);
  }
  // The fewest tasks (batch x KV heads) worth grouping query heads for:
  // fewer would leave threads idle.
  static constexpr int64_t kMinTasks = 8;
  // A task's A_hg (with similarity) stay in L2: 128 KiB, 8 tiles of 16
  // rows at H = 4.
  static constexpr int64_t kMaxSimilarityBytes = 128 << 10;
  // The products stream K^T's and V's rows of the per-call copies from L2,
  // 128 bytes each per step: prefetching the row 16 steps ahead ran the
  // forward 2-2.5% faster at S = 2048, D = 128 and 1-3% at D = 64
  // (interleaved A/B, 2 threads; 8, 32 and 64 rows ahead of V gained
  // less). Packed blocks' V chunks are in cache already; V read where the
  // caller put it (valuesInPlace) is prefetched as the copies are: a GQA
  // decoding step (f32, B=4, H=32, Hkv=8, Skv=4096, D=128, 2 threads) ran
  // 2-6% faster in three interleaved pairs.
  static constexpr int64_t kPrefetchRows = 16;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHFORWARD_H
