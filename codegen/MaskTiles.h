// The named masks of a fused attention op (causal, sliding window, key
// lengths, packed sequences) tile by tile: the index arithmetic every back
// end's flash kernels build to skip the tiles a mask empties, run the tiles it
// leaves whole without evaluating it, and evaluate it only on boundary tiles.
// Target-neutral: scalars of index type (and, for the per-key predicate,
// vectors of any integer type), built with arith ops.
//
// For a query tile of `rows` rows from i0 and a key block of `width` keys
// from j0 (both as the kernel's loops give them):
//   skipped   when !seesKeyBlock(keysSeenBy(i0), j0): no row sees a key;
//   whole     when isWhole(i0, j0): every row sees every key;
//   boundary  otherwise: key j of row i is visible when
//             inRange(j, rowRange(i).lo, rowRange(i).hi).
// mask_mod regions are not named masks: kernels evaluate them per element.
#ifndef ATTNC_CODEGEN_MASKTILES_H
#define ATTNC_CODEGEN_MASKTILES_H

#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>
#include <utility>

namespace attnc {

class MaskTiles {
public:
  MaskTiles(bool causal, std::optional<int64_t> window, int64_t sq, int64_t skv,
            bool cache = false, int64_t numOffsets = 0)
      : causal(causal), window(window), sq(sq), skv(skv), cache(cache),
        numOffsets(numOffsets) {}
  /// The masks of attn.attention, attn.attention_grad or an op with their
  /// mask options (those without `cache` never shift the rows).
  template <typename OpTy>
  explicit MaskTiles(OpTy op)
      : MaskTiles(op.getCausal(), op.getWindow(), shapeOf(op.getQuery())[2],
                  attn::keyCountOf(op), attn::isCache(op),
                  attn::varlenOf(op) ? shapeOf(attn::varlenOf(op))[0] : 0) {}

  /// The packed sequence [start, end) that position x lies in, from
  /// `load(d)`, the index value of offset d of n1 nondecreasing ones (a
  /// binary search of fixed steps): before the first sequence both are
  /// offset 0, from the last one's end both are offset n1 - 1, so that
  /// start and end never decrease as x grows; x < end only inside one.
  struct Sequence {
    mlir::Value start, end;
  };
  static Sequence sequenceOf(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value x, int64_t n1,
                             llvm::function_ref<mlir::Value(mlir::Value)> load);
  /// sequenceOf over `offsets`, which the kernel must have set.
  Sequence sequenceOf(mlir::ImplicitLocOpBuilder &b, mlir::Value x) const;

  /// The keys batch `bi` has: Skv, or its entry of `lengths` (a memref of
  /// i32 or i64, null for none) clamped to [0, Skv].
  mlir::Value keyLimit(mlir::ImplicitLocOpBuilder &b, mlir::Value lengths,
                       mlir::Value bi) const;

  /// The position the causal and window masks give query row `row` of a
  /// batch with `limit` keys: the row, or with `cache` limit - Sq + row (the
  /// queries are the batch's last tokens; negative when limit < Sq).
  mlir::Value position(mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                       mlir::Value row) const;

  /// Query row i clamped to Sq - 1 (rows past Sq repeat the last one) and
  /// the keys [lo, hi) it sees; `existsOnly` empties rows past Sq.
  struct RowRange {
    mlir::Value row, lo, hi;
  };
  RowRange rowRange(mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                    mlir::Value i, bool existsOnly) const;

  /// The keys some row of the tile [i0, i0 + rows) sees: [lo of its first
  /// row rounded down to a multiple of `align`, hi of its last row); end
  /// is never below start.
  struct KeyRange {
    mlir::Value start, end;
  };
  KeyRange keysSeenBy(mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                      mlir::Value i0, int64_t rows, int64_t align) const;

  /// Whether the tile's rows see a key of the block from j0 (a multiple of
  /// the range's alignment): false when the tile is skipped.
  mlir::Value seesKeyBlock(mlir::ImplicitLocOpBuilder &b, const KeyRange &keys,
                           mlir::Value j0) const;

  /// Whether every row of the tile [i0, i0 + rows) sees all `width` keys
  /// from j0 (lo grows with the row, hi too until rows past Sq, which see
  /// none when `existsOnly`): a whole tile evaluates no mask.
  mlir::Value isWhole(mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                      mlir::Value i0, int64_t rows, mlir::Value j0,
                      int64_t width, bool existsOnly) const;

  /// The query rows [first, end) that can see the `width` keys from j0
  /// under the causal and window masks of a batch with `limit` keys
  /// (lengths bound keys, not rows; `limit` only places the rows of a
  /// cache): first rounded down to a multiple of `align`, both >= 0.
  std::pair<mlir::Value, mlir::Value> rowsSeeing(mlir::ImplicitLocOpBuilder &b,
                                                 mlir::Value limit,
                                                 mlir::Value j0, int64_t width,
                                                 int64_t align) const;

  /// The end of the keys from j0 on that some row may see: keys from it on
  /// are past the batch's `limit` (keyLimit) and skipped.
  mlir::Value seenKeysEnd(mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                          mlir::Value j0) const;

  /// The boundary predicate: lo <= j < hi, for scalars or vectors (j, lo
  /// and hi of one type).
  static mlir::Value inRange(mlir::ImplicitLocOpBuilder &b, mlir::Value j,
                             mlir::Value lo, mlir::Value hi);

  bool causal;
  std::optional<int64_t> window;
  int64_t sq, skv;
  /// The keys are a KV cache and the queries its last tokens (`cache`).
  bool cache;
  /// varlen's offsets: how many (n + 1; 0 without varlen), and the memref
  /// (or tensor) of i32 or i64 that holds them, which the kernel sets in
  /// each function that builds mask arithmetic (with varlen every row's
  /// keys depend on them: rowRange, rowsSeeing and what calls them).
  int64_t numOffsets;
  mlir::Value offsets;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_MASKTILES_H
