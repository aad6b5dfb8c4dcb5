// The backward's five products on AMX tiles (FlashCommon::amxProducts), for
// bf16 Q, K, V and dO on CPUs that have AMX-BF16: the dot products' layouts
// (FlashBackwardDot.cpp) are tdpbf16ps's operands as they are. With 32 query
// rows a tile: S = Q K^T and dP = dO V^T from two tiles of Q's (dO's) rows
// by two 16-key tiles of K's (V's) column pairs, D / 32 steps; dQ += dS K
// from two tiles of dS's rows (bf16) by K's key pairs, a step per 32 keys;
// dV^T += dO^T P and dK^T += Q^T dS from dO^T's (Q^T's) packed rows by P's
// (dS's) row pairs, a step per query tile. P and dS are rounded to bf16 as
// on dot products; every sum is f32.
#include "codegen/cpu/FlashBackward.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

void FlashBackward::rowProducts(Value x, Value pairs, ValueRange prefix,
                                Value bi, Value h, Value i0, Value t,
                                Value dst) {
  if (!amx) {
    storeTile(dotTile(x, pairs, prefix, bi, h, i0, t), dst);
    return;
  }
  Value t16 = arith::MulIOp::create(b, t, idx(2));
  amxProducts(
      x,
      [&](Value k, int64_t m) {
        return SmallVector<Value>{
            bi, h, arith::AddIOp::create(b, i0, idx(kAmxRows * m)),
            arith::MulIOp::create(b, k, idx(2 * kAmxRows))};
      },
      pairs,
      [&](Value k, int64_t n) {
        SmallVector<Value> at(prefix);
        at.append({arith::AddIOp::create(b, t16, idx(n)),
                   arith::MulIOp::create(b, k, idx(kAmxRows)), idx(0)});
        return at;
      },
      dst,
      [&](int64_t m, int64_t n) {
        return SmallVector<Value>{idx(kAmxRows * m), idx(kAmxRows * n)};
      },
      rows / kAmxRows, 2, idx(0), idx(shapeOf(x)[3] / (2 * kAmxRows)),
      /*accumulate=*/false);
}

void FlashBackward::padRows(Value x, Value padded, Value bi, Value h) {
  auto half = VectorType::get({kLanes}, b.getBF16Type());
  loop(0, shapeOf(padded)[2], [&](Value i) {
    Value row = arith::MinUIOp::create(b, i, idx(Sq - 1));
    loop(idx(0), idx(shapeOf(x)[3]), kLanes, [&](Value c) {
      vector::StoreOp::create(
          b, vector::LoadOp::create(b, half, x, ValueRange{bi, h, row, c}),
          padded, ValueRange{bi, h, i, c});
    });
  });
}

void FlashBackward::amxQueryGrads(Value y, Value dsRows, Value kPairs,
                                  Value keys, Value col, int64_t n) {
  // Whole key tiles: dS is 0 past a row's keys, K's pairs past Skv.
  Value tiles = arith::DivUIOp::create(
      b, arith::AddIOp::create(b, keys, idx(kCols - 1)), idx(kCols));
  amxProducts(
      dsRows,
      [&](Value k, int64_t m) {
        return SmallVector<Value>{k, idx(kAmxRows * m), idx(0)};
      },
      kPairs,
      [&](Value k, int64_t w) {
        return SmallVector<Value>{
            k, idx(0),
            arith::MulIOp::create(
                b, arith::AddIOp::create(b, col, idx(w * kLanes)), idx(2))};
      },
      y,
      [&](int64_t m, int64_t w) {
        return SmallVector<Value>{
            idx(kAmxRows * m), arith::AddIOp::create(b, col, idx(w * kLanes))};
      },
      rows / kAmxRows, n, idx(0), tiles, /*accumulate=*/true);
}

void FlashBackward::amxAccumulateTransposed(Value zt, Value c, Value packed,
                                            ValueRange prefix, Value tile0,
                                            Value tiles, Value block,
                                            Value row0) {
  // 32 of zt's rows (d) by the key tile's two halves at a time.
  Value pair0 = arith::DivUIOp::create(b, row0, idx(2));
  loop(idx(0), idx(shapeOf(zt)[1]), 2 * kAmxRows, [&](Value d0) {
    amxProducts(
        packed,
        [&](Value q, int64_t m) {
          SmallVector<Value> at(prefix);
          at.append({arith::AddIOp::create(b, tile0, q),
                     arith::AddIOp::create(b, d0, idx(kAmxRows * m)), idx(0)});
          return at;
        },
        c,
        [&](Value q, int64_t n) {
          return SmallVector<Value>{
              block,
              arith::AddIOp::create(b, pair0,
                                    arith::MulIOp::create(b, q, idx(rows / 2))),
              idx(2 * kAmxRows * n)};
        },
        zt,
        [&](int64_t m, int64_t n) {
          return SmallVector<Value>{
              block, arith::AddIOp::create(b, d0, idx(kAmxRows * m)),
              idx(kAmxRows * n)};
        },
        2, 2, idx(0), tiles, /*accumulate=*/true);
  });
}

} // namespace attnc
