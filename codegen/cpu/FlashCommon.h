// What the flash-attention CPU kernels (forward, AMX forward, backward)
// share: shapes, masks, buffers in and out of bufferization, and the tile
// computations. Every matmul is a broadcast-FMA register block over a tile
// of 32 keys (A^T: the query tile's rows packed side by side):
//   S[r, 0:32]    += A^T[d, r] * Xt[d, 0:32]    (Q K^T, dO V^T)
//   Y[r, c:c+32]  += C[r, j] * X[j, c:c+32]     (P V, dS K)
//   Z^T[d, 0:32]  += A^T[d, r] * C[r, 0:32]     (dO^T P, Q^T dS)
#ifndef ATTNC_CODEGEN_CPU_FLASHCOMMON_H
#define ATTNC_CODEGEN_CPU_FLASHCOMMON_H

#include "codegen/MaskTiles.h"
#include "codegen/cpu/KernelBuilder.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>
#include <optional>
#include <string>

namespace attnc {

class FlashCommon : public KernelBuilder {
public:
  template <typename OpTy>
  FlashCommon(mlir::ImplicitLocOpBuilder &b, OpTy op, int64_t rows,
              int64_t vectorBits)
      : KernelBuilder(b, rows), scalefExp(vectorBits >= 512), masks(op),
        scale(float(op.getEffectiveScale())),
        parent(op->template getParentOfType<mlir::func::FuncOp>()),
        scoreMod(scoreModOf(op)), maskMod(op.getMaskMod()),
        numScoreCaptures(scoreCapturesOf(op).size()) {
    for (mlir::Value capture : scoreCapturesOf(op))
      captures.push_back(capture);
    for (mlir::Value capture : op.getMaskCaptures())
      captures.push_back(capture);
    varlen = attn::varlenOf(op);
    mlir::ArrayRef<int64_t> q = shapeOf(op.getQuery()),
                            k = shapeOf(op.getKey());
    B = q[0], H = q[1], Sq = q[2], D = q[3], Hkv = k[1],
    Skv = attn::keyCountOf(op);
    Dv = valueDimOf(op);
    tiles = (Skv + kCols - 1) / kCols;
  }

  /// The cell of `cells` over `n` (cell c holds [floor(c n / cells),
  /// floor((c + 1) n / cells))) that element e lies in, and where cell c
  /// starts: the pooled grids of attn.attention_stats.
  mlir::Value cellOf(mlir::Value e, int64_t n, int64_t cells);
  mlir::Value cellStart(mlir::Value c, int64_t n, int64_t cells);

  /// to[at..., c] += the p of each key j0 + w * 16 + lane, lane < 16, in
  /// its cell c of `cells` over Skv (vectors past Skv add nothing; lanes
  /// past it must be 0).
  void addToKeyCells(mlir::Value p, mlir::Value j0, int64_t w, int64_t cells,
                     mlir::Value to, mlir::ValueRange at);

  /// pooled[bi, h, rowCell, :] (sums over its cells' rows and keys, of a
  /// gq x gk grid over Sq x Skv) divided by the cells' sizes: means.
  void toCellMeans(mlir::Value pooled, mlir::Value bi, mlir::Value h,
                   mlir::Value rowCell, int64_t gq, int64_t gk);

  /// Whether an op's (optional) result exists and something uses it: the
  /// forward computes only those of its companion statistics.
  static bool isUsed(mlir::Value result) {
    return result && !result.use_empty();
  }

  /// The mean of `values` [B, H, Sq] over the rows that see a key (LSE >
  /// -inf; NaN too), 0 when none does: per head as a new [B, H] buffer
  /// (the mean entropies), or over all rows as a rank-0 one (the mean KL);
  /// a loop after the kernel's tasks, summing in row order.
  mlir::Value meanOfSeenRows(mlir::Value values, mlir::Value lse, bool perHead);

  /// body(h, i0) for each query head h of KV head g (of `group` query heads
  /// each) and each query tile from row i0 (below qTiles * rows) whose rows
  /// can see the `width` keys from j0 (a batch of `limit` keys): the
  /// gradient kernels' key tasks, which sum over them.
  void
  forQueryTilesSeeing(mlir::Value limit, mlir::Value j0, int64_t width,
                      int64_t qTiles, mlir::Value g, int64_t group,
                      mlir::function_ref<void(mlir::Value, mlir::Value)> body);

  /// dK[bi, g, j0 + 32 t + c, :] = dkT[t, :, c] (dkT [tiles, width, 32])
  /// for the keys below Skv: a key block's gradient back from its
  /// transposed tiles.
  void storeTransposedKeys(mlir::Value dkT, mlir::Value dK, mlir::Value bi,
                           mlir::Value g, mlir::Value j0);

  /// parts[at..., h, g] += x, and parts[at..., g, h] += x off the diagonal:
  /// a symmetric H x H partial from its lower triangle.
  void addToPair(mlir::Value parts, mlir::ValueRange at, mlir::Value h,
                 mlir::Value g, mlir::Value x);

  /// The head similarity [B, H, H] from the tasks' partials [B, tasks, H,
  /// H] of sum <P_hi, P_gi> over their rows, summed in task order (for any
  /// thread count), then divided by the norms: 0 where one is 0, NaN kept.
  mlir::Value similarityOf(mlir::Value parts);

  /// (b, h, i) of row n of [B, H, Sq].
  llvm::SmallVector<mlir::Value> rowOf(mlir::Value n);

protected:
  /// Dv: V's head dimension, 0 for the statistics (no V).
  template <typename OpTy> static int64_t valueDimOf(OpTy op) {
    return shapeOf(op.getValue())[3];
  }
  static int64_t valueDimOf(attn::AttentionStatsOp) { return 0; }
  static int64_t valueDimOf(attn::AttentionStatsGradOp) { return 0; }
  static int64_t valueDimOf(attn::DistillOp) { return 0; }
  static int64_t valueDimOf(attn::DistillGradOp) { return 0; }

  /// The score_mod region and its captures; attn.distill(_grad) has none
  /// (an empty region of the kernel's own).
  template <typename OpTy> mlir::Region &scoreModOf(OpTy op) {
    return op.getScoreMod();
  }
  mlir::Region &scoreModOf(attn::DistillOp) { return noScoreMod; }
  mlir::Region &scoreModOf(attn::DistillGradOp) { return noScoreMod; }
  template <typename OpTy> static mlir::ValueRange scoreCapturesOf(OpTy op) {
    return op.getScoreCaptures();
  }
  static mlir::ValueRange scoreCapturesOf(attn::DistillOp) { return {}; }
  static mlir::ValueRange scoreCapturesOf(attn::DistillGradOp) { return {}; }

  /// Runs body(args, bi, head) for every (batch, head) of `heads` heads on
  /// the thread pool: the per-call data preparation (transposes, packing,
  /// row sums) is parallel too.
  /// With `shared`, the body depends on nothing but what `name` says
  /// (sharedParallelTasks).
  void forEachHead(mlir::StringRef name, mlir::ArrayRef<mlir::Value> captured,
                   int64_t heads,
                   mlir::function_ref<void(mlir::ArrayRef<mlir::Value>,
                                           mlir::Value, mlir::Value)>
                       body,
                   bool shared = false);

  /// `memref`'s shape as "1x8x2048x64", for the names of functions shared
  /// by every call site of the same operand shapes.
  static std::string shapeName(mlir::Value memref);

  /// K or V transposed into key tiles [B, Hkv, tiles, width, 32], the
  /// tile count rounded up to a multiple of `tileMultiple` (zero padding),
  /// plus `spareTiles` of zeros.
  mlir::Value transposed(mlir::Value memref, int64_t tileMultiple = 1,
                         int64_t spareTiles = 0);

  /// V (f32) in column chunks of 2 vectors, [B, Hkv, chunks, Skv +
  /// spareKeys, 32] (the last chunk half used when Dv is an odd number of
  /// vectors; the spare keys for prefetches are left as they are): the
  /// forward's P V then reads each chunk's keys as one sequential stream
  /// rather than 128 bytes of every V row, 512 bytes apart at Dv = 128,
  /// where its loads waited on L2 (perf). The forward ran 8% faster at
  /// S = 2048, D = 128 and 5% at D = 64, causal or not (interleaved A/B,
  /// 1 and 2 threads), for one copy of V per call.
  mlir::Value chunkedValues(mlir::Value v, int64_t spareKeys);

  /// dst[at..., w / 2, j, 16 (w % 2) : +16] = src[bi, g, j0 + j, 16 w : +16]
  /// (f32) for j < count: src's rows in column chunks of 32, each chunk's
  /// rows one after another (rowsTimesKeys' chunked x); a null j0 means 0.
  void copyColumnChunks(const KeySource &src, mlir::Value bi, mlir::Value g,
                        mlir::Value j0, mlir::Value count, mlir::Value dst,
                        mlir::ValueRange at);

  /// The rows of query tile `ib` of head h (and its KV head g), the key
  /// limit of the batch, and the keys some row sees (keysSeenBy, aligned to
  /// `block`).
  struct QueryTile {
    mlir::Value g, i0, limit;
    MaskTiles::KeyRange keys;
  };
  QueryTile queryTile(mlir::Value lengths, mlir::Value bi, mlir::Value h,
                      mlir::Value ib, int64_t block = kCols);

  /// Runs body(r, i = i0 + r) for the rows of a tile as a loop, one row
  /// per iteration: the per-row softmax code is long, the loop keeps the
  /// kernel small (JIT compile time). (Measured with interleaved A/B calls:
  /// with 32-key tiles the forward's rows unrolled by 2 ran 3.5% faster;
  /// with 128-key steps 0.7-1.3%, while the copy cost 16-27% of the JIT's
  /// instructions for the examples; the backward's gained nothing.)
  void forRows(mlir::Value i0,
               mlir::function_ref<void(mlir::Value, mlir::Value)> body);

  /// keyMask, skipped (all lanes kept) in tiles the named masks leave whole:
  /// only boundary tiles evaluate it.
  mlir::SmallVector<mlir::Value>
  keyMaskUnlessWhole(mlir::Value whole, mlir::Value j0, mlir::Value lo,
                     mlir::Value hi, int64_t width = kCols);

  /// Whether each key of the `width` from j0 lies in [lo, hi), per 16-lane
  /// vector.
  mlir::SmallVector<mlir::Value> keyMask(mlir::Value j0, mlir::Value lo,
                                         mlir::Value hi, int64_t width = kCols);

  /// y[r, :] = alpha[r] * y[r, :] + sum_{j < valid} c[r, j] * x[bi, g, j0 + j,
  /// :] (x's width a multiple of 16); a null `alpha` (a memref of rows scalars)
  /// means 1.
  void rowsTimesKeys(mlir::Value y, mlir::Value c, const KeySource &x,
                     mlir::Value bi, mlir::Value g, mlir::Value j0,
                     mlir::Value valid, mlir::Value alpha,
                     int64_t prefetchAhead = 0);

  /// body(col, n) for the columns of a row `width` wide (a multiple of 16),
  /// n vectors from col: `perChunk` vectors at a time through a loop, then
  /// the rest 32 and 16 wide.
  void forColumns(int64_t width,
                  mlir::function_ref<void(mlir::Value, int64_t)> body,
                  int64_t perChunk = 2);
  // The most accumulators rowsTimesKeys gives its rows x vectors when x is
  // read where it is (with the vectors of x and the coefficient, 32 zmm).
  static constexpr int64_t kMaxAccumulators = 20;

  /// rowsTimesKeys for the n vectors of columns from `col`. c may also be
  /// in key tiles, [tiles, rows, 32]: c[r, j] is then c[j / 32, r, j % 32].
  /// With `prefetchAhead`, a chunked x's row that many keys ahead is
  /// prefetched at each key (x then has that many keys past Skv).
  void rowsTimesKeysColumns(mlir::Value y, mlir::Value c, const KeySource &x,
                            mlir::Value bi, mlir::Value g, mlir::Value j0,
                            mlir::Value valid, mlir::Value alpha,
                            mlir::Value col, int64_t n,
                            int64_t prefetchAhead = 0);

  /// Appends varlen's offsets (with varlen) and the region captures'
  /// buffers (score_mod's, then mask_mod's) to a task's captured values and
  /// notes where they are in its arguments.
  void appendCaptures(mlir::SmallVectorImpl<mlir::Value> &captured);
  /// Gives `masks` the offsets among the arguments of a task whose
  /// captured values appendCaptures completed: what each such task body
  /// does first, before it builds mask arithmetic.
  void bindMaskInputs(mlir::ArrayRef<mlir::Value> args);

  /// The key indices j0 + 16 w + lane as a vector of index.
  mlir::Value keyIndices(mlir::Value j0, int64_t w);

  /// One 16-key half w of a score row: the scaled scores (x = scale S, or
  /// s itself when `prescaled`), the score_mod of them (S', x without a
  /// region) and the lanes the masks keep (`inRange`, the named masks, and
  /// the mask_mod region); with a region, also the key indices it saw.
  struct Scores {
    mlir::Value scaled, modified, keep, keys;
  };
  Scores scoresOf(mlir::ArrayRef<mlir::Value> caps, mlir::Value s,
                  mlir::Value inRange, mlir::Value bi, mlir::Value h,
                  mlir::Value row, mlir::Value j0, int64_t w, bool prescaled);

  /// Stores the 2 * rows vectors of a tile product into columns [col,
  /// col + 32) of a rows x n buffer.
  void storeTile(mlir::ArrayRef<mlir::Value> tile, mlir::Value buffer,
                 mlir::Value col = mlir::Value());

  /// Zeros a 2-d or 3-d f32 buffer whose rows are a multiple of 16 wide.
  void zero(mlir::Value buffer);

  /// buffer[leading..., from : from + count, ...] (the whole next dimension
  /// without `from`) as a memref of the remaining dimensions.
  mlir::Value view(mlir::Value buffer, mlir::ValueRange leading,
                   mlir::Value from = mlir::Value(), int64_t count = 0);

  //===--------------------------------------------------------------------===//
  // AMX scores (FlashForwardAmx.cpp): 16 x 16 f32 tiles of bf16 operands
  // with pairs of the reduction dimension side by side (tdpbf16ps's VNNI
  // layout), for the forward and the statistics kernel.
  //===--------------------------------------------------------------------===//

  /// The rows and keys of an AMX tile of f32 scores.
  static constexpr int64_t kAmxRows = attn::CpuPlanAttr::kAmxRows;

public:
  /// Marks the module of `op` attn.uses_amx: its entry points must first
  /// get the OS's leave to use AMX (attn-export-abi).
  static void markUsesAmx(mlir::Operation *op);

protected:
  /// rows[r, :] = q[bi, h, min(i0 + r, Sq - 1), :] (bf16, a tile's A).
  void copyRows(mlir::Value q, mlir::Value bi, mlir::Value h, mlir::Value i0,
                mlir::Value rowsBuf);

  /// The indices of an operand's 16-row tile for reduction step k and
  /// row tile or column tile i.
  using TileAt = llvm::function_ref<mlir::SmallVector<mlir::Value>(
      mlir::Value k, int64_t i)>;

  /// mTiles x nTiles 16 x 16 f32 tiles c[cAt(m, n)] (+)= the sum over the
  /// reduction steps k in [k0, k1) of a[aAt(k, m)] (16 rows of 32 bf16)
  /// times bm[bAt(k, n)] (16 rows of 16 pairs of bf16: tdpbf16ps's B), the
  /// tiles loaded from c when `accumulate`, else from zeros, and stored
  /// there. The C tiles stay in tile registers over the steps (a loop, or
  /// unrolled when k0 and k1 are constants at most 8 apart): with an A per
  /// m and one B, mTiles * nTiles + mTiles + 1 <= 8 tile registers.
  void amxProducts(
      mlir::Value a, TileAt aAt, mlir::Value bm, TileAt bAt, mlir::Value c,
      llvm::function_ref<mlir::SmallVector<mlir::Value>(int64_t m, int64_t n)>
          cAt,
      int64_t mTiles, int64_t nTiles, mlir::Value k0, mlir::Value k1,
      bool accumulate);

  /// pBuf[rows, 32 keyTiles] = the query rows qRows[t] (bf16, [., rows,
  /// D]) times the keys from 32-key tile `tile` (paired, kp): 2 keyTiles
  /// 16 x 16 tiles for each tile of 16 rows, amxTilesPerPass() at a time,
  /// D / 32 products each. Unscaled scores.
  void amxScores(mlir::Value qRows, mlir::Value t, mlir::Value kp,
                 mlir::Value bi, mlir::Value g, mlir::Value tile,
                 mlir::Value pBuf, int64_t keyTiles);
  /// The C tiles of 16 columns (keys, or V's columns) an AMX product
  /// computes at a time for the plan's rows: as many as AMX's 8 tile
  /// registers hold beside the rows' A tiles and a B tile (4 for a tile of
  /// 16 rows, 2 for two).
  int64_t amxTilesPerPass() const { return rows > kAmxRows ? 2 : 4; }
  /// amxScores' products for the keyTiles 16-key tiles from `first` (of
  /// the step) alone.
  void amxScoreGroup(mlir::Value qRows, mlir::Value t, mlir::Value kp,
                     mlir::Value bi, mlir::Value g, mlir::Value tile,
                     mlir::Value pBuf, mlir::Value first, int64_t keyTiles);

  //===--------------------------------------------------------------------===//
  // AVX-512 BF16 dot products (DotProducts.cpp): vdpbf16ps adds the products
  // of a pair of bf16 (a reduction index and the next) into each of 16 f32
  // lanes; one operand is a pair broadcast to every lane pair, the other
  // holds 16 such pairs (the AMX layouts above).
  //===--------------------------------------------------------------------===//

  /// The pair of bf16 at buffer[indices...] (the last index even) in every
  /// lane pair of a vector<32xbf16>.
  mlir::Value broadcastPair(mlir::Value buffer, mlir::ValueRange indices);

  /// A register block of vdpbf16ps over the pair index p in [lo, hi):
  /// acc[i * xs + w] += a(p, i) . x(p, w) for i < as, w < xs, starting
  /// from `init`; the final sums.
  mlir::SmallVector<mlir::Value>
  dotBlock(mlir::Value lo, mlir::Value hi, mlir::ValueRange init, int64_t as,
           int64_t xs, llvm::function_ref<mlir::Value(mlir::Value, int64_t)> a,
           llvm::function_ref<mlir::Value(mlir::Value, int64_t)> x);

  /// The rows x 32 tile sum over d of a[rowAt(r)..., d] (bf16 rows) times
  /// the 16-key tiles 2 t and 2 t + 1 of pairs[prefix..., ., d / 2, :]
  /// (pairColumns), as 2 rows vectors: Q K^T's scores (unscaled) or dO
  /// V^T, for the forward and the backward.
  mlir::SmallVector<mlir::Value> dotRowsTimesColumnPairs(
      mlir::Value a,
      llvm::function_ref<mlir::SmallVector<mlir::Value>(int64_t)> rowAt,
      mlir::Value pairs, mlir::ValueRange prefix, mlir::Value t);

  /// init (rows x xs sums) plus, over the 32-key tiles kt < tiles and
  /// their key pairs jp < 16, a(kt, jp, r) (row r's pair of keys) times
  /// x(kt, jp, w) (16 columns' pairs of keys, pairKeys): P V or dS K.
  mlir::SmallVector<mlir::Value> dotOverKeyTiles(
      mlir::Value tiles, mlir::ValueRange init, int64_t xs,
      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value, int64_t)> a,
      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value, int64_t)> x);

  /// dst[at..., t, d / 2, 2 j + d % 2] = src[bi, g, j0 + 16 t + j, d] for
  /// the `tiles16` 16-key tiles from key j0 (zeros past Skv and src's
  /// limit): K (or V) with
  /// pairs of its columns side by side, the B operand of Q K^T (dO V^T).
  /// With `prefetchAhead`, the rows that many keys ahead of those read are
  /// prefetched (prefetchKeyRows).
  void pairColumns(const KeySource &src, mlir::Value dst, mlir::ValueRange at,
                   mlir::Value bi, mlir::Value g, mlir::Value j0,
                   int64_t tiles16, int64_t prefetchAhead = 0);

  /// dst[at..., t, j / 2, 2 c + j % 2] = src[bi, g, j0 + 32 t + j, c] for
  /// the `tiles32` 32-key tiles from key j0 (zeros past Skv and src's
  /// limit): V (or K) with pairs of keys side by side, the B operand of
  /// P V (dS K). `prefetchAhead` as pairColumns'.
  void pairKeys(const KeySource &src, mlir::Value dst, mlir::ValueRange at,
                mlir::Value bi, mlir::Value g, mlir::Value j0, int64_t tiles32,
                int64_t prefetchAhead = 0);

  /// exp of 16 lanes (vscalefps on AVX-512, upstream's polynomial else),
  /// 0 below the smallest normal float: denormal probabilities made the
  /// P V products take microcode assists (a forward with large logits,
  /// a projected-Q MHA layer, ran 4x slower), and a masked -inf gives
  /// exactly 0.
  mlir::Value expVector(mlir::Value x);

  /// values[0] op values[1] op ... as a tree (depth log2 n, not a chain of
  /// n - 1 dependent ops; the forward's 8 vectors a row: 1.9% faster at
  /// D=64, interleaved A/B).
  mlir::Value
  tree(mlir::ArrayRef<mlir::Value> values,
       mlir::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);

  /// e = exp(x) (a scalar or 16 lanes), 0 where x < ln FLT_MIN.
  mlir::Value flushTiny(mlir::Value x, mlir::Value e);

  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  mlir::Region noScoreMod; // (before scoreMod, which may refer to it)
  bool scalefExp;
  MaskTiles masks;
  float scale;
  mlir::func::FuncOp parent;
  mlir::Region &scoreMod, &maskMod;
  size_t numScoreCaptures;
  mlir::SmallVector<mlir::Value>
      captures;           // score_mod's, then mask_mod's (tensors)
  size_t captureBase = 0; // where their buffers start in task args
  mlir::Value varlen;     // varlen's offsets (a tensor), null for none
  size_t offsetsArg = 0;  // where their buffer is in task args
  int64_t B, H, Sq, D, Hkv, Skv, Dv, tiles;
};

/// Builds `Kernel(b, op, plan, vectorBits)` (its build()) in place of `op`,
/// which its results replace; returns them.
template <typename Kernel, typename OpTy>
auto replaceWithKernel(mlir::RewriterBase &rewriter, OpTy op,
                       attn::CpuPlanAttr plan, int64_t vectorBits) {
  mlir::OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  mlir::ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  auto results = Kernel(b, op, plan, vectorBits).build();
  rewriter.replaceOp(op, results);
  return results;
}

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHCOMMON_H
