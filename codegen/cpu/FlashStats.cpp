// The CPU kernel of attn.attention_stats (see FlashStats.h).
#include "codegen/cpu/FlashStats.h"
#include "codegen/cpu/FlashAttention.h"

#include "codegen/cpu/WidenRegion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

namespace {
/// Query tiles per task when no pooled grid fixes the row cells.
constexpr int64_t kTilesPerChunk = 8;
} // namespace

FlashStats::FlashStats(ImplicitLocOpBuilder &b, attn::AttentionStatsOp op,
                       attn::CpuPlanAttr plan, int64_t vectorBits)
    : FlashCommon(b, op, plan.getRows(), vectorBits), op(op),
      entropy(bool(op.getEntropy())), meanEntropy(bool(op.getMeanEntropy())),
      similarity(bool(op.getSimilarity())),
      blockTiles(plan.getKeyBlock() / kCols), width(plan.getKeyBlock()),
      amx(plan.getAmx()) {
  if (Value pooled = op.getPooled()) {
    gq = shapeOf(pooled)[2];
    gk = shapeOf(pooled)[3];
  }
  cells = gq ? gq : (Sq + kTilesPerChunk * rows - 1) / (kTilesPerChunk * rows);
}

SmallVector<Value> FlashStats::build() {
  Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
        lse = bufferOf(op.getLse());
  Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
  // Every buffer is passed (an unasked statistic's is small and unused),
  // so that the arguments keep their places.
  Value entropyBuf = alloc({B, H, Sq}),
        pooled =
            alloc({B, H, std::max<int64_t>(gq, 1), std::max<int64_t>(gk, 1)}),
        simParts = alloc({B, cells, H, similarity ? H : 1});
  // K^T in key tiles, or on AMX K in bf16 pairs (whole key blocks).
  Value keys;
  if (!amx) {
    keys = transposed(k);
  } else {
    int64_t padded = (tiles + blockTiles - 1) / blockTiles * blockTiles;
    keys = alloc({B, Hkv, 2 * padded, D / 2, 2 * kAmxRows}, b.getBF16Type());
    forEachHead(
        "__attnc_flash_stats_pairs", {k, keys}, Hkv,
        [&](ArrayRef<Value> args, Value bi, Value g) {
          pairColumns(args[0], args[1], {bi, g}, bi, g, idx(0), 2 * padded);
        });
  }
  SmallVector<Value> captured = {q, keys, lse, entropyBuf, pooled, simParts};
  if (lengths)
    captured.push_back(lengths);
  appendCaptures(captured);
  parallelTasks(
      parent, "__attnc_flash_stats", captured, B * cells,
      [&](ArrayRef<Value>) {
        // Per head: Q's packed rows (times the scale), the entropy's
        // 16-lane sums per row, the column sums of p; the block's scores;
        // with similarity every head's p of the block.
        return SmallVector<Value>{
            amx ? scratchBuffer({H, rows, D}, b.getBF16Type())
                : scratchBuffer({H, D, rows}),
            scratchBuffer({H, rows, kLanes}), scratchBuffer({H, width}),
            scratchBuffer({rows, width}),
            scratchBuffer({similarity ? H : 1, rows, width})};
      },
      [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
        task(args, scratch, arith::DivUIOp::create(b, t, idx(cells)),
             arith::RemUIOp::create(b, t, idx(cells)));
      });
  SmallVector<Value> results;
  if (entropy)
    results.push_back(tensorOf(entropyBuf, op.getEntropy().getType()));
  if (meanEntropy)
    results.push_back(
        tensorOf(meanOfSeenRows(entropyBuf, lse, /*perHead=*/true),
                 op.getMeanEntropy().getType()));
  if (gq)
    results.push_back(tensorOf(pooled, op.getPooled().getType()));
  if (similarity)
    results.push_back(
        tensorOf(similarityOf(simParts), op.getSimilarity().getType()));
  return results;
}

void FlashStats::task(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                      Value cell) {
  Value q = args[kQ], entropyBuf = args[kEntropy], pooled = args[kPooled],
        simParts = args[kSimParts];
  Value lengths = captureBase > kLengths ? args[kLengths] : Value();
  Value qPacked = scratch[0], sums = scratch[1];
  Value rowStart = cellStart(cell, Sq, cells),
        rowEnd = cellStart(arith::AddIOp::create(b, cell, idx(1)), Sq, cells);
  // The task's partials start at zero.
  loop(0, H, [&](Value h) {
    loop(0, shapeOf(simParts)[3], [&](Value g) {
      memref::StoreOp::create(b, f(0.0f), simParts, ValueRange{bi, cell, h, g});
    });
    if (gq)
      loop(0, gk, [&](Value c) {
        memref::StoreOp::create(b, f(0.0f), pooled, ValueRange{bi, h, cell, c});
      });
  });
  Value limit = masks.keyLimit(b, lengths, bi);
  loop(rowStart, rowEnd, rows, [&](Value i0) {
    loop(0, H, [&](Value h) {
      if (amx)
        copyRows(q, bi, h, i0, view(qPacked, h));
      else
        packRows(q, bi, h, i0, Sq - 1, view(qPacked, h), scale);
      loop(0, rows, [&](Value r) {
        vector::StoreOp::create(b, splat(f(0.0f)), sums,
                                ValueRange{h, r, idx(0)});
      });
    });
    MaskTiles::KeyRange keys = masks.keysSeenBy(b, limit, i0, rows, width);
    loop(keys.start, keys.end, width, [&](Value j0) {
      keyBlock(args, scratch, bi, cell, i0, rowEnd, limit, keys, j0);
    });
    if (!entropy && !meanEntropy)
      return;
    // The rows' entropies.
    loop(0, H, [&](Value h) {
      forRows(i0, [&](Value r, Value i) {
        auto ifOp = scf::IfOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, rowEnd),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value e = vector::ReductionOp::create(
            b, vector::CombiningKind::ADD,
            vector::LoadOp::create(b, vec, sums, ValueRange{h, r, idx(0)}),
            Value(), arith::FastMathFlags::reassoc);
        memref::StoreOp::create(b, e, entropyBuf, ValueRange{bi, h, i});
      });
    });
  });
  if (!gq)
    return;
  loop(0, H, [&](Value h) { toCellMeans(pooled, bi, h, cell, gq, gk); });
}

void FlashStats::keyBlock(ArrayRef<Value> args, ArrayRef<Value> scratch,
                          Value bi, Value cell, Value i0, Value rowEnd,
                          Value limit, const MaskTiles::KeyRange &keys,
                          Value j0) {
  Value kt = args[kKt], lse = args[kLse], pooled = args[kPooled],
        simParts = args[kSimParts];
  Value qPacked = scratch[0], sums = scratch[1], colSums = scratch[2],
        sBuf = scratch[3], probs = scratch[4];
  int64_t n = width / kLanes;
  Value tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
  Value whole = masks.isWhole(b, limit, i0, rows, j0, width,
                              /*existsOnly=*/false);
  Value zeros = splat(f(0.0f));
  loop(0, H, [&](Value h) {
    Value g = arith::DivUIOp::create(b, h, idx(H / Hkv));
    // The block's scores (on AMX unscaled), tile by tile; tiles past the
    // keys some row sees are left as they are: the masks drop their lanes.
    if (amx)
      amxScores(qPacked, h, kt, bi, g, tile0, sBuf, blockTiles);
    else
      loop(0, blockTiles, [&](Value t) {
        Value col = arith::MulIOp::create(b, t, idx(kCols));
        auto ifOp = scf::IfOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                  arith::AddIOp::create(b, j0, col), keys.end),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        storeTile(tileProduct(qPacked, {h}, kt, bi, g,
                              arith::AddIOp::create(b, tile0, t)),
                  sBuf, col);
      });
    if (gq)
      loop(idx(0), idx(width), kLanes, [&](Value c) {
        vector::StoreOp::create(b, zeros, colSums, ValueRange{h, c});
      });
    forRows(i0, [&](Value r, Value i) {
      MaskTiles::RowRange range =
          masks.rowRange(b, limit, i, /*existsOnly=*/false);
      SmallVector<Value> in =
          keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
      // Rows past the cell's (the next cell's, or copies of the last row)
      // count nowhere.
      Value rowInCell =
          splat(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, rowEnd));
      Value l = memref::LoadOp::create(b, lse, ValueRange{bi, h, range.row});
      // A row that sees no key (LSE = -inf) subtracts +inf: p = 0.
      Value lSafe = arith::SelectOp::create(
          b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, l, f(kNegInf)),
          f(-kNegInf), l);
      Value sum =
          vector::LoadOp::create(b, vec, sums, ValueRange{h, r, idx(0)});
      for (int64_t w = 0; w < n; ++w) {
        Value x = vector::LoadOp::create(b, vec, sBuf,
                                         ValueRange{r, idx(w * kLanes)});
        Scores sc = scoresOf(args.slice(captureBase, captures.size()), x, in[w],
                             bi, h, range.row, j0, w, /*prescaled=*/!amx);
        Value keep = arith::AndIOp::create(b, sc.keep, rowInCell);
        Value p = arith::SelectOp::create(
            b, keep,
            expVector(arith::SubFOp::create(b, sc.modified, splat(lSafe))),
            zeros);
        if (entropy || meanEntropy) {
          // p (LSE - S') where p != 0 (or is NaN): never 0 * inf.
          Value term = arith::MulFOp::create(
              b, p, arith::SubFOp::create(b, splat(l), sc.modified));
          Value take =
              arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, p, zeros);
          sum = arith::AddFOp::create(
              b, sum, arith::SelectOp::create(b, take, term, zeros));
        }
        if (gq) {
          SmallVector<Value> at{h, idx(w * kLanes)};
          vector::StoreOp::create(
              b,
              arith::AddFOp::create(
                  b, vector::LoadOp::create(b, vec, colSums, at), p),
              colSums, at);
        }
        if (similarity)
          vector::StoreOp::create(b, p, probs,
                                  ValueRange{h, r, idx(w * kLanes)});
      }
      vector::StoreOp::create(b, sum, sums, ValueRange{h, r, idx(0)});
    });
    if (gq)
      addColumnSums(pooled, colSums, bi, h, cell, j0);
  });
  if (!similarity)
    return;
  // sum_{r, j} p_h p_g for g <= h, into the task's partial (both halves).
  loop(0, H, [&](Value h) {
    loop(idx(0), arith::AddIOp::create(b, h, idx(1)), 1, [&](Value g) {
      Value acc = zeros;
      auto rowLoop =
          scf::ForOp::create(b, idx(0), idx(rows), idx(1), ValueRange{acc});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(rowLoop.getBody());
        Value r = rowLoop.getInductionVar();
        Value a = rowLoop.getRegionIterArgs()[0];
        for (int64_t w = 0; w < n; ++w) {
          Value x = vector::LoadOp::create(b, vec, probs,
                                           ValueRange{h, r, idx(w * kLanes)});
          Value y = vector::LoadOp::create(b, vec, probs,
                                           ValueRange{g, r, idx(w * kLanes)});
          a = vector::FMAOp::create(b, x, y, a);
        }
        scf::YieldOp::create(b, a);
      }
      Value dot = vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                              rowLoop.getResult(0), Value(),
                                              arith::FastMathFlags::reassoc);
      addToPair(simParts, {bi, cell}, h, g, dot);
    });
  });
}

void FlashStats::addColumnSums(Value pooled, Value colSums, Value bi, Value h,
                               Value cell, Value j0) {
  for (int64_t w = 0; w < width / kLanes; ++w)
    addToKeyCells(
        vector::LoadOp::create(b, vec, colSums, ValueRange{h, idx(w * kLanes)}),
        j0, w, gk, pooled, {bi, h, cell});
}

bool canLowerToFlashCpu(attn::AttentionStatsOp op) {
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod());
}

FailureOr<SmallVector<Value>> lowerToFlashStats(RewriterBase &rewriter,
                                                attn::AttentionStatsOp op,
                                                attn::CpuPlanAttr plan,
                                                int64_t vectorBits) {
  if (!canLowerToFlashCpu(op))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  if (plan.getAmx())
    FlashCommon::markUsesAmx(op);
  return replaceWithKernel<FlashStats>(rewriter, op, plan, vectorBits);
}

} // namespace attnc
