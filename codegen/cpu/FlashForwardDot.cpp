// The forward's products as AVX-512 BF16 dot products (DotProducts.cpp), for
// CPUs that have them and no AMX (AMD Zen 4 and 5): the AMX path's bf16
// pairs (K with (d, d + 1) side by side, V with (j, j + 1), Q's rows and P
// in bf16).
#include "codegen/cpu/FlashForward.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

void FlashForward::dotScores(Value qRows, Value t, Value kp, Value bi, Value g,
                             Value tile, Value end, Value pBuf,
                             function_ref<void(Value)> perTile) {
  loop(0, blockTiles, [&](Value kt) {
    if (perTile)
      perTile(kt);
    Value tile32 = arith::AddIOp::create(b, tile, kt);
    auto ifOp = scf::IfOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                              arith::MulIOp::create(b, tile32, idx(kCols)),
                              end),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    // The tile's two 16-key halves, rows x 2 accumulators.
    SmallVector<Value> acc = dotRowsTimesColumnPairs(
        qRows,
        [&](int64_t r) {
          return SmallVector<Value>{t, idx(r)};
        },
        kp, {bi, g}, tile32);
    Value col = arith::MulIOp::create(b, kt, idx(kCols));
    for (int64_t r = 0; r < rows; ++r) {
      vector::StoreOp::create(b, acc[2 * r], pBuf, ValueRange{idx(r), col});
      vector::StoreOp::create(
          b, acc[2 * r + 1], pBuf,
          ValueRange{idx(r), arith::AddIOp::create(b, col, idx(kLanes))});
    }
  });
}

void FlashForward::dotUpdate(ArrayRef<Value> scratch, Value oBuf, Value vp,
                             Value bi, Value g, Value tile, Value end) {
  Value alphaBuf = scratch[4], pPairs = scratch[6];
  auto pairs = VectorType::get({2 * kLanes}, bf16);
  // The 32-key tiles some row sees (P is 0 past them).
  Value keys =
      arith::SubIOp::create(b, end, arith::MulIOp::create(b, tile, idx(kCols)));
  Value used = arith::MinUIOp::create(
      b, idx(blockTiles),
      arith::DivUIOp::create(b, arith::AddIOp::create(b, keys, idx(kCols - 1)),
                             idx(kCols)));
  // Columns 32 at a time (16 for an odd last vector): rows x 2
  // accumulators, O rescaled by alpha first.
  for (int64_t c0 = 0; c0 < Dv; c0 += 2 * kLanes) {
    int64_t vectors = std::min<int64_t>(2, (Dv - c0) / kLanes);
    SmallVector<Value> init;
    for (int64_t r = 0; r < rows; ++r) {
      Value alpha = splat(memref::LoadOp::create(b, alphaBuf, idx(r)));
      for (int64_t v = 0; v < vectors; ++v)
        init.push_back(arith::MulFOp::create(
            b,
            vector::LoadOp::create(b, vec, oBuf,
                                   ValueRange{idx(r), idx(c0 + v * kLanes)}),
            alpha));
    }
    SmallVector<Value> acc = dotOverKeyTiles(
        used, init, vectors,
        [&](Value kt, Value jp, int64_t r) {
          Value j =
              arith::AddIOp::create(b, arith::MulIOp::create(b, kt, idx(kCols)),
                                    arith::MulIOp::create(b, jp, idx(2)));
          return broadcastPair(pPairs, {idx(r), j});
        },
        [&](Value kt, Value jp, int64_t w) {
          return vector::LoadOp::create(
              b, pairs, vp,
              ValueRange{bi, g, arith::AddIOp::create(b, tile, kt), jp,
                         idx(2 * (c0 + w * kLanes))});
        });
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vectors; ++v)
        vector::StoreOp::create(b, acc[r * vectors + v], oBuf,
                                ValueRange{idx(r), idx(c0 + v * kLanes)});
  }
}

} // namespace attnc
