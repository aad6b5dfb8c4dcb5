// The GPU kernels of attn.attention_stats_grad (see FlashGpu.h): the
// entropy's gradients from P recomputed from the LSE a key block at a time,
// never an Sq x Skv buffer. With g_i the row's cotangent (the mean's shared
// among the rows that see a key), per visible (i, j):
//   dS'_ij = g_i P_ij (LSE_i - S'_ij - 1),   dLSE_i = g_i sum_j P_ij (1 +
//   S'_ij - LSE_i)
// (the op's partial derivatives), dS = dS' dscore_mod/dS, then
//   rows     g per row, an invocation per (batch, head) over its rows;
//   dQ       a workgroup per (batch, head, query block), as the backward's
//            dQ kernel: dS of each key block in workgroup memory, dQ += dS K,
//            each row's dLSE sum by the subgroup that owns the row;
//   dK       a workgroup per (batch, KV head, key block) over every query
//            head of its group and the query rows that see the block:
//            dK += dS^T Q; float score captures' per-key partial gradients
//            (each key's owner adds its pairs' adjoints in row order), then
//            summed in key order.
// No atomics: the results do not depend on scheduling.
#include "codegen/gpu/FlashGpu.h"
#include "codegen/gpu/GpuKernelBuilder.h"

#include <limits>

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

namespace {

using Shape = FlashShape<attn::AttentionStatsGradOp>;

/// dS of (b, h, i, j) given the raw product and the row's LSE (+inf where
/// it is -inf) and g, and the row's dLSE term P (1 + S' - LSE); both 0 where
/// P is (masked pairs, rows that see no key).
struct StatsGrad {
  Value ds, lseTerm;
};
StatsGrad statsGradAt(GpuBuilder &g, Shape &s, Value dot, Value bi, Value h,
                      Value i, Value j, Value limit, Value whole, Value lse,
                      Value rowG,
                      SmallVector<CaptureAdjoint> *captureAdjoints = nullptr) {
  ScoreModAdjoints sweep = s.modifiedScoreAdjoints(g, dot, bi, h, i, j);
  Value score = g.select(s.visible(g, bi, h, i, j, limit, whole), sweep.result,
                         g.negInf());
  Value p = g.expShifted(score, lse);
  Value none =
      arith::CmpFOp::create(g.b, arith::CmpFPredicate::OEQ, p, g.cst(0.0f));
  Value zero = g.cst(0.0f), one = g.cst(1.0f);
  Value dsMod = g.mul(rowG, g.mul(p, g.sub(g.sub(lse, score), one)));
  // The score_mod's capture adjoints, seeded with dS' (0 where P is: the
  // region's adjoints of masked pairs may be anything).
  if (captureAdjoints)
    for (CaptureAdjoint &adjoint : sweep.captures) {
      adjoint.adjoint = g.select(none, zero, g.mul(adjoint.adjoint, dsMod));
      captureAdjoints->push_back(adjoint);
    }
  Value ds = sweep.scoreAdjoint ? g.mul(dsMod, sweep.scoreAdjoint) : dsMod;
  Value term = g.mul(p, g.sub(g.add(one, score), lse));
  return {g.select(none, zero, ds), g.select(none, zero, term)};
}

} // namespace

bool canLowerToFlashGpu(attn::AttentionStatsGradOp op) {
  // Float captures' per-key partial gradients must fit in 64 MiB.
  return CapturePartials::fit(
      op.getScoreCaptures(), shapeOf(op.getKey())[0] * shapeOf(op.getKey())[1] *
                                 shapeOf(op.getKey())[2]);
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter,
                              attn::AttentionStatsGradOp op,
                              attn::GpuPlanAttr plan) {
  if (!canLowerToFlashGpu(op))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  Shape s(b, op, plan.getQueryBlock(), plan.getKeyBlock(),
          plan.getWorkgroupSize());
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        lse = bufferOf(b, op.getLse()),
        entropyGrad = bufferOf(b, op.getEntropyGrad()),
        meanGrad = bufferOf(b, op.getMeanEntropyGrad()),
        lengths = bufferOf(b, op.getLengths());
  Value dq = allocLike(b, op.getQueryGrad().getType());
  Value dk = allocLike(b, op.getKeyGrad().getType());
  Value dlse = allocLike(b, op.getLseGrad().getType());
  Value rowG = memref::AllocOp::create(
      b, MemRefType::get({s.B, s.H, s.Sq}, b.getF32Type()));
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D;

  // g: the entropy's cotangent plus the mean's share, for the rows that see
  // a key (LSE not -inf; NaN too), else 0.
  launch(b, (s.B * s.H + s.W - 1) / s.W, 1, s.W,
         [&](Value blkId, Value, Value tid) {
           Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
           g.ifThen(g.ult(e, g.idx(s.B * s.H)), [&] {
             Value bi = g.divu(e, g.idx(s.H)), h = g.remu(e, g.idx(s.H));
             auto seen = [&](Value i) {
               return Value(arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                                  g.load(lse, {bi, h, i}),
                                                  g.negInf()));
             };
             Value share = g.cst(0.0f);
             if (meanGrad) {
               Value count =
                   g.reduce(g.idx(0), g.idx(s.Sq), g.idx(1), g.cst(0.0f),
                            [&](Value i, Value acc) {
                              return g.add(acc, g.select(seen(i), g.cst(1.0f),
                                                         g.cst(0.0f)));
                            });
               share = arith::DivFOp::create(
                   b, g.load(meanGrad, {bi, h}),
                   arith::MaximumFOp::create(b, count, g.cst(1.0f)));
             }
             g.loop(0, s.Sq, [&](Value i) {
               Value sum = entropyGrad
                               ? g.add(g.load(entropyGrad, {bi, h, i}), share)
                               : share;
               g.store(g.select(seen(i), sum, g.cst(0.0f)), rowG, {bi, h, i});
             });
           });
         });

  // dQ and dLSE.
  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
      [&](Value qb, Value bh, Value tid) {
        Subgroup sg(b);
        Workgroup wg{g, tid, s.W};
        QueryBlock blk(g, s, qb, bh, lengths);
        Value qs = g.shared({Bq, D}), ks = g.shared({Bk, D}),
              dss = g.shared({Bq, Bk}), dqs = g.shared({Bq, D}),
              sums = g.shared({1, Bq});
        wg.stageRows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, qs);
        wg.fill(dqs, Bq, D, g.cst(0.0f));
        wg.fill(sums, 1, Bq, g.cst(0.0f));
        g.barrier();
        forEachSeenKeyBlock(
            g, s, blk.limit, blk.i0, Bq, Bk, [&](Value j0, Value whole) {
              wg.stageKeys(k, nullptr, blk.bi, blk.kvh, j0, Bk, D, s.Skv,
                           blk.limit, ks);
              g.barrier();
              g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
                Value i = g.add(blk.i0, r);
                Value l = rowLseOrInf(g, s.Sq, lse, blk.bi, blk.h, i);
                Value gi =
                    g.load(rowG, {blk.bi, blk.h, g.minu(i, g.idx(s.Sq - 1))});
                Value local =
                    g.reduce(sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                             [&](Value jj, Value acc) {
                               StatsGrad grad = statsGradAt(
                                   g, s, g.dot(qs, r, ks, jj, D), blk.bi, blk.h,
                                   i, g.add(j0, jj), blk.limit, whole, l, gi);
                               memref::StoreOp::create(b, grad.ds, dss,
                                                       ValueRange{r, jj});
                               return g.add(acc, grad.lseTerm);
                             });
                Value sum = g.subgroupSum(local);
                onLaneZero(g, sg, [&] {
                  Value at[] = {g.idx(0), r};
                  g.store(g.add(g.load(sums, at), sum), sums, at);
                });
              });
              g.barrier();
              wg.multiplyAccumulate(dqs, dss, ks, Bq, Bk, D);
              g.barrier();
            });
        wg.storeRows(dqs, Bq, D, dq, blk.bi, blk.h, blk.i0, s.Sq,
                     [&](Value x, Value) { return s.scaled(g, x); });
        wg.forEachElement(1, Bq, [&](Value, Value r) {
          Value i = g.add(blk.i0, r);
          g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
            g.store(g.mul(g.load(rowG, {blk.bi, blk.h, i}),
                          g.load(sums, {g.idx(0), r})),
                    dlse, {blk.bi, blk.h, i});
          });
        });
      });

  // dK: every query head of the KV head's group, the rows that see the
  // block; float captures' per-key partial gradients.
  int64_t group = s.H / s.Hkv;
  CapturePartials partials(b, op.getScoreCaptures(), s.B * s.Hkv * s.Skv);
  launch(b, (s.Skv + Bk - 1) / Bk, s.B * s.Hkv, s.W,
         [&](Value kb, Value bg, Value tid) {
           Workgroup wg{g, tid, s.W};
           Value bi = g.divu(bg, g.idx(s.Hkv)), kvh = g.remu(bg, g.idx(s.Hkv));
           Value j0 = g.mul(kb, g.idx(Bk));
           Value limit = s.masks.keyLimit(b, lengths, bi);
           Value ks = g.shared({Bk, D}), qs = g.shared({Bq, D}),
                 dsts = g.shared({Bk, Bq}), dks = g.shared({Bk, D});
           wg.stageRows(k, bi, kvh, j0, Bk, D, s.Skv, ks);
           wg.fill(dks, Bk, D, g.cst(0.0f));
           // Float captures: invocation tid < Bk owns key j0 + tid.
           Value j = g.add(j0, tid);
           Value owner = arith::AndIOp::create(b, g.ult(tid, g.idx(Bk)),
                                               g.ult(j, g.idx(s.Skv)));
           Value key =
               g.add(g.mul(bg, g.idx(s.Skv)), g.minu(j, g.idx(s.Skv - 1)));
           if (partials.any())
             g.ifThen(owner, [&] { partials.zero(g, key); });
           g.barrier();
           auto rows = s.masks.rowsSeeing(b, limit, j0, Bk, Bq);
           Value first = rows.first, end = g.minu(rows.second, g.idx(s.Sq));
           g.loop(0, group, [&](Value hh) {
             Value h = g.add(g.mul(kvh, g.idx(group)), hh);
             g.loop(first, end, g.idx(Bq), [&](Value i0) {
               wg.stageRows(q, bi, h, i0, Bq, D, s.Sq, qs);
               g.barrier();
               auto fillTile = [&](Value jj, Value r,
                                   SmallVector<CaptureAdjoint> *adjoints) {
                 Value i = g.add(i0, r);
                 Value gi = g.load(rowG, {bi, h, g.minu(i, g.idx(s.Sq - 1))});
                 StatsGrad grad = statsGradAt(
                     g, s, g.dot(qs, r, ks, jj, D), bi, h, i, g.add(j0, jj),
                     limit, nullptr, rowLseOrInf(g, s.Sq, lse, bi, h, i), gi,
                     adjoints);
                 memref::StoreOp::create(b, s.scaled(g, grad.ds), dsts,
                                         ValueRange{jj, r});
               };
               if (!partials.any()) {
                 wg.forEachElement(Bk, Bq, [&](Value jj, Value r) {
                   fillTile(jj, r, nullptr);
                 });
               } else {
                 // Each key's owner fills its tile row and sums its capture
                 // partials in row order.
                 g.ifThen(owner, [&] {
                   g.loop(0, Bq, [&](Value r) {
                     SmallVector<CaptureAdjoint> adjoints;
                     fillTile(tid, r, &adjoints);
                     for (CaptureAdjoint &adjoint : adjoints)
                       partials.add(g, key, adjoint);
                   });
                 });
               }
               g.barrier();
               wg.multiplyAccumulate(dks, dsts, qs, Bk, Bq, D);
               g.barrier();
             });
           });
           wg.storeRows(dks, Bk, D, dk, bi, kvh, j0, s.Skv,
                        [](Value x, Value) { return x; });
         });

  // Float captures: the per-key partials summed in key order; integer
  // ones have zero gradients.
  partials.replaceGradientOp(rewriter, op, g, s.W, {dq, dk, dlse});
  return success();
}

} // namespace attnc
