// What float score captures add to the flash backward (see
// FlashBackward.h): Delta from recomputed P and dP where the output is
// narrow, per-task partial gradients summed in task order, and the
// score_mod's reverse sweep widened to 16 lanes.
#include "codegen/cpu/FlashBackward.h"

#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

Value FlashBackward::exactRowDeltas(Value qT, Value kt, Value vt, Value dOT,
                                    Value lse, Value dLse, Value lengths) {
  Value delta = alloc({B, H, Sq});
  SmallVector<Value> captured = {qT, kt, vt, dOT, lse, delta};
  if (lengths)
    captured.push_back(lengths);
  if (dLse)
    captured.push_back(dLse);
  appendCaptures(captured);
  size_t base = captureBase;
  int64_t qTiles = (Sq + rows - 1) / rows;
  parallelTasks(
      parent, "__attnc_flash_exact_deltas", captured, B * H * qTiles,
      [&](ArrayRef<Value>) {
        return SmallVector<Value>{scratchBuffer({rows, kCols}),
                                  scratchBuffer({rows, kCols}),
                                  scratchBuffer({rows, kLanes})};
      },
      [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
        bindMaskInputs(args);
        Value sBuf = scratch[0], dpBuf = scratch[1], sums = scratch[2];
        Value ib = arith::RemUIOp::create(b, t, idx(qTiles));
        Value bh = arith::DivUIOp::create(b, t, idx(qTiles));
        Value bi = arith::DivUIOp::create(b, bh, idx(H)),
              h = arith::RemUIOp::create(b, bh, idx(H));
        Value argLengths = lengths ? args[6] : Value();
        Value argDLse = dLse ? args[lengths ? 7 : 6] : Value();
        ArrayRef<Value> caps = args.slice(base, captures.size());
        QueryTile qt = queryTile(argLengths, bi, h, ib);
        loop(0, rows, [&](Value r) {
          vector::StoreOp::create(b, splat(f(0.0f)), sums,
                                  ValueRange{r, idx(0)});
        });
        loop(qt.keys.start, qt.keys.end, kCols, [&](Value j0) {
          Value tile = arith::DivUIOp::create(b, j0, idx(kCols));
          if (dot) {
            rowProducts(args[0], args[1], {bi, qt.g}, bi, h, qt.i0, tile, sBuf);
            rowProducts(args[3], args[2], {bi, qt.g}, bi, h, qt.i0, tile,
                        dpBuf);
          } else {
            storeTile(
                tileProduct(args[0], {bi, h, ib}, args[1], bi, qt.g, tile),
                sBuf);
            storeTile(
                tileProduct(args[3], {bi, h, ib}, args[2], bi, qt.g, tile),
                dpBuf);
          }
          Value whole = masks.isWhole(b, qt.limit, qt.i0, rows, j0, kCols,
                                      /*existsOnly=*/true);
          forRows(qt.i0, [&](Value r, Value i) {
            MaskTiles::RowRange range =
                masks.rowRange(b, qt.limit, i, /*existsOnly=*/true);
            SmallVector<Value> in =
                keyMaskUnlessWhole(whole, j0, range.lo, range.hi);
            Value l = rowLse(args[4], bi, h, range.row);
            Value acc =
                vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)});
            for (int64_t w = 0; w < 2; ++w) {
              SmallVector<Value, 2> at = {r, idx(w * kLanes)};
              Value sv = vector::LoadOp::create(b, vec, sBuf, at);
              Value dp = vector::LoadOp::create(b, vec, dpBuf, at);
              Scores sc = scoresOf(caps, sv, in[w], bi, h, range.row, j0, w,
                                   /*prescaled=*/!dot);
              acc = vector::FMAOp::create(b, recomputedP(sc, l), dp, acc);
            }
            vector::StoreOp::create(b, acc, sums, ValueRange{r, idx(0)});
          });
        });
        // The tile's rows that exist.
        Value end = arith::MinUIOp::create(
            b, arith::AddIOp::create(b, qt.i0, idx(rows)), idx(Sq));
        loop(qt.i0, end, 1, [&](Value i) {
          Value r = arith::SubIOp::create(b, i, qt.i0);
          Value sum = vector::ReductionOp::create(
              b, vector::CombiningKind::ADD,
              vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)}),
              Value(), arith::FastMathFlags::reassoc);
          if (argDLse)
            sum = arith::SubFOp::create(
                b, sum,
                memref::LoadOp::create(b, argDLse, ValueRange{bi, h, i}));
          memref::StoreOp::create(b, sum, args[5], ValueRange{bi, h, i});
        });
      });
  return delta;
}

} // namespace attnc
