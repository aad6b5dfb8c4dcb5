// The named masks tile by tile (see MaskTiles.h).
#include "codegen/MaskTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace attnc {

static Value idx(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value MaskTiles::keyLimit(ImplicitLocOpBuilder &b, Value lengths,
                          Value bi) const {
  Value limit = idx(b, skv);
  if (!lengths)
    return limit;
  Value len = memref::LoadOp::create(b, lengths, bi);
  Value n = arith::IndexCastOp::create(b, b.getIndexType(), len);
  return arith::MinSIOp::create(b, limit,
                                arith::MaxSIOp::create(b, n, idx(b, 0)));
}

Value MaskTiles::position(ImplicitLocOpBuilder &b, Value limit,
                          Value row) const {
  if (!cache)
    return row;
  return arith::AddIOp::create(
      b, row, arith::SubIOp::create(b, limit, idx(b, sq)));
}

MaskTiles::RowRange MaskTiles::rowRange(ImplicitLocOpBuilder &b, Value limit,
                                        Value i, bool existsOnly) const {
  RowRange range;
  range.row = arith::MinUIOp::create(b, i, idx(b, sq - 1));
  Value pos = position(b, limit, range.row);
  range.hi = limit;
  if (causal || window)
    range.hi = arith::MinSIOp::create(
        b, range.hi, arith::AddIOp::create(b, pos, idx(b, 1)));
  if (existsOnly)
    range.hi = arith::SelectOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(b, sq)),
        range.hi, idx(b, 0));
  range.lo = idx(b, 0);
  if (window)
    range.lo = arith::MaxSIOp::create(
        b, range.lo, arith::SubIOp::create(b, pos, idx(b, *window - 1)));
  return range;
}

MaskTiles::KeyRange MaskTiles::keysSeenBy(ImplicitLocOpBuilder &b, Value limit,
                                          Value i0, int64_t rows,
                                          int64_t align) const {
  Value first = rowRange(b, limit, i0, false).lo;
  Value last =
      rowRange(b, limit, arith::AddIOp::create(b, i0, idx(b, rows - 1)), false)
          .hi;
  KeyRange keys;
  keys.start = arith::MulIOp::create(
      b, arith::DivUIOp::create(b, first, idx(b, align)), idx(b, align));
  keys.end = arith::MaxSIOp::create(b, last, keys.start);
  return keys;
}

Value MaskTiles::seesKeyBlock(ImplicitLocOpBuilder &b, const KeyRange &keys,
                              Value j0) const {
  return arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j0, keys.start),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j0, keys.end));
}

Value MaskTiles::isWhole(ImplicitLocOpBuilder &b, Value limit, Value i0,
                         int64_t rows, Value j0, int64_t width,
                         bool existsOnly) const {
  RowRange first = rowRange(b, limit, i0, existsOnly);
  RowRange last = rowRange(
      b, limit, arith::AddIOp::create(b, i0, idx(b, rows - 1)), existsOnly);
  Value minHi = arith::MinSIOp::create(b, first.hi, last.hi);
  return arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j0, last.lo),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                            arith::AddIOp::create(b, j0, idx(b, width)),
                            minHi));
}

std::pair<Value, Value> MaskTiles::rowsSeeing(ImplicitLocOpBuilder &b,
                                              Value limit, Value j0,
                                              int64_t width,
                                              int64_t align) const {
  // Row r sees key j0 from position(r) >= j0 on (causal), and the block's
  // last key while position(r) < j0 + width + window - 1: in rows, from
  // j0 - shift and below j0 + width + window - 1 - shift.
  Value shift = cache ? position(b, limit, idx(b, 0)) : Value();
  Value firstRow = j0;
  if (cache)
    firstRow = arith::MaxSIOp::create(b, idx(b, 0),
                                      arith::SubIOp::create(b, j0, shift));
  Value first = idx(b, 0), end = idx(b, sq);
  if (causal || window)
    first = arith::MulIOp::create(
        b, arith::DivUIOp::create(b, firstRow, idx(b, align)), idx(b, align));
  if (window) {
    Value last = arith::AddIOp::create(b, j0, idx(b, width + *window - 1));
    if (cache)
      last = arith::MaxSIOp::create(b, idx(b, 0),
                                    arith::SubIOp::create(b, last, shift));
    end = arith::MinUIOp::create(b, end, last);
  }
  return {first, end};
}

Value MaskTiles::seenKeysEnd(ImplicitLocOpBuilder &b, Value limit,
                             Value j0) const {
  return arith::MinUIOp::create(b, idx(b, skv),
                                arith::MaxSIOp::create(b, limit, j0));
}

Value MaskTiles::inRange(ImplicitLocOpBuilder &b, Value j, Value lo, Value hi) {
  return arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j, lo),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j, hi));
}

} // namespace attnc
