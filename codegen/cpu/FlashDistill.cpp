// The CPU kernels of attn.distill and attn.distill_grad: the KL(P_t || P_s)
// of each query row, and its gradients, from the student's and the
// teacher's score tiles and both LSEs, a key block at a time, never an
// Sq x Skv buffer. Per row and key:
//   P_t = exp(S_t - LSE_t), r = (S_t - LSE_t) - (S_s - LSE_s),
//   KL_i += P_t r, and with the row's cotangent g_i:
//   dS_s = -g P_t, dS_t = g P_t (r + 1), dLSE_s = g sum_j P_t,
//   dLSE_t = -g sum_j P_t (r + 1)
// (where P_t != 0: a masked key adds nothing). The forward has one task per
// (batch, head, query tile). The gradient has two passes, each over what it
// owns (deterministic, no atomics): per (batch, head, query tile) dQ_s,
// dQ_t and both dLSE, the dS tiles times K; per (batch, KV head, key
// block) dK, the same dS tiles recomputed, times Q (both sides in one pass
// when they have as many KV heads, else one pass a side).
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/FlashCommon.h"

#include "codegen/cpu/WidenRegion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

namespace {

/// What attn.distill's two kernels share: both sides' shapes and scales, the
/// score blocks of a query tile, and the per-key terms.
class DistillKernel : public FlashCommon {
public:
  template <typename OpTy>
  DistillKernel(ImplicitLocOpBuilder &b, OpTy op, attn::CpuPlanAttr plan,
                int64_t vectorBits)
      : FlashCommon(b, op, plan.getRows(), vectorBits),
        teacherScale(float(op.getEffectiveTeacherScale())),
        blockTiles(plan.getKeyBlock() / kCols), width(plan.getKeyBlock()),
        qTiles((Sq + rows - 1) / rows), mean(op.isMean()) {
    teacherD = shapeOf(op.getTeacherQuery())[3];
    teacherHkv = shapeOf(op.getTeacherKey())[1];
  }

protected:
  /// The KV heads of query head h: the student's and the teacher's.
  std::pair<Value, Value> kvHeads(Value h) {
    return {arith::DivUIOp::create(b, h, idx(H / Hkv)),
            arith::DivUIOp::create(b, h, idx(H / teacherHkv))};
  }

  /// Both sides' scores of the query tile (packed Q rows times the scale,
  /// `qs`/`qt` at `prefix`) over the key block from j0, into [blockTiles,
  /// rows, 32] buffers; tiles from keysEnd on are left as they are (the
  /// masks drop their lanes).
  void scoreBlocks(Value qs, Value qt, ValueRange prefix, Value kts, Value ktt,
                   Value bi, Value h, Value j0, Value keysEnd, Value sBufS,
                   Value sBufT) {
    Value gs, gt;
    std::tie(gs, gt) = kvHeads(h);
    Value tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
    loop(0, blockTiles, [&](Value t) {
      Value col = arith::MulIOp::create(b, t, idx(kCols));
      auto ifOp = scf::IfOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                arith::AddIOp::create(b, j0, col), keysEnd),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value at = arith::AddIOp::create(b, tile0, t);
      storeTile(tileProduct(qs, prefix, kts, bi, gs, at), view(sBufS, {t}));
      storeTile(tileProduct(qt, prefix, ktt, bi, gt, at), view(sBufT, {t}));
    });
  }

  /// The per-key terms of one 16-lane vector of a row.
  struct Terms {
    Value pt, ratio, take; // P_t, r, P_t != 0
  };
  /// body(r, i, w, terms) for each row of the tile from i0 (rows past Sq
  /// see no key) and each vector w of the block's score buffers (sBufS,
  /// sBufT: [blockTiles, rows, 32]); `lses`/`lset` the LSEs.
  void
  forRowTerms(ArrayRef<Value> caps, Value lses, Value lset, Value sBufS,
              Value sBufT, Value bi, Value h, Value i0, Value j0, Value limit,
              function_ref<void(Value, Value, int64_t, const Terms &)> body) {
    Value whole =
        masks.isWhole(b, limit, i0, rows, j0, width, /*existsOnly=*/true);
    Value zeros = splat(f(0.0f));
    forRows(i0, [&](Value r, Value i) {
      MaskTiles::RowRange range =
          masks.rowRange(b, limit, i, /*existsOnly=*/true);
      SmallVector<Value> in =
          keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
      Value ls = memref::LoadOp::create(b, lses, ValueRange{bi, h, range.row}),
            lt = memref::LoadOp::create(b, lset, ValueRange{bi, h, range.row});
      // A row that sees no key (LSE_t = -inf) subtracts +inf: P_t = 0.
      Value ltSafe = arith::SelectOp::create(
          b,
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, lt, f(kNegInf)),
          f(-kNegInf), lt);
      for (int64_t w = 0; w < width / kLanes; ++w) {
        SmallVector<Value> at = {idx(w / 2), r, idx(w % 2 * kLanes)};
        Value ss = vector::LoadOp::create(b, vec, sBufS, at),
              st = vector::LoadOp::create(b, vec, sBufT, at);
        // The masks (and the mask_mod region) of the shared keys.
        Scores sc = scoresOf(caps, ss, in[w], bi, h, range.row, j0, w,
                             /*prescaled=*/true);
        Terms terms;
        terms.pt = arith::SelectOp::create(
            b, sc.keep, expVector(arith::SubFOp::create(b, st, splat(ltSafe))),
            zeros);
        terms.ratio =
            arith::SubFOp::create(b, arith::SubFOp::create(b, st, splat(lt)),
                                  arith::SubFOp::create(b, ss, splat(ls)));
        terms.take = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                           terms.pt, zeros);
        body(r, i, w, terms);
      }
    });
  }

  /// x where `take`, else 0.
  Value where(Value take, Value x) {
    return arith::SelectOp::create(b, take, x, splat(f(0.0f)));
  }

  float teacherScale;
  int64_t blockTiles, width, qTiles;
  bool mean;
  int64_t teacherD = 0, teacherHkv = 1;
};

/// attn.distill: KL per row, then (mean) their mean over the rows that see
/// a key.
class FlashDistill : public DistillKernel {
public:
  FlashDistill(ImplicitLocOpBuilder &b, attn::DistillOp op,
               attn::CpuPlanAttr plan, int64_t vectorBits)
      : DistillKernel(b, op, plan, vectorBits), op(op) {}

  Value build() {
    Value qs = bufferOf(op.getQuery()), qt = bufferOf(op.getTeacherQuery());
    Value kl = alloc({B, H, Sq});
    SmallVector<Value> captured = {qs,
                                   transposed(bufferOf(op.getKey())),
                                   bufferOf(op.getLse()),
                                   qt,
                                   transposed(bufferOf(op.getTeacherKey())),
                                   bufferOf(op.getTeacherLse()),
                                   kl};
    if (op.getLengths())
      captured.push_back(bufferOf(op.getLengths()));
    appendCaptures(captured);
    parallelTasks(
        parent, "__attnc_flash_distill", captured, B * H * qTiles,
        [&](ArrayRef<Value>) {
          // Both sides' packed Q rows and score blocks, the KL's lane sums.
          return SmallVector<Value>{scratchBuffer({D, rows}),
                                    scratchBuffer({teacherD, rows}),
                                    scratchBuffer({blockTiles, rows, kCols}),
                                    scratchBuffer({blockTiles, rows, kCols}),
                                    scratchBuffer({rows, kLanes})};
        },
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value tile = arith::RemUIOp::create(b, t, idx(qTiles));
          Value bh = arith::DivUIOp::create(b, t, idx(qTiles));
          task(args, scratch, arith::DivUIOp::create(b, bh, idx(H)),
               arith::RemUIOp::create(b, bh, idx(H)), tile);
        });
    if (!mean)
      return tensorOf(kl, op.getKl().getType());
    return tensorOf(meanOfSeenRows(kl, bufferOf(op.getTeacherLse()),
                                   /*perHead=*/false),
                    op.getKl().getType());
  }

private:
  void task(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi, Value h,
            Value tile) {
    Value qs = args[0], kts = args[1], lses = args[2], qt = args[3],
          ktt = args[4], lset = args[5], kl = args[6];
    Value lengths = captureBase > 7 ? args[7] : Value();
    Value packedS = scratch[0], packedT = scratch[1], sBufS = scratch[2],
          sBufT = scratch[3], sums = scratch[4];
    Value i0 = arith::MulIOp::create(b, tile, idx(rows));
    packRows(qs, bi, h, i0, Sq - 1, packedS, scale);
    packRows(qt, bi, h, i0, Sq - 1, packedT, teacherScale);
    loop(0, rows, [&](Value r) {
      vector::StoreOp::create(b, splat(f(0.0f)), sums, ValueRange{r, idx(0)});
    });
    Value limit = masks.keyLimit(b, lengths, bi);
    MaskTiles::KeyRange keys = masks.keysSeenBy(b, limit, i0, rows, width);
    loop(keys.start, keys.end, width, [&](Value j0) {
      scoreBlocks(packedS, packedT, {}, kts, ktt, bi, h, j0, keys.end, sBufS,
                  sBufT);
      forRowTerms(
          args.slice(captureBase, captures.size()), lses, lset, sBufS, sBufT,
          bi, h, i0, j0, limit, [&](Value r, Value, int64_t, const Terms &t) {
            SmallVector<Value> at = {r, idx(0)};
            Value sum = vector::LoadOp::create(b, vec, sums, at);
            vector::StoreOp::create(
                b,
                arith::AddFOp::create(
                    b, sum,
                    where(t.take, arith::MulFOp::create(b, t.pt, t.ratio))),
                sums, at);
          });
    });
    forRows(i0, [&](Value r, Value i) {
      auto ifOp = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value total = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD,
          vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)}), Value(),
          arith::FastMathFlags::reassoc);
      memref::StoreOp::create(b, total, kl, ValueRange{bi, h, i});
    });
  }

  attn::DistillOp op;
};

/// attn.distill_grad: the rows' cotangents g (the mean's shared among the
/// rows that see a key), then the two passes.
class FlashDistillGrad : public DistillKernel {
public:
  FlashDistillGrad(ImplicitLocOpBuilder &b, attn::DistillGradOp op,
                   attn::CpuPlanAttr plan, int64_t vectorBits)
      : DistillKernel(b, op, plan, vectorBits), op(op) {}

  SmallVector<Value> build() {
    Value qs = bufferOf(op.getQuery()), ks = bufferOf(op.getKey()),
          qt = bufferOf(op.getTeacherQuery()),
          kt = bufferOf(op.getTeacherKey());
    Value lses = bufferOf(op.getLse()), lset = bufferOf(op.getTeacherLse());
    Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
    Value g = rowCotangents(bufferOf(op.getKlGrad()), lset);
    // Every query tile of both sides' Q packed once, times the scales: the
    // scores' A operands, and dK = dS^T (scale Q).
    Value qsT = alloc({B, H, qTiles, D, rows}),
          qtT = alloc({B, H, qTiles, teacherD, rows});
    forEachHead("__attnc_flash_distill_pack", {qs, qsT, qt, qtT}, H,
                [&](ArrayRef<Value> args, Value bi, Value h) {
                  packTiles(args[0], args[1], bi, h, scale);
                  packTiles(args[2], args[3], bi, h, teacherScale);
                });
    Value kts = transposed(ks), ktt = transposed(kt);
    Value dQs = alloc({B, H, Sq, D}, elementTypeOf(op.getQuery())),
          dQt =
              alloc({B, H, Sq, teacherD}, elementTypeOf(op.getTeacherQuery())),
          dLs = alloc({B, H, Sq}), dLt = alloc({B, H, Sq});
    Value dKs = alloc({B, Hkv, Skv, D}, elementTypeOf(op.getKey())),
          dKt = alloc({B, teacherHkv, Skv, teacherD},
                      elementTypeOf(op.getTeacherKey()));
    // (qsT, qtT, kts, ktt, lses, lset, g, ks, kt, dQs, dQt, dLs, dLt, dKs,
    // dKt, lengths?, captures...)
    SmallVector<Value> captured = {qsT, qtT, kts, ktt, lses, lset, g,  ks,
                                   kt,  dQs, dQt, dLs, dLt,  dKs,  dKt};
    if (lengths)
      captured.push_back(lengths);
    appendCaptures(captured);
    auto blocks = [&](ArrayRef<Value>) {
      return SmallVector<Value>{scratchBuffer({blockTiles, rows, kCols}),
                                scratchBuffer({blockTiles, rows, kCols}),
                                scratchBuffer({blockTiles, rows, kCols}),
                                scratchBuffer({blockTiles, rows, kCols}),
                                scratchBuffer({rows, D}),
                                scratchBuffer({rows, teacherD}),
                                scratchBuffer({rows, 2 * kLanes}),
                                scratchBuffer({blockTiles, D, kCols}),
                                scratchBuffer({blockTiles, teacherD, kCols})};
    };
    parallelTasks(
        parent, "__attnc_flash_distill_dq", captured, B * H * qTiles, blocks,
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value tile = arith::RemUIOp::create(b, t, idx(qTiles));
          Value bh = arith::DivUIOp::create(b, t, idx(qTiles));
          queryTask(args, scratch, arith::DivUIOp::create(b, bh, idx(H)),
                    arith::RemUIOp::create(b, bh, idx(H)), tile);
        });
    int64_t keyBlocks = (Skv + width - 1) / width;
    // With as many KV heads on both sides, one pass computes both dK from
    // the same recomputed scores; else one pass a side.
    SmallVector<SmallVector<bool>> passes =
        teacherHkv == Hkv ? SmallVector<SmallVector<bool>>{{false, true}}
                          : SmallVector<SmallVector<bool>>{{false}, {true}};
    for (ArrayRef<bool> sides : passes) {
      int64_t hkv = sides.front() ? teacherHkv : Hkv;
      parallelTasks(
          parent,
          sides.size() == 2 ? "__attnc_flash_distill_dk_both"
          : sides.front()   ? "__attnc_flash_distill_dk_teacher"
                            : "__attnc_flash_distill_dk",
          captured, B * hkv * keyBlocks, blocks,
          [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
            Value block = arith::RemUIOp::create(b, t, idx(keyBlocks));
            Value bg = arith::DivUIOp::create(b, t, idx(keyBlocks));
            keyTask(args, scratch, arith::DivUIOp::create(b, bg, idx(hkv)),
                    arith::RemUIOp::create(b, bg, idx(hkv)), block, sides);
          });
    }
    return {tensorOf(dQs, op.getQueryGrad().getType()),
            tensorOf(dKs, op.getKeyGrad().getType()),
            tensorOf(dLs, op.getLseGrad().getType()),
            tensorOf(dQt, op.getTeacherQueryGrad().getType()),
            tensorOf(dKt, op.getTeacherKeyGrad().getType()),
            tensorOf(dLt, op.getTeacherLseGrad().getType())};
  }

private:
  // Task arguments (the order of `captured` above).
  enum Arg : unsigned {
    kQsT,
    kQtT,
    kKts,
    kKtt,
    kLses,
    kLset,
    kG,
    kKs,
    kKt,
    kDQs,
    kDQt,
    kDLs,
    kDLt,
    kDKs,
    kDKt,
    kLengths
  };
  Value lengthsOf(ArrayRef<Value> args) {
    return captureBase > kLengths ? args[kLengths] : Value();
  }

  /// g [B, H, Sq]: the KL's cotangent of each row that sees a key (LSE_t >
  /// -inf), or the mean's divided among those rows; 0 for the others.
  Value rowCotangents(Value klGrad, Value lset) {
    Value g = alloc({B, H, Sq});
    auto seenRow = [&](ArrayRef<Value> at) {
      return arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                   memref::LoadOp::create(b, lset, at),
                                   f(kNegInf));
    };
    Value share;
    if (mean) {
      auto count = scf::ForOp::create(b, idx(0), idx(B * H * Sq), idx(1),
                                      ValueRange{f(0.0f)});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(count.getBody());
        Value n = count.getRegionIterArgs()[0];
        scf::YieldOp::create(b, ValueRange{arith::SelectOp::create(
                                    b, seenRow(rowOf(count.getInductionVar())),
                                    arith::AddFOp::create(b, n, f(1.0f)), n)});
      }
      share = arith::DivFOp::create(
          b, memref::LoadOp::create(b, klGrad, ValueRange{}),
          arith::MaximumFOp::create(b, count.getResult(0), f(1.0f)));
    }
    loop(0, B * H * Sq, [&](Value n) {
      SmallVector<Value> at = rowOf(n);
      Value x = mean ? share : memref::LoadOp::create(b, klGrad, at);
      memref::StoreOp::create(
          b, arith::SelectOp::create(b, seenRow(at), x, f(0.0f)), g, at);
    });
    return g;
  }

  /// dS_s and dS_t of the query tile from i0 (head h) over the key block
  /// from j0 into dsS and dsT ([blockTiles, rows, 32], 0 where masked);
  /// with `rowSums`, sum_j P_t and sum_j P_t (r + 1) added to its row's
  /// two 16-lane sums.
  void blockGradients(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                      Value h, Value i0, Value j0, Value keysEnd, Value limit,
                      bool rowSums) {
    Value tile = arith::DivUIOp::create(b, i0, idx(rows));
    Value sBufS = scratch[0], sBufT = scratch[1], dsS = scratch[2],
          dsT = scratch[3], sums = scratch[6];
    scoreBlocks(args[kQsT], args[kQtT], {bi, h, tile}, args[kKts], args[kKtt],
                bi, h, j0, keysEnd, sBufS, sBufT);
    forRowTerms(
        args.slice(captureBase, captures.size()), args[kLses], args[kLset],
        sBufS, sBufT, bi, h, i0, j0, limit,
        [&](Value r, Value i, int64_t w, const Terms &t) {
          Value g = splat(memref::LoadOp::create(
              b, args[kG],
              ValueRange{bi, h, arith::MinUIOp::create(b, i, idx(Sq - 1))}));
          Value gp = arith::MulFOp::create(b, g, t.pt);
          Value onePlus = arith::AddFOp::create(b, t.ratio, splat(f(1.0f)));
          SmallVector<Value> at = {idx(w / 2), r, idx(w % 2 * kLanes)};
          vector::StoreOp::create(
              b, where(t.take, arith::NegFOp::create(b, gp)), dsS, at);
          vector::StoreOp::create(
              b, where(t.take, arith::MulFOp::create(b, gp, onePlus)), dsT, at);
          if (!rowSums)
            return;
          for (int64_t k = 0; k < 2; ++k) {
            SmallVector<Value> to = {r, idx(k * kLanes)};
            Value x =
                k == 0 ? where(t.take, t.pt)
                       : where(t.take, arith::MulFOp::create(b, t.pt, onePlus));
            vector::StoreOp::create(
                b,
                arith::AddFOp::create(
                    b, vector::LoadOp::create(b, vec, sums, to), x),
                sums, to);
          }
        });
  }

  /// dQ_s, dQ_t, dLSE_s and dLSE_t of a query tile: its dS blocks times K.
  void queryTask(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                 Value h, Value tile) {
    Value ySt = scratch[4], yT = scratch[5], sums = scratch[6];
    Value i0 = arith::MulIOp::create(b, tile, idx(rows));
    Value gs, gt;
    std::tie(gs, gt) = kvHeads(h);
    zero(ySt);
    zero(yT);
    zero(sums);
    Value limit = masks.keyLimit(b, lengthsOf(args), bi);
    MaskTiles::KeyRange keys = masks.keysSeenBy(b, limit, i0, rows, width);
    loop(keys.start, keys.end, width, [&](Value j0) {
      blockGradients(args, scratch, bi, h, i0, j0, keys.end, limit,
                     /*rowSums=*/true);
      // The block's keys that exist (dS is 0 past the ones a row sees).
      Value valid = arith::MinUIOp::create(
          b, idx(width), arith::SubIOp::create(b, idx(Skv), j0));
      rowsTimesKeys(ySt, scratch[2], args[kKs], bi, gs, j0, valid, Value());
      rowsTimesKeys(yT, scratch[3], args[kKt], bi, gt, j0, valid, Value());
    });
    forRows(i0, [&](Value r, Value i) {
      auto ifOp = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      auto store = [&](Value y, Value dq, float s, int64_t d) {
        loop(idx(0), idx(d), kLanes, [&](Value c) {
          storeVector(arith::MulFOp::create(
                          b,
                          vector::LoadOp::create(b, vec, y, ValueRange{r, c}),
                          splat(f(s))),
                      dq, ValueRange{bi, h, i, c});
        });
      };
      store(ySt, args[kDQs], scale, D);
      store(yT, args[kDQt], teacherScale, teacherD);
      Value g = memref::LoadOp::create(b, args[kG], ValueRange{bi, h, i});
      auto rowSum = [&](int64_t k) {
        return vector::ReductionOp::create(
                   b, vector::CombiningKind::ADD,
                   vector::LoadOp::create(b, vec, sums,
                                          ValueRange{r, idx(k * kLanes)}),
                   Value(), arith::FastMathFlags::reassoc)
            .getResult();
      };
      memref::StoreOp::create(b, arith::MulFOp::create(b, g, rowSum(0)),
                              args[kDLs], ValueRange{bi, h, i});
      memref::StoreOp::create(
          b, arith::NegFOp::create(b, arith::MulFOp::create(b, g, rowSum(1))),
          args[kDLt], ValueRange{bi, h, i});
    });
  }

  /// One side's dK of a key block (KV head g): over the query heads of g
  /// and the query tiles that see the block, the dS blocks recomputed,
  /// dK^T += (scale Q)^T dS per key tile, then stored transposed back.
  void keyTask(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi, Value g,
               Value block, ArrayRef<bool> sides) {
    // (The sides of one pass have as many KV heads.)
    int64_t group = H / (sides.front() ? teacherHkv : Hkv);
    Value j0 = arith::MulIOp::create(b, block, idx(width));
    for (bool teacher : sides)
      zero(scratch[teacher ? 8 : 7]);
    Value limit = masks.keyLimit(b, lengthsOf(args), bi);
    Value keysEnd = masks.seenKeysEnd(b, limit, j0);
    forQueryTilesSeeing(
        limit, j0, width, qTiles, g, group, [&](Value h, Value i0) {
          blockGradients(args, scratch, bi, h, i0, j0, keysEnd, limit,
                         /*rowSums=*/false);
          Value tile = arith::DivUIOp::create(b, i0, idx(rows));
          for (bool teacher : sides)
            loop(0, blockTiles, [&](Value t) {
              accumulateTransposed(scratch[teacher ? 8 : 7],
                                   scratch[teacher ? 3 : 2],
                                   args[teacher ? kQtT : kQsT], {bi, h}, tile,
                                   idx(1), t, idx(0));
            });
        });
    for (bool teacher : sides)
      storeTransposedKeys(scratch[teacher ? 8 : 7], args[teacher ? kDKt : kDKs],
                          bi, g, j0);
  }

  attn::DistillGradOp op;
};

} // namespace

bool canLowerToFlashCpu(attn::DistillOp op) {
  return isFloatTensor(op.getQuery()) && isFloatTensor(op.getTeacherQuery()) &&
         canWidenRegion(op.getMaskMod());
}

bool canLowerToFlashCpu(attn::DistillGradOp op) {
  // dQ's products take whole 16-lane vectors of Q's rows.
  return isFloatTensor(op.getQuery()) && isFloatTensor(op.getTeacherQuery()) &&
         canWidenRegion(op.getMaskMod()) &&
         shapeOf(op.getQuery())[3] % 16 == 0 &&
         shapeOf(op.getTeacherQuery())[3] % 16 == 0;
}

FailureOr<Value> lowerToFlashDistill(RewriterBase &rewriter, attn::DistillOp op,
                                     attn::CpuPlanAttr plan,
                                     int64_t vectorBits) {
  if (!canLowerToFlashCpu(op))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  return replaceWithKernel<FlashDistill>(rewriter, op, plan, vectorBits);
}

FailureOr<SmallVector<Value>> lowerToFlashDistillGrad(RewriterBase &rewriter,
                                                      attn::DistillGradOp op,
                                                      attn::CpuPlanAttr plan,
                                                      int64_t vectorBits) {
  if (!canLowerToFlashCpu(op))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  return replaceWithKernel<FlashDistillGrad>(rewriter, op, plan, vectorBits);
}

} // namespace attnc
