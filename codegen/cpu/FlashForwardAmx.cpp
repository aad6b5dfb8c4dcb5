// The products on AMX tiles: 16 x 16 f32 tiles of bf16 operands with pairs
// of the reduction dimension side by side (tdpbf16ps's VNNI layout); the
// softmax stays on AVX-512. Q K^T for the forward and the statistics kernel
// (FlashCommon), and the forward's pairing of V and P V (FlashForward).
#include "codegen/cpu/FlashForward.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
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

std::pair<Value, Value> FlashForward::pairedKeysAndValues(Value k, Value v,
                                                          Value lengths) {
  // Whole steps of blockTiles tiles (zeros past Skv, and V's past a
  // batch's length).
  int64_t padded = (tiles + blockTiles - 1) / blockTiles * blockTiles;
  Value kp = alloc({B, Hkv, 2 * padded, D / 2, 2 * kAmxRows}, bf16),
        vp = alloc({B, Hkv, padded, kAmxRows, 2 * Dv}, bf16);
  SmallVector<Value> captured = {k, v, kp, vp};
  if (lengths)
    captured.push_back(lengths);
  forEachHead(
      "__attnc_flash_pairs", captured, Hkv,
      [&](ArrayRef<Value> args, Value bi, Value g) {
        pairColumns(args[0], args[2], {bi, g}, bi, g, idx(0), 2 * padded);
        pairKeys(KeySource(args[1], {},
                           lengths ? masks.keyLimit(b, args[4], bi) : Value()),
                 args[3], {bi, g}, bi, g, idx(0), padded);
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

void FlashCommon::amxProducts(
    Value a, TileAt aAt, Value bm, TileAt bAt, Value c,
    function_ref<SmallVector<Value>(int64_t, int64_t)> cAt, int64_t mTiles,
    int64_t nTiles, Value k0, Value k1, bool accumulate) {
  assert(mTiles * nTiles + mTiles + 1 <= 8 && "AMX has 8 tile registers");
  Type bf16 = b.getBF16Type();
  auto aType = amx::TileType::get({kAmxRows, 2 * kAmxRows}, bf16);
  auto cType = amx::TileType::get({kAmxRows, kAmxRows}, f32);
  SmallVector<Value> init;
  for (int64_t m = 0; m < mTiles; ++m)
    for (int64_t n = 0; n < nTiles; ++n)
      init.push_back(
          accumulate
              ? amx::TileLoadOp::create(b, cType, c, cAt(m, n)).getResult()
              : amx::TileZeroOp::create(b, cType).getResult());
  auto step = [&](Value k, ValueRange acc) {
    SmallVector<Value> aTiles, out(acc);
    for (int64_t m = 0; m < mTiles; ++m)
      aTiles.push_back(amx::TileLoadOp::create(b, aType, a, aAt(k, m)));
    for (int64_t n = 0; n < nTiles; ++n) {
      Value bTile = amx::TileLoadOp::create(b, aType, bm, bAt(k, n));
      for (int64_t m = 0; m < mTiles; ++m)
        out[m * nTiles + n] = amx::TileMulFOp::create(
            b, cType, aTiles[m], bTile, out[m * nTiles + n]);
    }
    return out;
  };
  std::optional<int64_t> first = getConstantIntValue(k0),
                         last = getConstantIntValue(k1);
  SmallVector<Value> sums;
  if (first && last && *last - *first <= 8) {
    sums = init;
    for (int64_t k = *first; k < *last; ++k)
      sums = step(idx(k), sums);
  } else {
    auto kLoop =
        scf::ForOp::create(b, k0, k1, idx(1), init,
                           [&](OpBuilder &, Location, Value k, ValueRange acc) {
                             scf::YieldOp::create(b, step(k, acc));
                           });
    sums = kLoop.getResults();
  }
  for (int64_t m = 0; m < mTiles; ++m)
    for (int64_t n = 0; n < nTiles; ++n)
      amx::TileStoreOp::create(b, c, cAt(m, n), sums[m * nTiles + n]);
}

void FlashCommon::amxScores(Value qRows, Value t, Value kp, Value bi, Value g,
                            Value tile, Value pBuf, int64_t keyTiles) {
  for (int64_t first = 0; first < 2 * keyTiles; first += amxTilesPerPass())
    amxScoreGroup(qRows, t, kp, bi, g, tile, pBuf, idx(first),
                  std::min(amxTilesPerPass(), 2 * keyTiles - first));
}

void FlashCommon::amxScoreGroup(Value qRows, Value t, Value kp, Value bi,
                                Value g, Value tile, Value pBuf, Value first,
                                int64_t keyTiles) {
  // Each K tile loaded once for the tiles of rows, which share it.
  Value t16 = arith::MulIOp::create(b, tile, idx(2));
  Value at = arith::AddIOp::create(b, t16, first);
  Value col = arith::MulIOp::create(b, first, idx(kAmxRows));
  amxProducts(
      qRows,
      [&](Value k, int64_t m) {
        return SmallVector<Value>{t, idx(kAmxRows * m),
                                  arith::MulIOp::create(b, k, idx(32))};
      },
      kp,
      [&](Value k, int64_t n) {
        return SmallVector<Value>{bi, g, arith::AddIOp::create(b, at, idx(n)),
                                  arith::MulIOp::create(b, k, idx(16)), idx(0)};
      },
      pBuf,
      [&](int64_t m, int64_t n) {
        return SmallVector<Value>{idx(kAmxRows * m),
                                  arith::AddIOp::create(b, col, idx(16 * n))};
      },
      rows / kAmxRows, keyTiles, idx(0), idx(D / 32),
      /*accumulate=*/false);
}

void FlashForward::amxUpdate(ArrayRef<Value> scratch, Value oBuf, Value vp,
                             Value bi, Value g, Value tile) {
  Value alphaBuf = scratch[4], pPairs = scratch[6], pv = scratch[7];
  // As many column tiles at a time as the tile registers hold, each P tile
  // loaded once for them: independent chains of tdpbf16ps. One column tile
  // after another (P's tiles reloaded per column tile, or held when 2 fit)
  // made each a dependent chain of blockTiles products.
  int64_t perPass = amxTilesPerPass();
  auto products = [&](Value c, bool accumulate) {
    for (int64_t c0 = 0; c0 < Dv; c0 += perPass * kAmxRows)
      amxProducts(
          pPairs,
          [&](Value k, int64_t m) {
            return SmallVector<Value>{idx(kAmxRows * m),
                                      arith::MulIOp::create(b, k, idx(kCols))};
          },
          vp,
          [&](Value k, int64_t n) {
            return SmallVector<Value>{bi, g, arith::AddIOp::create(b, tile, k),
                                      idx(0), idx(2 * (c0 + kAmxRows * n))};
          },
          c,
          [&](int64_t m, int64_t n) {
            return SmallVector<Value>{idx(kAmxRows * m),
                                      idx(c0 + kAmxRows * n)};
          },
          rows / kAmxRows, std::min<int64_t>(perPass, (Dv - c0) / kAmxRows),
          idx(0), idx(blockTiles), accumulate);
  };
  if (!lazyMax)
    return rescaledUpdate(products, oBuf, pv, alphaBuf);
  // With lazyMax most steps move no row's max (every alpha is 1): P V then
  // accumulates into O's own tiles, with no pass over O on the vector units.
  Value allOnes;
  for (int64_t r = 0; r < rows; r += kLanes) {
    Value same = arith::CmpFOp::create(
        b, arith::CmpFPredicate::OEQ,
        vector::LoadOp::create(b, vec, alphaBuf, ValueRange{idx(r)}),
        splat(f(1.0f)));
    Value all =
        vector::ReductionOp::create(b, vector::CombiningKind::AND, same);
    allOnes = allOnes ? arith::AndIOp::create(b, allOnes, all) : all;
  }
  auto ifOp = scf::IfOp::create(b, allOnes, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  products(oBuf, /*accumulate=*/true);
  b.setInsertionPointToStart(ifOp.elseBlock());
  rescaledUpdate(products, oBuf, pv, alphaBuf);
}

void FlashForward::rescaledUpdate(function_ref<void(Value, bool)> products,
                                  Value oBuf, Value pv, Value alphaBuf) {
  products(pv, /*accumulate=*/false);
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
