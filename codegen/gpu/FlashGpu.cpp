// The GPU flash kernels (see FlashGpu.h).
//
// Thread mapping, for a workgroup of W invocations in subgroups of any size:
//   tiles    (Q, K, V, dO rows): invocation t stages elements t, t+W, ...
//   rows     (scores, softmax, Delta): subgroup s owns rows s, s+S, ...; its
//            lanes stride over the key block; row statistics come from
//            gpu.subgroup_reduce, written by lane 0;
//   outputs  (O, dQ accumulators): invocation t owns elements t, t+W, ...
// Barriers separate the phases, all in workgroup-uniform control flow.
// The dK/dV kernel accumulates its key block's dK and dV tiles over every
// query row (and every query head of its KV head) that sees the block.
#include "codegen/gpu/FlashGpu.h"

#include "codegen/TensorBuffers.h"
#include "codegen/gpu/GpuKernelBuilder.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

bool canLowerToFlashGpu(attn::AttentionOp) { return true; }

bool canLowerToFlashGpu(attn::AttentionGradOp op) {
  // Float captures' per-key partial gradients must fit in 64 MiB.
  return CapturePartials::fit(
      op.getScoreCaptures(), shapeOf(op.getKey())[0] * shapeOf(op.getKey())[1] *
                                 shapeOf(op.getKey())[2]);
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AttentionOp op,
                              attn::GpuPlanAttr plan) {
  if (!canLowerToFlashGpu(op))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  FlashShape<attn::AttentionOp> s(b, op, plan.getQueryBlock(),
                                  plan.getKeyBlock(), plan.getWorkgroupSize());
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lengths = bufferOf(b, op.getLengths()),
        table = bufferOf(b, op.getPages());
  Value out = allocLike(b, op.getOutput().getType());
  Value lse = allocLike(b, op.getLse().getType());
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D, Dv = s.Dv;

  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
      [&](Value qb, Value bh, Value tid) {
        Subgroup sg(b);
        Workgroup wg{g, tid, s.W};
        QueryBlock blk(g, s, qb, bh, lengths);
        Value qs = g.shared({Bq, D}), ks = g.shared({Bk, D}),
              vs = g.shared({Bk, Dv}), ps = g.shared({Bq, Bk}),
              os = g.shared({Bq, Dv});
        // Per row: the running max, the running sum, the last block's rescale.
        Value rowMax = g.shared({1, Bq}), rowSum = g.shared({1, Bq}),
              rescale = g.shared({1, Bq});
        auto stat = [&](Value tile, Value r) {
          return Value(
              memref::LoadOp::create(b, tile, ValueRange{g.idx(0), r}));
        };
        auto setStat = [&](Value tile, Value r, Value value) {
          memref::StoreOp::create(b, value, tile, ValueRange{g.idx(0), r});
        };
        wg.stageRows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, qs);
        wg.fill(os, Bq, Dv, g.cst(0.0f));
        wg.fill(rowMax, 1, Bq, g.negInf());
        wg.fill(rowSum, 1, Bq, g.cst(0.0f));
        g.barrier();

        // Key blocks no row of this query block sees are never visited.
        forEachSeenKeyBlock(
            g, s, blk.limit, blk.i0, Bq, Bk, [&](Value j0, Value whole) {
              wg.stageKeys(k, table, blk.bi, blk.kvh, j0, Bk, D, s.Skv,
                           blk.limit, ks);
              wg.stageKeys(v, table, blk.bi, blk.kvh, j0, Bk, Dv, s.Skv,
                           blk.limit, vs);
              g.barrier();
              // Scores and the online softmax: a subgroup per row.
              g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
                Value i = g.add(blk.i0, r);
                Value localMax = g.reduce(
                    sg.lane, g.idx(Bk), sg.size, g.negInf(),
                    [&](Value jj, Value m) {
                      Value score = s.maskedScore(
                          g, g.dot(qs, r, ks, jj, D), blk.bi, blk.h, i,
                          g.add(j0, jj), blk.limit, whole);
                      memref::StoreOp::create(b, score, ps, ValueRange{r, jj});
                      return Value(arith::MaximumFOp::create(b, m, score));
                    });
                Value oldMax = stat(rowMax, r);
                Value newMax = arith::MaximumFOp::create(
                    b, oldMax, g.subgroupMax(localMax));
                Value localSum = g.reduce(
                    sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                    [&](Value jj, Value l) {
                      Value p = g.expShifted(
                          memref::LoadOp::create(b, ps, ValueRange{r, jj}),
                          newMax);
                      memref::StoreOp::create(b, p, ps, ValueRange{r, jj});
                      return g.add(l, p);
                    });
                Value blockSum = g.subgroupSum(localSum);
                Value alpha = g.expShifted(oldMax, newMax);
                onLaneZero(g, sg, [&] {
                  setStat(rowSum, r,
                          g.add(g.mul(stat(rowSum, r), alpha), blockSum));
                  setStat(rowMax, r, newMax);
                  setStat(rescale, r, alpha);
                });
              });
              g.barrier();
              // O = O * alpha + P V.
              wg.multiplyAccumulate(os, ps, vs, Bq, Bk, Dv,
                                    [&](Value r) { return stat(rescale, r); });
              g.barrier();
            });

        // O / l and LSE = m + log l (0 and -inf for rows that saw no key;
        // NaN, as l is, for rows with a score of +inf or NaN).
        auto seen = [&](Value r) {
          return Value(arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                             stat(rowSum, r), g.cst(0.0f)));
        };
        auto safeSum = [&](Value r) {
          return g.select(seen(r), stat(rowSum, r), g.cst(1.0f));
        };
        wg.storeRows(os, Bq, Dv, out, blk.bi, blk.h, blk.i0, s.Sq,
                     [&](Value o, Value r) {
                       return g.select(seen(r),
                                       arith::DivFOp::create(b, o, safeSum(r)),
                                       g.cst(0.0f));
                     });
        wg.forEachElement(1, Bq, [&](Value, Value r) {
          Value i = g.add(blk.i0, r);
          g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
            Value value =
                g.add(stat(rowMax, r), math::LogOp::create(b, safeSum(r)));
            memref::StoreOp::create(b, g.select(seen(r), value, g.negInf()),
                                    lse, ValueRange{blk.bi, blk.h, i});
          });
        });
      });

  rewriter.replaceOp(op, {tensorOf(b, out, op.getOutput().getType()),
                          tensorOf(b, lse, op.getLse().getType())});
  return success();
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AttentionGradOp op,
                              attn::GpuPlanAttr plan) {
  if (!canLowerToFlashGpu(op))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  FlashShape<attn::AttentionGradOp> s(
      b, op, plan.getQueryBlock(), plan.getKeyBlock(), plan.getWorkgroupSize());
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lse = bufferOf(b, op.getLse()),
        dO = bufferOf(b, op.getOutputGrad()),
        dLse = bufferOf(b, op.getLseGrad()),
        lengths = bufferOf(b, op.getLengths());
  Value dq = allocLike(b, op.getQueryGrad().getType());
  Value dk = allocLike(b, op.getKeyGrad().getType());
  Value dv = allocLike(b, op.getValueGrad().getType());
  auto f32Buffer = [&](ArrayRef<int64_t> shape) {
    return Value(
        memref::AllocOp::create(b, MemRefType::get(shape, b.getF32Type())));
  };
  Value delta = f32Buffer({s.B, s.H, s.Sq});
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D, Dv = s.Dv;

  // Float score captures: per-key partial gradients (an invocation owns
  // one key), summed in key order by a kernel of their own.
  CapturePartials partials(b, op.getScoreCaptures(), s.B * s.Hkv * s.Skv);

  // The row's LSE, dLSE (0 without one) and Delta (null: not yet known).
  struct Row {
    Value lse, dLse, delta;
  };
  auto rowOf = [&](Value bi, Value h, Value i, Value rowDelta) {
    Value ic = g.minu(i, g.idx(s.Sq - 1));
    Value rowDLse =
        dLse ? Value(memref::LoadOp::create(b, dLse, ValueRange{bi, h, ic}))
             : g.cst(0.0f);
    return Row{memref::LoadOp::create(b, lse, ValueRange{bi, h, ic}), rowDLse,
               rowDelta};
  };
  // P of (b, h, i, j), recomputed from the LSE; with the row's Delta also
  // dS = P (dP - Delta + dLSE) dS'/dS, and `captureAdjoints` the
  // score_mod's capture adjoints seeded with P (dP - Delta + dLSE). The
  // region is evaluated once: its reverse sweep (seeded with 1, as the
  // adjoints are linear in the seed) also gives its value.
  struct Grad {
    Value p, ds;
  };
  auto gradAt = [&](Value dot, Value dp, Value bi, Value h, Value i, Value j,
                    Value limit, Row row,
                    SmallVector<CaptureAdjoint> *captureAdjoints) {
    if (!row.delta) // P only: the forward's score, no reverse sweep
      return Grad{
          g.expShifted(s.maskedScore(g, dot, bi, h, i, j, limit, nullptr),
                       row.lse),
          nullptr};
    ScoreModAdjoints sweep = s.modifiedScoreAdjoints(g, dot, bi, h, i, j);
    Value score = sweep.result, dScore = sweep.scoreAdjoint;
    SmallVector<CaptureAdjoint> adjoints = std::move(sweep.captures);
    score =
        g.select(s.visible(g, bi, h, i, j, limit, nullptr), score, g.negInf());
    Value p = g.expShifted(score, row.lse);
    Value dsMod = g.mul(p, g.add(g.sub(dp, row.delta), row.dLse));
    if (captureAdjoints)
      for (CaptureAdjoint &adjoint : adjoints) {
        adjoint.adjoint = g.mul(adjoint.adjoint, dsMod);
        captureAdjoints->push_back(adjoint);
      }
    return Grad{p, dScore ? g.mul(dsMod, dScore) : dsMod};
  };

  // dQ, with Delta_i = sum_j P_ij dP_ij first (exact also when O is
  // narrow): a workgroup per (batch, head, query block).
  launch(b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
         [&](Value qb, Value bh, Value tid) {
           Subgroup sg(b);
           Workgroup wg{g, tid, s.W};
           QueryBlock blk(g, s, qb, bh, lengths);
           Value qs = g.shared({Bq, D}), dos = g.shared({Bq, Dv}),
                 ks = g.shared({Bk, D}), vs = g.shared({Bk, Dv}),
                 dss = g.shared({Bq, Bk}), dqs = g.shared({Bq, D}),
                 deltas = g.shared({1, Bq});
           auto rowDelta = [&](Value r) {
             return Value(
                 memref::LoadOp::create(b, deltas, ValueRange{g.idx(0), r}));
           };
           wg.stageRows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, qs);
           wg.stageRows(dO, blk.bi, blk.h, blk.i0, Bq, Dv, s.Sq, dos);
           wg.fill(dqs, Bq, D, g.cst(0.0f));
           wg.fill(deltas, 1, Bq, g.cst(0.0f));
           g.barrier();
           auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, Bq, Bk);
           auto forKeyBlocks = [&](function_ref<void(Value)> body) {
             g.loop(keys.start, keys.end, g.idx(Bk), [&](Value j0) {
               wg.stageRows(k, blk.bi, blk.kvh, j0, Bk, D, s.Skv, ks);
               wg.stageRows(v, blk.bi, blk.kvh, j0, Bk, Dv, s.Skv, vs);
               g.barrier();
               body(j0);
               g.barrier();
             });
           };
           // Pass 1: Delta, a subgroup per row.
           forKeyBlocks([&](Value j0) {
             g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
               Value i = g.add(blk.i0, r);
               Row row = rowOf(blk.bi, blk.h, i, nullptr);
               Value local = g.reduce(
                   sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                   [&](Value jj, Value a) {
                     Value p =
                         gradAt(g.dot(qs, r, ks, jj, D), nullptr, blk.bi, blk.h,
                                i, g.add(j0, jj), blk.limit, row, nullptr)
                             .p;
                     return g.add(a, g.mul(p, g.dot(dos, r, vs, jj, Dv)));
                   });
               Value sum = g.subgroupSum(local);
               onLaneZero(g, sg, [&] {
                 memref::StoreOp::create(b, g.add(rowDelta(r), sum), deltas,
                                         ValueRange{g.idx(0), r});
               });
             });
           });
           wg.forEachElement(1, Bq, [&](Value, Value r) {
             Value i = g.add(blk.i0, r);
             g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
               memref::StoreOp::create(b, rowDelta(r), delta,
                                       ValueRange{blk.bi, blk.h, i});
             });
           });
           // Pass 2: dS, then dQ += dS K.
           forKeyBlocks([&](Value j0) {
             g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
               Value i = g.add(blk.i0, r);
               Row row = rowOf(blk.bi, blk.h, i, rowDelta(r));
               g.loop(sg.lane, g.idx(Bk), sg.size, [&](Value jj) {
                 Grad grad = gradAt(g.dot(qs, r, ks, jj, D),
                                    g.dot(dos, r, vs, jj, Dv), blk.bi, blk.h, i,
                                    g.add(j0, jj), blk.limit, row, nullptr);
                 memref::StoreOp::create(b, grad.ds, dss, ValueRange{r, jj});
               });
             });
             g.barrier();
             wg.multiplyAccumulate(dqs, dss, ks, Bq, Bk, D);
           });
           wg.storeRows(dqs, Bq, D, dq, blk.bi, blk.h, blk.i0, s.Sq,
                        [&](Value x, Value) { return s.scaled(g, x); });
         });

  // dK and dV: a workgroup per (batch, KV head, key block), for every
  // head of the group and every block of the query rows that see the keys:
  // the P and dS tiles (transposed, a key per row), then dV += P^T dO and
  // dK += dS^T Q, each accumulator element owned by one invocation, all
  // loops workgroup-uniform (lavapipe caps the loop iterations of an
  // invocation, see attn-vulkan-loop-trap: their count per query row is
  // about (Bk (D + Dv) + Bq (D + Dv)) / W, not D + Dv).
  int64_t group = s.H / s.Hkv;
  launch(
      b, (s.Skv + Bk - 1) / Bk, s.B * s.Hkv, s.W,
      [&](Value kb, Value bg, Value tid) {
        Workgroup wg{g, tid, s.W};
        Value bi = g.divu(bg, g.idx(s.Hkv)), kvh = g.remu(bg, g.idx(s.Hkv));
        Value j0 = g.mul(kb, g.idx(Bk));
        Value limit = s.masks.keyLimit(b, lengths, bi);
        Value ks = g.shared({Bk, D}), vs = g.shared({Bk, Dv}),
              qs = g.shared({Bq, D}), dos = g.shared({Bq, Dv}),
              pts = g.shared({Bk, Bq}), dsts = g.shared({Bk, Bq}),
              dks = g.shared({Bk, D}), dvs = g.shared({Bk, Dv});
        wg.stageRows(k, bi, kvh, j0, Bk, D, s.Skv, ks);
        wg.stageRows(v, bi, kvh, j0, Bk, Dv, s.Skv, vs);
        wg.fill(dks, Bk, D, g.cst(0.0f));
        wg.fill(dvs, Bk, Dv, g.cst(0.0f));
        // Float captures: invocation tid < Bk owns key j0 + tid.
        Value j = g.add(j0, tid);
        Value owner = arith::AndIOp::create(b, g.ult(tid, g.idx(Bk)),
                                            g.ult(j, g.idx(s.Skv)));
        Value jc = g.minu(j, g.idx(s.Skv - 1));
        Value key = g.add(g.mul(bg, g.idx(s.Skv)), jc);
        bool anyPartial = partials.any();
        if (anyPartial)
          g.ifThen(owner, [&] { partials.zero(g, key); });
        g.barrier();
        auto rowAt = [&](Value h, Value i) {
          return rowOf(
              bi, h, i,
              memref::LoadOp::create(
                  b, delta, ValueRange{bi, h, g.minu(i, g.idx(s.Sq - 1))}));
        };
        auto rows = s.masks.rowsSeeing(b, limit, j0, Bk, Bq);
        Value first = rows.first, end = g.minu(rows.second, g.idx(s.Sq));
        g.loop(0, group, [&](Value hh) {
          Value h = g.add(g.mul(kvh, g.idx(group)), hh);
          g.loop(first, end, g.idx(Bq), [&](Value i0) {
            wg.stageRows(q, bi, h, i0, Bq, D, s.Sq, qs);
            wg.stageRows(dO, bi, h, i0, Bq, Dv, s.Sq, dos);
            g.barrier();
            // P and dS' scale of (key jj, row r) into the transposed
            // tiles, given dP (and, with `adjoints`, the score_mod's
            // capture adjoints).
            auto fillTiles = [&](Value jj, Value r, Value dp,
                                 SmallVector<CaptureAdjoint> *adjoints) {
              Value i = g.add(i0, r);
              Grad grad = gradAt(g.dot(qs, r, ks, jj, D), dp, bi, h, i,
                                 g.add(j0, jj), limit, rowAt(h, i), adjoints);
              memref::StoreOp::create(b, grad.p, pts, ValueRange{jj, r});
              memref::StoreOp::create(b, s.scaled(g, grad.ds), dsts,
                                      ValueRange{jj, r});
            };
            if (!anyPartial) {
              // dP first, into dS's tile (each element stays with its
              // invocation): one unrolled dot product at a time holds
              // fewer registers (ptxas spilled with both).
              wg.forEachElement(Bk, Bq, [&](Value jj, Value r) {
                memref::StoreOp::create(b, g.dot(dos, r, vs, jj, Dv), dsts,
                                        ValueRange{jj, r});
              });
              wg.forEachElement(Bk, Bq, [&](Value jj, Value r) {
                fillTiles(jj, r,
                          memref::LoadOp::create(b, dsts, ValueRange{jj, r}),
                          nullptr);
              });
            } else {
              // Float captures: each key's owner fills its tile rows and
              // sums its capture partials in row order (rows of keys past
              // Skv stay unset: they reach only dK and dV rows never
              // stored).
              g.ifThen(owner, [&] {
                g.loop(0, Bq, [&](Value r) {
                  SmallVector<CaptureAdjoint> adjoints;
                  fillTiles(tid, r, g.dot(dos, r, vs, tid, Dv), &adjoints);
                  for (CaptureAdjoint &adjoint : adjoints)
                    partials.add(g, key, adjoint);
                });
              });
            }
            g.barrier();
            wg.multiplyAccumulate(dvs, pts, dos, Bk, Bq, Dv);
            wg.multiplyAccumulate(dks, dsts, qs, Bk, Bq, D);
            g.barrier();
          });
        });
        auto same = [](Value x, Value) { return x; };
        wg.storeRows(dks, Bk, D, dk, bi, kvh, j0, s.Skv, same);
        wg.storeRows(dvs, Bk, Dv, dv, bi, kvh, j0, s.Skv, same);
      });

  // Float captures: the per-key partials summed in key order; integer
  // ones have zero gradients.
  partials.replaceGradientOp(rewriter, op, g, s.W, {dq, dk, dv});
  return success();
}

} // namespace attnc
