// The CPU kernel of an attn.attention_stats_grad that no attention
// backward takes in (FlashBackward.cpp's entropyGradientOf: the LSE is an
// argument, or the attention is not differentiated): the entropy's
// gradients from P recomputed from the LSE a key block at a time, never an
// Sq x Skv buffer. With g_i the row's cotangent (the mean's shared among the
// rows that see a key), per visible (i, j):
//   dS'_ij = g_i P_ij (LSE_i - S'_ij - 1),
//   dLSE_i = g_i sum_j P_ij (1 + S'_ij - LSE_i)
// (the op's partial derivatives, for any LSE; 0 where P is), dS = dS'
// dscore_mod/dS, then two passes, each over what it owns (deterministic, no
// atomics), as attn.distill_grad's (FlashDistill.cpp):
//   per (batch, head, query tile) dQ = scale dS K and dLSE, and the float
//   score captures' partial gradients (a row per task, summed in task
//   order);
//   per (batch, KV head, key block) dK = scale dS^T Q over the query heads
//   of the KV head and the query tiles that see the block, dS recomputed.
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/ScoreModGradients.h"

#include "codegen/cpu/WidenRegion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

namespace {

class FlashStatsGrad : public ScoreModGradients {
public:
  FlashStatsGrad(ImplicitLocOpBuilder &b, attn::AttentionStatsGradOp op,
                 attn::CpuPlanAttr plan, int64_t vectorBits)
      : ScoreModGradients(b, op, plan.getRows(), vectorBits), op(op),
        blockTiles(plan.getKeyBlock() / kCols), width(plan.getKeyBlock()),
        qTiles((Sq + rows - 1) / rows) {}

  SmallVector<Value> build() {
    Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
          lse = bufferOf(op.getLse());
    Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
    Value g = entropyCotangents(
        lse, op.getEntropyGrad() ? bufferOf(op.getEntropyGrad()) : Value(),
        op.getMeanEntropyGrad() ? bufferOf(op.getMeanEntropyGrad()) : Value());
    // Every query tile of Q packed once, times the scale: the scores' A
    // operands, and dK = dS^T (scale Q).
    Value qT = alloc({B, H, qTiles, D, rows});
    forEachHead("__attnc_flash_stats_grad_pack", {q, qT}, H,
                [&](ArrayRef<Value> args, Value bi, Value h) {
                  packTiles(args[0], args[1], bi, h, scale);
                });
    Value dQ = alloc({B, H, Sq, D}, elementTypeOf(op.getQuery())),
          dK = alloc({B, Hkv, Skv, D}, elementTypeOf(op.getKey())),
          dLse = alloc({B, H, Sq});
    int64_t queryTasks = B * H * qTiles;
    SmallVector<Value> partials = zeroedPartials(queryTasks);
    // (qT, K^T, lse, g, K, dQ, dLSE, dK, lengths?, captures..., partials...)
    SmallVector<Value> captured = {qT, transposed(k), lse, g, k, dQ, dLse, dK};
    if (lengths)
      captured.push_back(lengths);
    appendCaptures(captured);
    partialBase = captured.size();
    captured.append(partials);
    auto scratch = [&](ArrayRef<Value>) {
      // The block's scores and dS, a query tile's dQ rows and its dLSE
      // sums, a key block's dK^T.
      return SmallVector<Value>{
          scratchBuffer({blockTiles, rows, kCols}),
          scratchBuffer({blockTiles, rows, kCols}), scratchBuffer({rows, D}),
          scratchBuffer({rows, kLanes}), scratchBuffer({blockTiles, D, kCols})};
    };
    parallelTasks(
        parent, "__attnc_flash_stats_grad_dq", captured, queryTasks, scratch,
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value tile = arith::RemUIOp::create(b, t, idx(qTiles));
          Value bh = arith::DivUIOp::create(b, t, idx(qTiles));
          queryTask(args, scratch, arith::DivUIOp::create(b, bh, idx(H)),
                    arith::RemUIOp::create(b, bh, idx(H)), tile, t);
        });
    int64_t keyBlocks = (Skv + width - 1) / width;
    parallelTasks(
        parent, "__attnc_flash_stats_grad_dk", captured, B * Hkv * keyBlocks,
        scratch, [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value block = arith::RemUIOp::create(b, t, idx(keyBlocks));
          Value bg = arith::DivUIOp::create(b, t, idx(keyBlocks));
          keyTask(args, scratch, arith::DivUIOp::create(b, bg, idx(Hkv)),
                  arith::RemUIOp::create(b, bg, idx(Hkv)), block);
        });
    SmallVector<Value> results = {tensorOf(dQ, op.getQueryGrad().getType()),
                                  tensorOf(dK, op.getKeyGrad().getType()),
                                  tensorOf(dLse, op.getLseGrad().getType())};
    llvm::append_range(
        results, captureGrads(partials, op.getScoreCapturesGrad().getTypes()));
    return results;
  }

private:
  // Task arguments (the order of `captured` above).
  enum Arg : unsigned { kQT, kKt, kLse, kG, kK, kDQ, kDLse, kDK, kLengths };
  Value limitOf(ArrayRef<Value> args, Value bi) {
    return masks.keyLimit(b, captureBase > kLengths ? args[kLengths] : Value(),
                          bi);
  }

  /// dS of the query tile from i0 (head h) over the key block from j0 into
  /// scratch[1] ([blockTiles, rows, 32], 0 where P is); with `task`, the
  /// float captures' adjoints into its partials and sum_j P (1 + S' - LSE)
  /// into the rows' 16-lane sums (scratch[3]).
  void blockGradients(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                      Value h, Value i0, Value j0, Value keysEnd, Value limit,
                      Value task) {
    Value sBuf = scratch[0], dsBuf = scratch[1], sums = scratch[3];
    Value kvHead = arith::DivUIOp::create(b, h, idx(H / Hkv));
    Value tile = arith::DivUIOp::create(b, i0, idx(rows)),
          tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
    // The block's scores, tile by tile; tiles from keysEnd on are left as
    // they are (the masks drop their lanes).
    loop(0, blockTiles, [&](Value t) {
      Value col = arith::MulIOp::create(b, t, idx(kCols));
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                   arith::AddIOp::create(b, j0, col), keysEnd),
             [&] {
               storeTile(tileProduct(args[kQT], {bi, h, tile}, args[kKt], bi,
                                     kvHead,
                                     arith::AddIOp::create(b, tile0, t)),
                         view(sBuf, {t}));
             });
    });
    ArrayRef<Value> caps = args.slice(captureBase, captures.size());
    ArrayRef<Value> partials =
        task ? args.slice(partialBase, floatCaptures.size())
             : ArrayRef<Value>();
    Value whole =
        masks.isWhole(b, limit, i0, rows, j0, width, /*existsOnly=*/true);
    Value zeros = splat(f(0.0f)), ones = splat(f(1.0f));
    forRows(i0, [&](Value r, Value i) {
      MaskTiles::RowRange range =
          masks.rowRange(b, limit, i, /*existsOnly=*/true);
      SmallVector<Value> in =
          keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
      Value l = rowLse(args[kLse], bi, h, range.row);
      Value g = splat(
          memref::LoadOp::create(b, args[kG], ValueRange{bi, h, range.row}));
      Value sum =
          task ? vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)})
               : Value();
      for (int64_t w = 0; w < width / kLanes; ++w) {
        SmallVector<Value> at = {idx(w / 2), r, idx(w % 2 * kLanes)};
        Scores sc =
            scoresOf(caps, vector::LoadOp::create(b, vec, sBuf, at), in[w], bi,
                     h, range.row, j0, w, /*prescaled=*/true);
        Value p = recomputedP(sc, l);
        // Where P is 0 (masked lanes, rows that see no key) the terms are
        // too: never 0 times inf.
        Value take =
            arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, p, zeros);
        Value centered = arith::SubFOp::create(b, l, sc.modified);
        Value dsModified = arith::SelectOp::create(
            b, take,
            arith::MulFOp::create(b, arith::MulFOp::create(b, g, p),
                                  arith::SubFOp::create(b, centered, ones)),
            zeros);
        vector::StoreOp::create(
            b,
            scoreGrad(sc, caps, bi, h, range.row, dsModified, partials, task),
            dsBuf, at);
        if (task)
          sum = arith::AddFOp::create(
              b, sum,
              arith::SelectOp::create(
                  b, take,
                  arith::MulFOp::create(
                      b, p, arith::SubFOp::create(b, ones, centered)),
                  zeros));
      }
      if (task)
        vector::StoreOp::create(b, sum, sums, ValueRange{r, idx(0)});
    });
  }

  /// dQ and dLSE of a query tile: its dS blocks times K.
  void queryTask(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                 Value h, Value tile, Value task) {
    Value dqRows = scratch[2], sums = scratch[3];
    Value i0 = arith::MulIOp::create(b, tile, idx(rows));
    Value kvHead = arith::DivUIOp::create(b, h, idx(H / Hkv));
    // (The scores' tiles a block leaves as they are hold an earlier
    // block's, or these zeros: never NaN from uninitialized memory.)
    zero(scratch[0]);
    zero(dqRows);
    zero(sums);
    Value limit = limitOf(args, bi);
    MaskTiles::KeyRange keys = masks.keysSeenBy(b, limit, i0, rows, width);
    loop(keys.start, keys.end, width, [&](Value j0) {
      blockGradients(args, scratch, bi, h, i0, j0, keys.end, limit, task);
      // The block's keys some row sees (dS is 0 past them; K's rows there
      // are never read).
      Value valid = arith::MinUIOp::create(
          b, idx(width), arith::SubIOp::create(b, keys.end, j0));
      rowsTimesKeys(dqRows, scratch[1], args[kK], bi, kvHead, j0, valid,
                    Value());
    });
    forRows(i0, [&](Value r, Value i) {
      ifThen(
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)), [&] {
            loop(idx(0), idx(D), kLanes, [&](Value c) {
              storeVector(
                  arith::MulFOp::create(
                      b,
                      vector::LoadOp::create(b, vec, dqRows, ValueRange{r, c}),
                      splat(f(scale))),
                  args[kDQ], ValueRange{bi, h, i, c});
            });
            Value sum = vector::ReductionOp::create(
                b, vector::CombiningKind::ADD,
                vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)}),
                Value(), arith::FastMathFlags::reassoc);
            memref::StoreOp::create(
                b,
                arith::MulFOp::create(
                    b,
                    memref::LoadOp::create(b, args[kG], ValueRange{bi, h, i}),
                    sum),
                args[kDLse], ValueRange{bi, h, i});
          });
    });
  }

  /// dK of a key block (KV head g): over the query heads of g and the query
  /// tiles that see the block, the dS blocks recomputed, dK^T += (scale
  /// Q)^T dS per key tile, then stored transposed back.
  void keyTask(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi, Value g,
               Value block) {
    Value dkT = scratch[4];
    Value j0 = arith::MulIOp::create(b, block, idx(width));
    zero(scratch[0]);
    zero(dkT);
    Value limit = limitOf(args, bi);
    Value keysEnd = masks.seenKeysEnd(b, limit, j0);
    forQueryTilesSeeing(
        limit, j0, width, qTiles, g, H / Hkv, [&](Value h, Value i0) {
          blockGradients(args, scratch, bi, h, i0, j0, keysEnd, limit, Value());
          Value tile = arith::DivUIOp::create(b, i0, idx(rows));
          loop(0, blockTiles, [&](Value t) {
            accumulateTransposed(dkT, scratch[1], args[kQT], {bi, h}, tile,
                                 idx(1), t, idx(0));
          });
        });
    storeTransposedKeys(dkT, args[kDK], bi, g, j0);
  }

  attn::AttentionStatsGradOp op;
  int64_t blockTiles, width, qTiles;
  size_t partialBase = 0; // where the float captures' partials are in args
};

} // namespace

bool canLowerToFlashCpu(attn::AttentionStatsGradOp op, attn::CpuPlanAttr plan) {
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
  int64_t rows = plan.getRows();
  // dQ's products take whole 16-lane vectors of Q's rows.
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod()) && q[3] % kLanes == 0 &&
         ScoreModGradients::partialsFit(
             op.getScoreMod(), op.getScoreCaptures(), op.getScoreCapturesGrad(),
             q[0] * q[1] * ((q[2] + rows - 1) / rows),
             q[0] * q[1] * q[2] * k[2]);
}

FailureOr<SmallVector<Value>>
lowerToFlashStatsGrad(RewriterBase &rewriter, attn::AttentionStatsGradOp op,
                      attn::CpuPlanAttr plan, int64_t vectorBits) {
  if (!canLowerToFlashCpu(op, plan))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  return replaceWithKernel<FlashStatsGrad>(rewriter, op, plan, vectorBits);
}

} // namespace attnc
