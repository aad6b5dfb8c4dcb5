// The GPU kernels of attn.distill and attn.distill_grad (see FlashGpu.h):
// KL(P_t || P_s) and its partial derivatives from both sides' scores a key
// block at a time, never an Sq x Skv buffer. Per visible (i, j), with
// p = exp(S_t - LSE_t) and r = (S_t - LSE_t) - (S_s - LSE_s):
//   KL_i = sum_j p r;
//   dS_s = -g_i p,  dLSE_s,i = g_i sum_j p,
//   dS_t = g_i p (r + 1),  dLSE_t,i = -g_i sum_j p (r + 1).
// Kernels:
//   rows    a workgroup per (batch, head, query block): the rows' KL, or in
//           the backward their dQ of both sides and both dLSE (dS tiles in
//           workgroup memory, dQ += dS K);
//   dK      per side, a workgroup per (batch, that side's KV head, key
//           block) over the query heads of its group: dK += dS^T Q;
//   means   the mean KL over the rows that see a key (LSE_t not -inf), and
//           g from the mean's cotangent: per (batch, head), then in head
//           order.
// No atomics: the results do not depend on scheduling.
#include "codegen/gpu/FlashGpu.h"
#include "codegen/gpu/GpuKernelBuilder.h"

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

namespace {

/// Both sides of a distillation: the student's shapes in FlashShape (its
/// masks and mask_mod serve both), the teacher's beside them.
template <typename OpTy> struct Sides {
  Sides(ImplicitLocOpBuilder &b, OpTy op, attn::GpuPlanAttr plan)
      : s(b, op, plan.getQueryBlock(), plan.getKeyBlock(),
          plan.getWorkgroupSize()),
        Dt(shapeOf(op.getTeacherQuery())[3]),
        HkvT(shapeOf(op.getTeacherKey())[1]),
        teacherScale(float(op.getEffectiveTeacherScale())) {
    qs = bufferOf(b, op.getQuery());
    ks = bufferOf(b, op.getKey());
    lses = bufferOf(b, op.getLse());
    qt = bufferOf(b, op.getTeacherQuery());
    kt = bufferOf(b, op.getTeacherKey());
    lset = bufferOf(b, op.getTeacherLse());
    lengths = bufferOf(b, op.getLengths());
  }

  /// Both sides' key blocks from j0 into workgroup memory (kss, kts), then
  /// a barrier; kvt: the teacher's KV head of the query block.
  void stageKeys(GpuBuilder &g, Workgroup &wg, const QueryBlock &blk, Value kvt,
                 Value j0, Value kss, Value kts) {
    wg.stageKeys(ks, nullptr, blk.bi, blk.kvh, j0, s.Bk, s.D, s.Skv, blk.limit,
                 kss);
    wg.stageKeys(kt, nullptr, blk.bi, kvt, j0, s.Bk, Dt, s.Skv, blk.limit, kts);
    g.barrier();
  }

  /// p and r of (b, h, i, j) from both sides' raw products; p = 0 (and r
  /// unused) where the pair is masked or the teacher's row sees no key.
  struct Pair {
    Value p, r, none;
  };
  Pair pairAt(GpuBuilder &g, Value dotS, Value dotT, Value bi, Value h, Value i,
              Value j, Value limit, Value whole) {
    Value visible = s.visible(g, bi, h, i, j, limit, whole);
    Value st = g.mul(dotT, g.cst(teacherScale));
    Value ss = s.scaled(g, dotS);
    Value lt = rowLseOrInf(g, s.Sq, lset, bi, h, i);
    Value ls = g.load(lses, {bi, h, g.minu(i, g.idx(s.Sq - 1))});
    Value p = g.expShifted(g.select(visible, st, g.negInf()), lt);
    Value none =
        arith::CmpFOp::create(g.b, arith::CmpFPredicate::OEQ, p, g.cst(0.0f));
    Value r = g.sub(g.sub(st, lt), g.sub(ss, ls));
    return {p, r, none};
  }
  /// x where p is not 0, else 0 (never 0 * inf).
  Value unlessNone(GpuBuilder &g, const Pair &pair, Value x) {
    return g.select(pair.none, g.cst(0.0f), x);
  }

  FlashShape<OpTy> s;
  int64_t Dt, HkvT;
  float teacherScale;
  Value qs, ks, lses, qt, kt, lset, lengths;
};

/// Whether row (bi, h, i) sees a key: LSE_t not -inf (NaN too).
Value seenRow(GpuBuilder &g, Value lset, Value bi, Value h, Value i) {
  return arith::CmpFOp::create(g.b, arith::CmpFPredicate::UNE,
                               g.load(lset, {bi, h, i}), g.negInf());
}

/// perHead[e] (e = b H + h) = sum over the rows of (b, h) of value(bi, h,
/// i) where the row sees a key, and counts[e] their number (either buffer
/// may be null).
template <typename OpTy>
void sumSeenRows(GpuBuilder &g, Sides<OpTy> &x, Value perHead, Value counts,
                 function_ref<Value(Value, Value, Value)> value) {
  auto &s = x.s;
  launch(g.b, (s.B * s.H + s.W - 1) / s.W, 1, s.W,
         [&](Value blkId, Value, Value tid) {
           Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
           g.ifThen(g.ult(e, g.idx(s.B * s.H)), [&] {
             Value bi = g.divu(e, g.idx(s.H)), h = g.remu(e, g.idx(s.H));
             auto sumOf = [&](function_ref<Value(Value)> term) {
               return g.reduce(g.idx(0), g.idx(s.Sq), g.idx(1), g.cst(0.0f),
                               [&](Value i, Value acc) {
                                 return g.add(
                                     acc, g.select(seenRow(g, x.lset, bi, h, i),
                                                   term(i), g.cst(0.0f)));
                               });
             };
             if (perHead)
               g.store(sumOf([&](Value i) { return value(bi, h, i); }), perHead,
                       {e});
             if (counts)
               g.store(sumOf([&](Value) { return g.cst(1.0f); }), counts, {e});
           });
         });
}

/// The sum of buffer[0 .. n) in order (one invocation: n = B H is small).
Value sumInOrder(GpuBuilder &g, Value buffer, int64_t n) {
  return g.reduce(
      g.idx(0), g.idx(n), g.idx(1), g.cst(0.0f),
      [&](Value e, Value acc) { return g.add(acc, g.load(buffer, {e})); });
}

Value f32Buffer(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape) {
  return memref::AllocOp::create(b, MemRefType::get(shape, b.getF32Type()));
}

} // namespace

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::DistillOp op,
                              attn::GpuPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  Sides<attn::DistillOp> x(b, op, plan);
  auto &s = x.s;
  GpuBuilder g(b);
  int64_t Bq = s.Bq, Bk = s.Bk, Ds = s.D, Dt = x.Dt;
  Value kl = op.isMean() ? f32Buffer(b, {s.B, s.H, s.Sq})
                         : allocLike(b, op.getKl().getType());

  // KL per row: a subgroup per row, its lanes over the key block.
  launch(b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
         [&](Value qb, Value bh, Value tid) {
           Subgroup sg(b);
           Workgroup wg{g, tid, s.W};
           QueryBlock blk(g, s, qb, bh, x.lengths);
           Value kvt = g.divu(blk.h, g.idx(s.H / x.HkvT));
           Value qss = g.shared({Bq, Ds}), qts = g.shared({Bq, Dt}),
                 kss = g.shared({Bk, Ds}), kts = g.shared({Bk, Dt}),
                 sums = g.shared({1, Bq});
           wg.stageRows(x.qs, blk.bi, blk.h, blk.i0, Bq, Ds, s.Sq, qss);
           wg.stageRows(x.qt, blk.bi, blk.h, blk.i0, Bq, Dt, s.Sq, qts);
           wg.fill(sums, 1, Bq, g.cst(0.0f));
           g.barrier();
           forEachSeenKeyBlock(
               g, s, blk.limit, blk.i0, Bq, Bk, [&](Value j0, Value whole) {
                 x.stageKeys(g, wg, blk, kvt, j0, kss, kts);
                 g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
                   Value i = g.add(blk.i0, r);
                   Value local = g.reduce(
                       sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                       [&](Value jj, Value acc) {
                         auto pair =
                             x.pairAt(g, g.dot(qss, r, kss, jj, Ds),
                                      g.dot(qts, r, kts, jj, Dt), blk.bi, blk.h,
                                      i, g.add(j0, jj), blk.limit, whole);
                         return g.add(
                             acc, x.unlessNone(g, pair, g.mul(pair.p, pair.r)));
                       });
                   Value sum = g.subgroupSum(local);
                   onLaneZero(g, sg, [&] {
                     Value at[] = {g.idx(0), r};
                     g.store(g.add(g.load(sums, at), sum), sums, at);
                   });
                 });
                 g.barrier();
               });
           wg.forEachElement(1, Bq, [&](Value, Value r) {
             Value i = g.add(blk.i0, r);
             g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
               g.store(g.load(sums, {g.idx(0), r}), kl, {blk.bi, blk.h, i});
             });
           });
         });

  Value result = kl;
  if (op.isMean()) {
    // The mean over the rows that see a key: per (batch, head), then in
    // head order by one invocation; 0 when none does.
    Value perHead = f32Buffer(b, {s.B * s.H}),
          counts = f32Buffer(b, {s.B * s.H});
    sumSeenRows<attn::DistillOp>(g, x, perHead, counts,
                                 [&](Value bi, Value h, Value i) {
                                   return g.load(kl, {bi, h, i});
                                 });
    result = allocLike(b, op.getKl().getType());
    launch(b, 1, 1, 1, [&](Value, Value, Value) {
      Value sum = sumInOrder(g, perHead, s.B * s.H),
            count = sumInOrder(g, counts, s.B * s.H);
      Value any = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count,
                                        g.cst(0.0f));
      g.store(g.select(any, arith::DivFOp::create(b, sum, count), g.cst(0.0f)),
              result, {});
    });
  }
  rewriter.replaceOp(op, tensorOf(b, result, op.getKl().getType()));
  return success();
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::DistillGradOp op,
                              attn::GpuPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  Sides<attn::DistillGradOp> x(b, op, plan);
  auto &s = x.s;
  GpuBuilder g(b);
  int64_t Bq = s.Bq, Bk = s.Bk, Ds = s.D, Dt = x.Dt;
  Value klGrad = bufferOf(b, op.getKlGrad());
  Value dqs = allocLike(b, op.getQueryGrad().getType()),
        dks = allocLike(b, op.getKeyGrad().getType()),
        dls = allocLike(b, op.getLseGrad().getType()),
        dqt = allocLike(b, op.getTeacherQueryGrad().getType()),
        dkt = allocLike(b, op.getTeacherKeyGrad().getType()),
        dlt = allocLike(b, op.getTeacherLseGrad().getType());

  // g per row: the KL's cotangent of each row that sees a key, or the
  // mean's divided among those rows; 0 for the others.
  Value rowG = f32Buffer(b, {s.B, s.H, s.Sq});
  Value counts;
  if (op.isMean()) {
    counts = f32Buffer(b, {s.B * s.H});
    sumSeenRows<attn::DistillGradOp>(g, x, nullptr, counts, nullptr);
  }
  launch(b, (s.B * s.H + s.W - 1) / s.W, 1, s.W,
         [&](Value blkId, Value, Value tid) {
           Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
           g.ifThen(g.ult(e, g.idx(s.B * s.H)), [&] {
             Value bi = g.divu(e, g.idx(s.H)), h = g.remu(e, g.idx(s.H));
             Value share;
             if (counts)
               share = arith::DivFOp::create(
                   b, g.load(klGrad, {}),
                   arith::MaximumFOp::create(
                       b, sumInOrder(g, counts, s.B * s.H), g.cst(1.0f)));
             g.loop(0, s.Sq, [&](Value i) {
               Value v = share ? share : g.load(klGrad, {bi, h, i});
               g.store(g.select(seenRow(g, x.lset, bi, h, i), v, g.cst(0.0f)),
                       rowG, {bi, h, i});
             });
           });
         });
  auto rowGAt = [&](Value bi, Value h, Value i) {
    return g.load(rowG, {bi, h, g.minu(i, g.idx(s.Sq - 1))});
  };

  // dQ of both sides and both dLSE: a workgroup per (batch, head, query
  // block).
  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
      [&](Value qb, Value bh, Value tid) {
        Subgroup sg(b);
        Workgroup wg{g, tid, s.W};
        QueryBlock blk(g, s, qb, bh, x.lengths);
        Value kvt = g.divu(blk.h, g.idx(s.H / x.HkvT));
        Value qss = g.shared({Bq, Ds}), qts = g.shared({Bq, Dt}),
              kss = g.shared({Bk, Ds}), kts = g.shared({Bk, Dt}),
              dsS = g.shared({Bq, Bk}), dsT = g.shared({Bq, Bk}),
              dqS = g.shared({Bq, Ds}), dqT = g.shared({Bq, Dt}),
              sumP = g.shared({1, Bq}), sumPr = g.shared({1, Bq});
        wg.stageRows(x.qs, blk.bi, blk.h, blk.i0, Bq, Ds, s.Sq, qss);
        wg.stageRows(x.qt, blk.bi, blk.h, blk.i0, Bq, Dt, s.Sq, qts);
        wg.fill(dqS, Bq, Ds, g.cst(0.0f));
        wg.fill(dqT, Bq, Dt, g.cst(0.0f));
        wg.fill(sumP, 1, Bq, g.cst(0.0f));
        wg.fill(sumPr, 1, Bq, g.cst(0.0f));
        g.barrier();
        forEachSeenKeyBlock(
            g, s, blk.limit, blk.i0, Bq, Bk, [&](Value j0, Value whole) {
              x.stageKeys(g, wg, blk, kvt, j0, kss, kts);
              g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
                Value i = g.add(blk.i0, r);
                Value gi = rowGAt(blk.bi, blk.h, i);
                // Lanes over the block's keys: the dS tiles, and each lane's
                // sums of p and p (r + 1).
                auto forLanes =
                    scf::ForOp::create(b, sg.lane, g.idx(Bk), sg.size,
                                       ValueRange{g.cst(0.0f), g.cst(0.0f)});
                {
                  OpBuilder::InsertionGuard guard(b);
                  b.setInsertionPointToStart(forLanes.getBody());
                  Value jj = forLanes.getInductionVar();
                  auto pair = x.pairAt(
                      g, g.dot(qss, r, kss, jj, Ds), g.dot(qts, r, kts, jj, Dt),
                      blk.bi, blk.h, i, g.add(j0, jj), blk.limit, whole);
                  Value pr1 = x.unlessNone(
                      g, pair, g.mul(pair.p, g.add(pair.r, g.cst(1.0f))));
                  memref::StoreOp::create(
                      b, g.mul(g.cst(-1.0f), g.mul(gi, pair.p)), dsS,
                      ValueRange{r, jj});
                  memref::StoreOp::create(b, g.mul(gi, pr1), dsT,
                                          ValueRange{r, jj});
                  scf::YieldOp::create(
                      b,
                      ValueRange{g.add(forLanes.getRegionIterArgs()[0], pair.p),
                                 g.add(forLanes.getRegionIterArgs()[1], pr1)});
                }
                Value p = g.subgroupSum(forLanes.getResult(0)),
                      pr = g.subgroupSum(forLanes.getResult(1));
                onLaneZero(g, sg, [&] {
                  Value at[] = {g.idx(0), r};
                  g.store(g.add(g.load(sumP, at), p), sumP, at);
                  g.store(g.add(g.load(sumPr, at), pr), sumPr, at);
                });
              });
              g.barrier();
              wg.multiplyAccumulate(dqS, dsS, kss, Bq, Bk, Ds);
              wg.multiplyAccumulate(dqT, dsT, kts, Bq, Bk, Dt);
              g.barrier();
            });
        wg.storeRows(dqS, Bq, Ds, dqs, blk.bi, blk.h, blk.i0, s.Sq,
                     [&](Value v, Value) { return s.scaled(g, v); });
        wg.storeRows(
            dqT, Bq, Dt, dqt, blk.bi, blk.h, blk.i0, s.Sq,
            [&](Value v, Value) { return g.mul(v, g.cst(x.teacherScale)); });
        wg.forEachElement(1, Bq, [&](Value, Value r) {
          Value i = g.add(blk.i0, r);
          g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
            Value gi = g.load(rowG, {blk.bi, blk.h, i});
            Value at[] = {g.idx(0), r};
            g.store(g.mul(gi, g.load(sumP, at)), dls, {blk.bi, blk.h, i});
            g.store(g.mul(g.cst(-1.0f), g.mul(gi, g.load(sumPr, at))), dlt,
                    {blk.bi, blk.h, i});
          });
        });
      });

  // dK of one side: a workgroup per (batch, KV head of that side, key
  // block), over the query heads of its group and the rows that see the
  // block; both sides' K rows of each head are staged (the other side's KV
  // head varies with the head).
  auto keyGrads = [&](bool teacher) {
    int64_t hkv = teacher ? x.HkvT : s.Hkv, width = teacher ? Dt : Ds;
    int64_t group = s.H / hkv;
    Value dk = teacher ? dkt : dks;
    float scale = teacher ? x.teacherScale : float(s.scale);
    launch(
        b, (s.Skv + Bk - 1) / Bk, s.B * hkv, s.W,
        [&](Value kb, Value bg, Value tid) {
          Workgroup wg{g, tid, s.W};
          Value bi = g.divu(bg, g.idx(hkv)), kv = g.remu(bg, g.idx(hkv));
          Value j0 = g.mul(kb, g.idx(Bk));
          Value limit = s.masks.keyLimit(b, x.lengths, bi);
          Value qss = g.shared({Bq, Ds}), qts = g.shared({Bq, Dt}),
                kss = g.shared({Bk, Ds}), kts = g.shared({Bk, Dt}),
                dsts = g.shared({Bk, Bq}), dkAcc = g.shared({Bk, width});
          wg.fill(dkAcc, Bk, width, g.cst(0.0f));
          auto rows = s.masks.rowsSeeing(b, limit, j0, Bk, Bq);
          Value first = rows.first, end = g.minu(rows.second, g.idx(s.Sq));
          g.loop(0, group, [&](Value hh) {
            Value h = g.add(g.mul(kv, g.idx(group)), hh);
            wg.stageRows(x.ks, bi, g.divu(h, g.idx(s.H / s.Hkv)), j0, Bk, Ds,
                         s.Skv, kss);
            wg.stageRows(x.kt, bi, g.divu(h, g.idx(s.H / x.HkvT)), j0, Bk, Dt,
                         s.Skv, kts);
            g.loop(first, end, g.idx(Bq), [&](Value i0) {
              wg.stageRows(x.qs, bi, h, i0, Bq, Ds, s.Sq, qss);
              wg.stageRows(x.qt, bi, h, i0, Bq, Dt, s.Sq, qts);
              g.barrier();
              // The teacher's product first, into dS's tile (each
              // element stays with its invocation): one unrolled dot
              // product at a time holds fewer registers (ptxas spilled
              // with both at sm_80).
              wg.forEachElement(Bk, Bq, [&](Value jj, Value r) {
                memref::StoreOp::create(b, g.dot(qts, r, kts, jj, Dt), dsts,
                                        ValueRange{jj, r});
              });
              wg.forEachElement(Bk, Bq, [&](Value jj, Value r) {
                Value i = g.add(i0, r);
                Value dotT = memref::LoadOp::create(b, dsts, ValueRange{jj, r});
                auto pair = x.pairAt(g, g.dot(qss, r, kss, jj, Ds), dotT, bi, h,
                                     i, g.add(j0, jj), limit, nullptr);
                Value gi = rowGAt(bi, h, i);
                Value ds =
                    teacher ? x.unlessNone(
                                  g, pair,
                                  g.mul(gi, g.mul(pair.p,
                                                  g.add(pair.r, g.cst(1.0f)))))
                            : g.mul(g.cst(-1.0f), g.mul(gi, pair.p));
                memref::StoreOp::create(b, g.mul(ds, g.cst(scale)), dsts,
                                        ValueRange{jj, r});
              });
              g.barrier();
              wg.multiplyAccumulate(dkAcc, dsts, teacher ? qts : qss, Bk, Bq,
                                    width);
              g.barrier();
            });
          });
          wg.storeRows(dkAcc, Bk, width, dk, bi, kv, j0, s.Skv,
                       [](Value v, Value) { return v; });
        });
  };
  keyGrads(/*teacher=*/false);
  keyGrads(/*teacher=*/true);

  rewriter.replaceOp(op, {tensorOf(b, dqs, op.getQueryGrad().getType()),
                          tensorOf(b, dks, op.getKeyGrad().getType()),
                          tensorOf(b, dls, op.getLseGrad().getType()),
                          tensorOf(b, dqt, op.getTeacherQueryGrad().getType()),
                          tensorOf(b, dkt, op.getTeacherKeyGrad().getType()),
                          tensorOf(b, dlt, op.getTeacherLseGrad().getType())});
  return success();
}

} // namespace attnc
