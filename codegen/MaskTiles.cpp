// The named masks tile by tile (see MaskTiles.h).
#include "codegen/MaskTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace attnc {

static Value idx(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

MaskTiles::Sequence MaskTiles::sequenceOf(OpBuilder &b, Location loc, Value x,
                                          int64_t n1,
                                          function_ref<Value(Value)> load) {
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto atMost = [&](Value d) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, load(d), x);
  };
  // base: the last d with offset d <= x (0 when there is none); the
  // answer stays in [base, base + len).
  Value base = constant(0);
  for (int64_t len = n1; len > 1; len -= len / 2) {
    Value probe = arith::AddIOp::create(b, loc, base, constant(len / 2));
    base = arith::SelectOp::create(b, loc, atMost(probe), probe, base);
  }
  Value next = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, base, constant(1)),
      constant(n1 - 1));
  Value end = arith::SelectOp::create(b, loc, atMost(base), next, base);
  return {load(base), load(end)};
}

MaskTiles::Sequence MaskTiles::sequenceOf(ImplicitLocOpBuilder &b,
                                          Value x) const {
  assert(offsets && "varlen's offsets not set in this function");
  return sequenceOf(b, b.getLoc(), x, numOffsets, [&](Value d) -> Value {
    Value entry = isa<RankedTensorType>(offsets.getType())
                      ? Value(tensor::ExtractOp::create(b, offsets, d))
                      : Value(memref::LoadOp::create(b, offsets, d));
    return arith::IndexCastOp::create(b, b.getIndexType(), entry);
  });
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
  if (numOffsets) {
    // (An empty range outside every sequence, lo and hi still growing
    // with the row.)
    Sequence seq = sequenceOf(b, range.row);
    range.lo = arith::MaxSIOp::create(b, range.lo, seq.start);
    range.hi = arith::MinSIOp::create(b, range.hi, seq.end);
  }
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
  if (numOffsets) {
    // Rows of the sequences the block's keys lie in.
    Value start = sequenceOf(b, j0).start;
    firstRow =
        causal || window ? arith::MaxSIOp::create(b, firstRow, start) : start;
    end = sequenceOf(b, arith::AddIOp::create(b, j0, idx(b, width - 1))).end;
  }
  if (causal || window || numOffsets)
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
