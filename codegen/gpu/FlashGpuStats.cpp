// The GPU kernels of attn.attention_stats (see FlashGpu.h): P recomputed
// from the LSE a key block at a time (p = exp(S' - LSE), no online
// softmax), folded into the statistics and dropped, never an Sq x Skv
// buffer:
//   rows        a workgroup per (batch, head, query block), as the forward
//               has: each row's entropy terms p (LSE - S') summed by the
//               subgroup that owns the row, and for a pooled map each row's
//               sums over the key cells of each block into rowCells [B, H,
//               Sq, Gk] (O(Sq Gk) memory);
//   similarity  a workgroup per (batch, query block), every head's P of a
//               key block in workgroup memory at once: each head pair's
//               sum_{r, j} p_h p_g adds into the query block's partial
//               [B, blocks, H, H];
//   finishing   the pooled means over each row cell, the mean entropies
//               over the rows that see a key, and the similarity from the
//               partials summed in block order and the norms.
// Every sum has a fixed order and owner (no atomics): the results do not
// depend on scheduling.
#include "codegen/PooledCells.h"
#include "codegen/gpu/FlashGpu.h"
#include "codegen/gpu/GpuKernelBuilder.h"

#include <limits>

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

namespace {

using Shape = FlashShape<attn::AttentionStatsOp>;

/// An index as f32 (through i32: every count here is far below 2^31).
Value toF32(GpuBuilder &g, Value index) {
  Value i32 = arith::IndexCastUIOp::create(g.b, g.b.getI32Type(), index);
  return arith::UIToFPOp::create(g.b, g.f32, i32);
}

/// The entropies (into `entropy`, when not null) and the rows' sums over
/// their key cells (into `rowCells` [B, H, Sq, gk], when not null).
void rowsKernel(GpuBuilder &g, Shape &s, Value q, Value k, Value lse,
                Value lengths, Value entropy, Value rowCells, int64_t gk) {
  ImplicitLocOpBuilder &b = g.b;
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D;
  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, s.W,
      [&](Value qb, Value bh, Value tid) {
        Subgroup sg(b);
        Workgroup wg{g, tid, s.W};
        QueryBlock blk(g, s, qb, bh, lengths);
        Value qs = g.shared({Bq, D}), ks = g.shared({Bk, D});
        Value ps = rowCells ? g.shared({Bq, Bk}) : nullptr;
        Value sums = entropy ? g.shared({1, Bq}) : nullptr;
        wg.stageRows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, qs);
        if (sums)
          wg.fill(sums, 1, Bq, g.cst(0.0f));
        if (rowCells)
          wg.forEachElement(Bq, gk, [&](Value r, Value c) {
            Value i = g.add(blk.i0, r);
            g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
              g.store(g.cst(0.0f), rowCells, {blk.bi, blk.h, i, c});
            });
          });
        g.barrier();
        forEachSeenKeyBlock(
            g, s, blk.limit, blk.i0, Bq, Bk, [&](Value j0, Value whole) {
              wg.stageKeys(k, nullptr, blk.bi, blk.kvh, j0, Bk, D, s.Skv,
                           blk.limit, ks);
              g.barrier();
              // p, and its entropy term p (LSE - S') (0 where p is), a
              // subgroup per row.
              g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
                Value i = g.add(blk.i0, r);
                Value l = rowLseOrInf(g, s.Sq, lse, blk.bi, blk.h, i);
                Value local = g.reduce(
                    sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                    [&](Value jj, Value acc) {
                      Value score = s.maskedScore(
                          g, g.dot(qs, r, ks, jj, D), blk.bi, blk.h, i,
                          g.add(j0, jj), blk.limit, whole);
                      Value p = g.expShifted(score, l);
                      if (ps)
                        memref::StoreOp::create(b, p, ps, ValueRange{r, jj});
                      if (!sums)
                        return acc;
                      Value zero = arith::CmpFOp::create(
                          b, arith::CmpFPredicate::OEQ, p, g.cst(0.0f));
                      return g.add(acc, g.select(zero, g.cst(0.0f),
                                                 g.mul(p, g.sub(l, score))));
                    });
                if (!sums)
                  return;
                Value sum = g.subgroupSum(local);
                onLaneZero(g, sg, [&] {
                  Value at[] = {g.idx(0), r};
                  g.store(g.add(g.load(sums, at), sum), sums, at);
                });
              });
              if (rowCells) {
                // Each row's sum over each key cell the block touches, an
                // invocation per (row, cell) of the block.
                g.barrier();
                Value last = g.minu(g.add(j0, g.idx(Bk)), blk.limit);
                // (The loop's blocks start below the limit, so last > j0.)
                Value first = pooledCellOf(b, j0, s.Skv, gk),
                      end =
                          g.add(pooledCellOf(
                                    b, arith::SubIOp::create(b, last, g.idx(1)),
                                    s.Skv, gk),
                                g.idx(1));
                end = g.minu(end, g.idx(gk));
                wg.forEachElement(Bq, Bk, [&](Value r, Value t) {
                  Value c = g.add(first, t), i = g.add(blk.i0, r);
                  Value owned = arith::AndIOp::create(b, g.ult(c, end),
                                                      g.ult(i, g.idx(s.Sq)));
                  g.ifThen(owned, [&] {
                    Value lo = arith::MaxUIOp::create(
                        b, pooledCellStart(b, c, s.Skv, gk), j0);
                    Value hi = g.minu(
                        pooledCellStart(b, g.add(c, g.idx(1)), s.Skv, gk),
                        last);
                    Value sum = g.reduce(
                        lo, hi, g.idx(1), g.cst(0.0f), [&](Value j, Value acc) {
                          Value jj = arith::SubIOp::create(b, j, j0);
                          return g.add(acc, g.load(ps, {r, jj}));
                        });
                    SmallVector<Value> at = {blk.bi, blk.h, i, c};
                    g.store(g.add(g.load(rowCells, at), sum), rowCells, at);
                  });
                });
              }
              g.barrier();
            });
        if (entropy)
          wg.forEachElement(1, Bq, [&](Value, Value r) {
            Value i = g.add(blk.i0, r);
            g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
              g.store(g.load(sums, {g.idx(0), r}), entropy, {blk.bi, blk.h, i});
            });
          });
      });
}

/// pooled[b, h, I, c]: rowCells summed over the rows of cell I, in row
/// order, over the cell's size.
void pooledMeans(GpuBuilder &g, const Shape &s, Value rowCells, Value pooled,
                 int64_t gq, int64_t gk) {
  ImplicitLocOpBuilder &b = g.b;
  launch(b, (gq * gk + s.W - 1) / s.W, s.B * s.H, s.W,
         [&](Value blkId, Value bh, Value tid) {
           Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
           g.ifThen(g.ult(e, g.idx(gq * gk)), [&] {
             Value bi = g.divu(bh, g.idx(s.H)), h = g.remu(bh, g.idx(s.H));
             Value cell = g.divu(e, g.idx(gk)), c = g.remu(e, g.idx(gk));
             Value r0 = pooledCellStart(b, cell, s.Sq, gq),
                   r1 = pooledCellStart(b, g.add(cell, g.idx(1)), s.Sq, gq);
             Value k0 = pooledCellStart(b, c, s.Skv, gk),
                   k1 = pooledCellStart(b, g.add(c, g.idx(1)), s.Skv, gk);
             Value sum = g.reduce(
                 r0, r1, g.idx(1), g.cst(0.0f), [&](Value i, Value acc) {
                   return g.add(acc, g.load(rowCells, {bi, h, i, c}));
                 });
             Value count = g.mul(toF32(g, arith::SubIOp::create(b, r1, r0)),
                                 toF32(g, arith::SubIOp::create(b, k1, k0)));
             g.store(arith::DivFOp::create(b, sum, count), pooled,
                     {bi, h, cell, c});
           });
         });
}

/// mean[b, h]: the entropies of the rows that see a key (LSE not -inf;
/// NaN too) summed in row order over their count, 0 when none does.
void meanEntropies(GpuBuilder &g, const Shape &s, Value entropy, Value lse,
                   Value mean) {
  ImplicitLocOpBuilder &b = g.b;
  launch(
      b, (s.B * s.H + s.W - 1) / s.W, 1, s.W,
      [&](Value blkId, Value, Value tid) {
        Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
        g.ifThen(g.ult(e, g.idx(s.B * s.H)), [&] {
          Value bi = g.divu(e, g.idx(s.H)), h = g.remu(e, g.idx(s.H));
          auto seen = [&](Value i) {
            return Value(arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                               g.load(lse, {bi, h, i}),
                                               g.negInf()));
          };
          Value sum = g.reduce(
              g.idx(0), g.idx(s.Sq), g.idx(1), g.cst(0.0f),
              [&](Value i, Value acc) {
                return g.add(acc, g.select(seen(i), g.load(entropy, {bi, h, i}),
                                           g.cst(0.0f)));
              });
          Value count = g.reduce(
              g.idx(0), g.idx(s.Sq), g.idx(1), g.cst(0.0f),
              [&](Value i, Value acc) {
                return g.add(acc, g.select(seen(i), g.cst(1.0f), g.cst(0.0f)));
              });
          Value any = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, count,
                                            g.cst(0.0f));
          g.store(
              g.select(any, arith::DivFOp::create(b, sum, count), g.cst(0.0f)),
              mean, {bi, h});
        });
      });
}

/// Each query block's partial [B, blocks, H, H] of sum_{r, j} p_h p_g
/// over its rows (the lower triangle, g <= h).
void similarityKernel(GpuBuilder &g, Shape &s, Value q, Value k, Value lse,
                      Value lengths, Value parts) {
  ImplicitLocOpBuilder &b = g.b;
  int64_t Bs = s.Bq, Bk = s.Bk, D = s.D, H = s.H;
  int64_t group = s.H / s.Hkv;
  launch(b, (s.Sq + Bs - 1) / Bs, s.B, s.W, [&](Value qb, Value bi, Value tid) {
    Workgroup wg{g, tid, s.W};
    Value i0 = g.mul(qb, g.idx(Bs));
    Value limit = s.masks.keyLimit(b, lengths, bi);
    // The Q rows of one KV head's query heads (row hh Bs + r), a key
    // block, and every head's P of it (row h Bs + r).
    Value qs = g.shared({group * Bs, D}), ks = g.shared({Bk, D}),
          pt = g.shared({H * Bs, Bk});
    // An element of the partial keeps its owner throughout.
    wg.forEachElement(H, H, [&](Value h, Value h2) {
      g.store(g.cst(0.0f), parts, {bi, qb, h, h2});
    });
    forEachSeenKeyBlock(g, s, limit, i0, Bs, Bk, [&](Value j0, Value whole) {
      g.loop(0, s.Hkv, [&](Value kvh) {
        wg.stageKeys(k, nullptr, bi, kvh, j0, Bk, D, s.Skv, limit, ks);
        wg.forEachElement(group * Bs, D, [&](Value x, Value c) {
          Value h = g.add(g.mul(kvh, g.idx(group)), g.divu(x, g.idx(Bs)));
          Value row = g.add(i0, g.remu(x, g.idx(Bs)));
          Value v = g.load(q, {bi, h, g.minu(row, g.idx(s.Sq - 1)), c});
          memref::StoreOp::create(
              b, g.select(g.ult(row, g.idx(s.Sq)), v, g.cst(0.0f)), qs,
              ValueRange{x, c});
        });
        g.barrier();
        wg.forEachElement(group * Bs, Bk, [&](Value x, Value jj) {
          Value h = g.add(g.mul(kvh, g.idx(group)), g.divu(x, g.idx(Bs)));
          Value i = g.add(i0, g.remu(x, g.idx(Bs)));
          Value score = s.maskedScore(g, g.dot(qs, x, ks, jj, D), bi, h, i,
                                      g.add(j0, jj), limit, whole);
          Value p = g.expShifted(score, rowLseOrInf(g, s.Sq, lse, bi, h, i));
          Value at = g.add(g.mul(kvh, g.idx(group * Bs)), x);
          memref::StoreOp::create(b, p, pt, ValueRange{at, jj});
        });
        g.barrier();
      });
      wg.forEachElement(H, H, [&](Value h, Value h2) {
        g.ifThen(g.ult(h2, g.add(h, g.idx(1))), [&] {
          Value sum = g.reduce(
              g.idx(0), g.idx(Bs), g.idx(1), g.cst(0.0f),
              [&](Value r, Value acc) {
                Value x = g.add(g.mul(h, g.idx(Bs)), r),
                      y = g.add(g.mul(h2, g.idx(Bs)), r);
                return g.reduce(g.idx(0), g.idx(Bk), g.idx(1), acc,
                                [&](Value jj, Value a) {
                                  return g.add(a, g.mul(g.load(pt, {x, jj}),
                                                        g.load(pt, {y, jj})));
                                });
              });
          SmallVector<Value> at = {bi, qb, h, h2};
          g.store(g.add(g.load(parts, at), sum), parts, at);
        });
      });
      g.barrier();
    });
  });
}

/// similarity[b, h, g] = <P_h, P_g> / (|P_h| |P_g|) from the partials
/// summed in block order: 0 where a norm is 0, NaN kept.
void similarityOf(GpuBuilder &g, const Shape &s, Value parts, Value sim) {
  ImplicitLocOpBuilder &b = g.b;
  int64_t H = s.H, blocks = (s.Sq + s.Bq - 1) / s.Bq;
  launch(
      b, (H * H + s.W - 1) / s.W, s.B, s.W,
      [&](Value blkId, Value bi, Value tid) {
        Value e = g.add(g.mul(blkId, g.idx(s.W)), tid);
        g.ifThen(g.ult(e, g.idx(H * H)), [&] {
          Value h = g.divu(e, g.idx(H)), h2 = g.remu(e, g.idx(H));
          auto sumOf = [&](Value x, Value y) {
            return g.reduce(g.idx(0), g.idx(blocks), g.idx(1), g.cst(0.0f),
                            [&](Value t, Value acc) {
                              return g.add(acc, g.load(parts, {bi, t, x, y}));
                            });
          };
          Value dot = sumOf(arith::MaxUIOp::create(b, h, h2), g.minu(h, h2));
          Value nh = sumOf(h, h), ng = sumOf(h2, h2);
          auto isZero = [&](Value x) {
            return arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, x,
                                         g.cst(0.0f));
          };
          Value norms =
              g.mul(math::SqrtOp::create(b, nh), math::SqrtOp::create(b, ng));
          Value value =
              g.select(arith::OrIOp::create(b, isZero(nh), isZero(ng)),
                       g.cst(0.0f), arith::DivFOp::create(b, dot, norms));
          g.store(value, sim, {bi, h, h2});
        });
      });
}

} // namespace

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AttentionStatsOp op,
                              attn::GpuPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  Shape s(b, op, plan.getQueryBlock(), plan.getKeyBlock(),
          plan.getWorkgroupSize());
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        lse = bufferOf(b, op.getLse()), lengths = bufferOf(b, op.getLengths());
  auto f32Buffer = [&](ArrayRef<int64_t> shape) {
    return Value(
        memref::AllocOp::create(b, MemRefType::get(shape, b.getF32Type())));
  };
  Value entropy, mean, pooled, sim;
  if (op.getEntropy())
    entropy = allocLike(b, op.getEntropy().getType());
  else if (op.getMeanEntropy())
    entropy = f32Buffer({s.B, s.H, s.Sq});
  int64_t gq = 0, gk = 0;
  Value rowCells;
  if (op.getPooled()) {
    ArrayRef<int64_t> grid = shapeOf(op.getPooled());
    gq = grid[2], gk = grid[3];
    pooled = allocLike(b, op.getPooled().getType());
    rowCells = f32Buffer({s.B, s.H, s.Sq, gk});
  }
  if (entropy || rowCells)
    rowsKernel(g, s, q, k, lse, lengths, entropy, rowCells, gk);
  if (pooled)
    pooledMeans(g, s, rowCells, pooled, gq, gk);
  if (op.getMeanEntropy()) {
    mean = allocLike(b, op.getMeanEntropy().getType());
    meanEntropies(g, s, entropy, lse, mean);
  }
  if (op.getSimilarity()) {
    Value parts = f32Buffer({s.B, (s.Sq + s.Bq - 1) / s.Bq, s.H, s.H});
    similarityKernel(g, s, q, k, lse, lengths, parts);
    sim = allocLike(b, op.getSimilarity().getType());
    similarityOf(g, s, parts, sim);
  }

  SmallVector<Value> results;
  for (auto [result, buffer] :
       llvm::zip(SmallVector<Value>{op.getEntropy(), op.getMeanEntropy(),
                                    op.getPooled(), op.getSimilarity()},
                 SmallVector<Value>{entropy, mean, pooled, sim}))
    if (result)
      results.push_back(tensorOf(b, buffer, result.getType()));
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace attnc
