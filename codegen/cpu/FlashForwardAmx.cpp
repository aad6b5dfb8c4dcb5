// The products on AMX tiles: 16 x 16 f32 tiles of bf16 operands with pairs
// of the reduction dimension side by side (tdpbf16ps's VNNI layout); the
// softmax stays on AVX-512. Q K^T for the forward and the statistics kernel
// (FlashCommon), and the forward's pairing of V and P V (FlashForward).
#include "codegen/cpu/FlashForward.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

void FlashCommon::markUsesAmx(Operation *op) {
  op->getContext()
      ->getLoadedDialect<attn::AttnDialect>()
      ->getUsesAmxAttrHelper()
      .setAttr(op->getParentOfType<ModuleOp>(),
               UnitAttr::get(op->getContext()));
}

std::pair<Value, Value> FlashForward::pairedKeysAndValues(Value k, Value v) {
  // Whole steps of blockTiles tiles (zeros past Skv).
  int64_t padded = (tiles + blockTiles - 1) / blockTiles * blockTiles;
  Value kp = alloc({B, Hkv, 2 * padded, D / 2, 2 * kAmxRows}, bf16),
        vp = alloc({B, Hkv, padded, kAmxRows, 2 * Dv}, bf16);
  forEachHead(
      "__attnc_flash_pairs", {k, v, kp, vp}, Hkv,
      [&](ArrayRef<Value> args, Value bi, Value g) {
        pairColumns(args[0], args[2], {bi, g}, bi, g, idx(0), 2 * padded);
        pairKeys(args[1], args[3], {bi, g}, bi, g, idx(0), padded);
      });
  return {kp, vp};
}

void FlashCommon::copyRows(Value q, Value bi, Value h, Value i0,
                           Value rowsBuf) {
  Type bf16 = b.getBF16Type();
  loop(0, rows, [&](Value r) {
    Value row =
        arith::MinUIOp::create(b, arith::AddIOp::create(b, i0, r), idx(Sq - 1));
    loop(idx(0), idx(D), kLanes, [&](Value c) {
      vector::StoreOp::create(
          b,
          vector::LoadOp::create(b, VectorType::get({kLanes}, bf16), q,
                                 ValueRange{bi, h, row, c}),
          rowsBuf, ValueRange{r, c});
    });
  });
}

void FlashCommon::amxScores(Value qRows, Value t, Value kp, Value bi, Value g,
                            Value tile, Value pBuf, int64_t keyTiles) {
  Type bf16 = b.getBF16Type();
  auto aType = amx::TileType::get({kAmxRows, 2 * kAmxRows}, bf16);
  auto cType = amx::TileType::get({kAmxRows, kAmxRows}, f32);
  // Up to 4 C tiles at a time (64 keys), in sub-steps over the step.
  for (int64_t first = 0; first < 2 * keyTiles; first += 4) {
    int64_t n = std::min<int64_t>(4, 2 * keyTiles - first);
    SmallVector<Value> c;
    for (int64_t w = 0; w < n; ++w)
      c.push_back(amx::TileZeroOp::create(b, cType));
    Value t16 = arith::AddIOp::create(b, arith::MulIOp::create(b, tile, idx(2)),
                                      idx(first));
    for (int64_t dc = 0; dc < D / 32; ++dc) {
      Value a = amx::TileLoadOp::create(b, aType, qRows,
                                        ValueRange{t, idx(0), idx(32 * dc)});
      for (int64_t w = 0; w < n; ++w) {
        Value bTile = amx::TileLoadOp::create(
            b, aType, kp,
            ValueRange{bi, g, arith::AddIOp::create(b, t16, idx(w)),
                       idx(16 * dc), idx(0)});
        c[w] = amx::TileMulFOp::create(b, cType, a, bTile, c[w]);
      }
    }
    for (int64_t w = 0; w < n; ++w)
      amx::TileStoreOp::create(b, pBuf,
                               ValueRange{idx(0), idx(16 * (first + w))}, c[w]);
  }
}

void FlashForward::amxUpdate(ArrayRef<Value> scratch, Value oBuf, Value vp,
                             Value bi, Value g, Value tile) {
  Value alphaBuf = scratch[4], pPairs = scratch[6], pv = scratch[7];
  auto aType = amx::TileType::get({kAmxRows, 2 * kAmxRows}, bf16);
  auto cType = amx::TileType::get({kAmxRows, kAmxRows}, f32);
  // P's tiles held in tile registers when they fit beside A and C (up
  // to 2), else loaded per column tile.
  bool hold = blockTiles <= 2;
  auto pTile = [&](int64_t t) {
    return amx::TileLoadOp::create(b, aType, pPairs,
                                   ValueRange{idx(0), idx(t * kCols)})
        .getResult();
  };
  SmallVector<Value> a;
  if (hold)
    for (int64_t t = 0; t < blockTiles; ++t)
      a.push_back(pTile(t));
  for (int64_t c = 0; c < Dv; c += kAmxRows) {
    Value prod = amx::TileZeroOp::create(b, cType);
    for (int64_t t = 0; t < blockTiles; ++t) {
      Value bTile = amx::TileLoadOp::create(
          b, aType, vp,
          ValueRange{bi, g, arith::AddIOp::create(b, tile, idx(t)), idx(0),
                     idx(2 * c)});
      prod = amx::TileMulFOp::create(b, cType, hold ? a[t] : pTile(t), bTile,
                                     prod);
    }
    amx::TileStoreOp::create(b, pv, ValueRange{idx(0), idx(c)}, prod);
  }
  loop(0, rows, [&](Value r) {
    Value alpha = splat(memref::LoadOp::create(b, alphaBuf, r));
    loop(idx(0), idx(Dv), kLanes, [&](Value c) {
      Value o = vector::LoadOp::create(b, vec, oBuf, ValueRange{r, c});
      Value x = vector::LoadOp::create(b, vec, pv, ValueRange{r, c});
      vector::StoreOp::create(b, vector::FMAOp::create(b, o, alpha, x), oBuf,
                              ValueRange{r, c});
    });
  });
}
} // namespace attnc
