// The backward's five products as AVX-512 BF16 dot products (DotProducts.cpp),
// for bf16 Q, K, V and dO on CPUs that have them: S = Q K^T and dP = dO V^T
// from Q's and dO's rows as given and the key block's K and V with pairs of
// columns side by side; dQ += dS K from dS in bf16 and K with pairs of keys;
// dV^T += dO^T P and dK^T += Q^T dS from Q and dO packed transposed in bf16
// (pairs of rows adjacent) and P and dS with pairs of rows side by side.
// P and dS are rounded to bf16 for the products, as FlashAttention's GPU
// backward rounds them; every sum is f32.
#include "codegen/cpu/FlashBackward.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

SmallVector<Value> FlashBackward::dotScratch() {
  Type bf16 = b.getBF16Type();
  int64_t chunkRows = kChunkTiles * rows;
  return {scratchBuffer({blockTiles, chunkRows, kCols}),
          scratchBuffer({blockTiles, chunkRows, kCols}),
          scratchBuffer({blockTiles, D, kCols}),
          scratchBuffer({blockTiles, Dv, kCols}),
          scratchBuffer({2 * blockTiles, D / 2, kCols}, bf16),
          scratchBuffer({2 * blockTiles, Dv / 2, kCols}, bf16),
          scratchBuffer({blockTiles, kLanes, 2 * D}, bf16),
          scratchBuffer({blockTiles, chunkRows, kCols}, bf16),
          scratchBuffer({blockTiles, chunkRows / 2, 2 * kCols}, bf16),
          scratchBuffer({blockTiles, chunkRows / 2, 2 * kCols}, bf16)};
}

Value FlashBackward::pairedColumnsOf(Value x) {
  int64_t width = shapeOf(x)[3];
  Value pairs = alloc({B, Hkv, 2 * tiles, width / 2, kCols}, b.getBF16Type());
  forEachHead(
      "__attnc_flash_column_pairs", {x, pairs}, Hkv,
      [&](ArrayRef<Value> args, Value bi, Value g) {
        pairColumns(args[0], args[1], {bi, g}, bi, g, idx(0), 2 * tiles);
      });
  return pairs;
}

void FlashBackward::dotPairBlock(const KeyBlock &kb, const KeySource &k,
                                 const KeySource &v) {
  pairColumns(k, kb.ktTile(), {}, kb.bi, kb.g, kb.j0, 2 * blockTiles);
  pairColumns(v, kb.vtTile(), {}, kb.bi, kb.g, kb.j0, 2 * blockTiles);
  pairKeys(k, kb.kChunks(), {}, kb.bi, kb.g, kb.j0, blockTiles);
}

SmallVector<Value> FlashBackward::dotTile(Value x, Value pairs,
                                          ValueRange prefix, Value bi, Value h,
                                          Value i0, Value t) {
  return dotRowsTimesColumnPairs(
      x,
      [&](int64_t r) {
        return SmallVector<Value>{
            bi, h,
            arith::MinUIOp::create(b, arith::AddIOp::create(b, i0, idx(r)),
                                   idx(Sq - 1))};
      },
      pairs, prefix, t);
}

void FlashBackward::dotPairRows(Value pTile, Value dsTile, Value dsBf,
                                Value pPairs, Value dsPairs) {
  auto halfType = VectorType::get({kLanes}, b.getBF16Type());
  auto narrow = [&](Value buffer, Value r, int64_t w) {
    return arith::TruncFOp::create(
        b, halfType,
        vector::LoadOp::create(b, vec, buffer, ValueRange{r, idx(w * kLanes)}));
  };
  loop(0, rows / 2, [&](Value rp) {
    Value r0 = arith::MulIOp::create(b, rp, idx(2));
    Value r1 = arith::AddIOp::create(b, r0, idx(1));
    for (int64_t w = 0; w < 2; ++w) {
      Value ds0 = narrow(dsTile, r0, w), ds1 = narrow(dsTile, r1, w);
      vector::StoreOp::create(b, ds0, dsBf, ValueRange{r0, idx(w * kLanes)});
      vector::StoreOp::create(b, ds1, dsBf, ValueRange{r1, idx(w * kLanes)});
      vector::StoreOp::create(b, vector::InterleaveOp::create(b, ds0, ds1),
                              dsPairs, ValueRange{rp, idx(w * kCols)});
      vector::StoreOp::create(
          b,
          vector::InterleaveOp::create(b, narrow(pTile, r0, w),
                                       narrow(pTile, r1, w)),
          pPairs, ValueRange{rp, idx(w * kCols)});
    }
  });
}

void FlashBackward::dotQueryGrads(Value y, Value dsRows, Value kPairs,
                                  Value keys, Value col, int64_t n) {
  auto pairType = VectorType::get({2 * kLanes}, b.getBF16Type());
  SmallVector<Value> cols, init;
  for (int64_t w = 0; w < n; ++w)
    cols.push_back(arith::AddIOp::create(b, col, idx(w * kLanes)));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < n; ++w)
      init.push_back(
          vector::LoadOp::create(b, vec, y, ValueRange{idx(r), cols[w]}));
  // Whole key tiles: dS is 0 past a row's keys, K's pairs past Skv.
  Value tiles = arith::DivUIOp::create(
      b, arith::AddIOp::create(b, keys, idx(kCols - 1)), idx(kCols));
  SmallVector<Value> acc = dotOverKeyTiles(
      tiles, init, n,
      [&](Value t, Value jp, int64_t r) {
        return broadcastPair(dsRows,
                             {t, idx(r), arith::MulIOp::create(b, jp, idx(2))});
      },
      [&](Value t, Value jp, int64_t w) {
        return vector::LoadOp::create(
            b, pairType, kPairs,
            ValueRange{t, jp, arith::MulIOp::create(b, cols[w], idx(2))});
      });
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < n; ++w)
      vector::StoreOp::create(b, acc[r * n + w], y,
                              ValueRange{idx(r), cols[w]});
}

void FlashBackward::dotAccumulateTransposed(Value zt, Value c, Value packed,
                                            ValueRange prefix, Value tile0,
                                            Value tiles, Value block,
                                            Value row0) {
  // kDs d's at a time: 2 kDs sums, two row pairs of c and a broadcast in
  // registers (12 ran the backward no faster than 8: S = 2048, D = 64 and
  // 128, causal or not, interleaved A/B).
  constexpr int64_t kDs = 8;
  auto pairType = VectorType::get({2 * kLanes}, b.getBF16Type());
  int64_t width = shapeOf(zt)[1];
  auto dBlock = [&](Value d0, int64_t count) {
    SmallVector<Value> ds, init;
    for (int64_t i = 0; i < count; ++i) {
      ds.push_back(arith::AddIOp::create(b, d0, idx(i)));
      for (int64_t w = 0; w < 2; ++w)
        init.push_back(vector::LoadOp::create(
            b, vec, zt, ValueRange{block, ds[i], idx(w * kLanes)}));
    }
    auto tLoop = scf::ForOp::create(
        b, idx(0), tiles, idx(1), init,
        [&](OpBuilder &, Location, Value t, ValueRange acc) {
          Value tile = arith::AddIOp::create(b, tile0, t);
          Value pair0 = arith::DivUIOp::create(
              b,
              arith::AddIOp::create(b, row0,
                                    arith::MulIOp::create(b, t, idx(rows))),
              idx(2));
          scf::YieldOp::create(
              b,
              dotBlock(
                  idx(0), idx(rows / 2), acc, count, 2,
                  [&](Value rp, int64_t i) {
                    SmallVector<Value> at(prefix);
                    at.append(
                        {tile, ds[i], arith::MulIOp::create(b, rp, idx(2))});
                    return broadcastPair(packed, at);
                  },
                  [&](Value rp, int64_t w) {
                    return vector::LoadOp::create(
                        b, pairType, c,
                        ValueRange{block, arith::AddIOp::create(b, pair0, rp),
                                   idx(w * kCols)});
                  }));
        });
    for (int64_t i = 0; i < count; ++i)
      for (int64_t w = 0; w < 2; ++w)
        vector::StoreOp::create(b, tLoop.getResult(2 * i + w), zt,
                                ValueRange{block, ds[i], idx(w * kLanes)});
  };
  int64_t whole = width / kDs * kDs;
  if (whole)
    loop(idx(0), idx(whole), kDs, [&](Value d0) { dBlock(d0, kDs); });
  if (width % kDs)
    dBlock(idx(whole), width % kDs);
}

} // namespace attnc
