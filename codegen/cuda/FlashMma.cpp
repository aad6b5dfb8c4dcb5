// The NVIDIA mma.sync flash kernels (see FlashMma.h; fragments and
// layouts in WarpTiles.h).
#include "codegen/cuda/FlashMma.h"

#include "codegen/TensorBuffers.h"
#include "codegen/cuda/WarpTiles.h"
#include "passes/ScalarGradients.h"

using namespace mlir;

namespace attnc {

using namespace cuda_kernels;

LogicalResult lowerToFlashMma(RewriterBase &rewriter, attn::AttentionOp op,
                              attn::MmaPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  int64_t warps = plan.getWarps(), Bq = 16 * warps, Bk = plan.getKeyBlock();
  int64_t threads = kWarp * warps;
  FlashShape<attn::AttentionOp> s(b, op, Bq, Bk, threads);
  GpuBuilder g(b);
  Type element = elementTypeOf(op.getQuery());
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lengths = bufferOf(b, op.getLengths());
  Value out = allocLike(b, op.getOutput().getType());
  Value lse = allocLike(b, op.getLse().getType());
  int64_t D = s.D, Dv = s.Dv;

  SharedTiles shared(b.getContext());
  shared.reserve({Bq, D + kPad}, element);
  shared.reserve({2, Bk, D + kPad}, element);
  shared.reserve({2, Bk, Dv + kPad}, element);
  if (shared.bytes > kMaxSharedBytes)
    return failure();

  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, threads,
      [&](Value qb, Value bh, Value tid) {
        Warp w(g, element, tid);
        QueryBlock blk(g, s, qb, bh, lengths);
        SmallVector<Value> tiles = shared.views(b);
        Value qs = tiles[0], ks = tiles[1], vs = tiles[2];
        Copier copy{g, tid, threads, {}};
        auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, Bq, Bk);
        auto stageKeys = [&](Value j0, Value stage) {
          copy.rows(k, blk.bi, blk.kvh, j0, Bk, D, s.Skv, blk.limit, ks, stage);
          copy.rows(v, blk.bi, blk.kvh, j0, Bk, Dv, s.Skv, blk.limit, vs,
                    stage);
        };
        copy.rows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, g.idx(s.Sq), qs,
                  nullptr);
        stageKeys(keys.start, g.idx(0));
        Value first = copy.commit();
        copy.wait(first, 0);
        g.barrier();
        Value warpRow = g.mul(w.warp, g.idx(16));
        SmallVector<AFragment> qf;
        for (int64_t kk = 0; kk < D / 16; ++kk)
          qf.push_back(w.loadA(qs, nullptr, warpRow, kk * 16));
        Value row0 = g.add(blk.i0, warpRow);
        SmallVector<Value, 2> rows = w.rowsFrom(row0);
        SoftmaxState st = forwardLoop(
            w, s, blk, keys, rows,
            [&](Value j0, Value stage) {
              // The next block's K and V (past the end: rows past the
              // limit, zero-filled, or never used).
              stageKeys(g.add(j0, g.idx(Bk)),
                        arith::SubIOp::create(b, g.idx(1), stage));
              copy.wait(copy.commit(), 1);
              g.barrier();
              Tiles sc = w.zeros(Bk);
              w.multiply(
                  sc, D, [&](int64_t kk) { return qf[kk]; }, ks, stage,
                  /*kMajor=*/false);
              return sc;
            },
            [&](const Tiles &p, Value stage, SoftmaxState &st) {
              w.multiply(
                  st.o, Bk, [&](int64_t kk) { return w.fragmentOf(p, kk); }, vs,
                  stage, /*kMajor=*/true);
              // Every warp is done with this stage before it is refilled.
              g.barrier();
            });
        // No copy may land in shared memory after the workgroup ends.
        copy.wait(first, 0);
        storeForward(w, st, out, lse, blk.bi, blk.h, row0, rows, s.Sq);
      },
      shared.bytes);

  rewriter.replaceOp(op, {tensorOf(b, out, op.getOutput().getType()),
                          tensorOf(b, lse, op.getLse().getType())});
  return success();
}

namespace {

/// What the backward kernels need of one score: P (recomputed from the
/// LSE, in log2 units) and dS = P (dP - Delta) dscore_mod/dS.
struct ScoreGrad {
  Value p, ds;
};

template <typename Shape>
ScoreGrad scoreGrad(GpuBuilder &g, Shape &s, Value dot, Value dp, Value bi,
                    Value h, Value i, Value j, Value mask, Value lse2,
                    Value delta) {
  ImplicitLocOpBuilder &b = g.b;
  ScoreModAdjoints sweep = s.modifiedScoreAdjoints(g, dot, bi, h, i, j);
  Value score = sweep.result, dScore = sweep.scoreAdjoint;
  if (mask)
    score = g.select(mask, score, g.negInf());
  Value p = math::Exp2Op::create(b, g.sub(g.mul(score, g.cst(kLog2e)), lse2));
  Value ds = g.mul(p, g.sub(dp, delta));
  return {p, dScore ? g.mul(ds, dScore) : ds};
}

/// body(e) for e in [0, n), an invocation each, in a launch of its own.
void elementwise(GpuBuilder &g, int64_t n, int64_t threads,
                 function_ref<void(Value)> body) {
  launch(g.b, (n + threads - 1) / threads, 1, threads,
         [&](Value blk, Value, Value tid) {
           Value e = g.add(g.mul(blk, g.idx(threads)), tid);
           g.ifThen(g.ult(e, g.idx(n)), [&] { body(e); });
         });
}

/// `memref` (identity layout) as one dimension.
Value flatOf(ImplicitLocOpBuilder &b, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return memref::CollapseShapeOp::create(
      b, memref,
      SmallVector<ReassociationIndices>{
          llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))});
}

/// A row's LSE in log2 units, +inf for a row that saw no key (so that
/// every P of it is exp2(-inf) = 0).
Value lseLog2(GpuBuilder &g, Value lse) {
  Value inf = g.cst(std::numeric_limits<float>::infinity());
  return g.select(g.isNegInf(lse), inf, g.mul(lse, g.cst(kLog2e)));
}

} // namespace

LogicalResult lowerToFlashMma(RewriterBase &rewriter, attn::AttentionGradOp op,
                              attn::MmaPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  int64_t warps = plan.getWarps(), R = 16 * warps, threads = kWarp * warps;
  // dQ: R rows a workgroup, key_block keys a step; dK/dV: R keys a
  // workgroup, query_block rows a step.
  int64_t Bk = plan.getKeyBlock(), Bq = plan.getQueryBlock();
  FlashShape<attn::AttentionGradOp> sq(b, op, R, Bk, threads);
  FlashShape<attn::AttentionGradOp> skv(b, op, Bq, R, threads);
  GpuBuilder g(b);
  Type element = elementTypeOf(op.getQuery());
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), o = bufferOf(b, op.getOutput()),
        lse = bufferOf(b, op.getLse()), dO = bufferOf(b, op.getOutputGrad()),
        dLse = bufferOf(b, op.getLseGrad()),
        lengths = bufferOf(b, op.getLengths());
  Value dq = allocLike(b, op.getQueryGrad().getType());
  Value dk = allocLike(b, op.getKeyGrad().getType());
  Value dv = allocLike(b, op.getValueGrad().getType());
  int64_t B = sq.B, H = sq.H, Hkv = sq.Hkv, Sq = sq.Sq, Skv = sq.Skv, D = sq.D,
          Dv = sq.Dv;
  Value delta =
      memref::AllocOp::create(b, MemRefType::get({B, H, Sq}, b.getF32Type()));

  // Delta = rowsum(dO * O) - dLSE: a warp per row, lanes over columns.
  int64_t rowsTotal = B * H * Sq;
  launch(b, (rowsTotal + warps - 1) / warps, 1, threads,
         [&](Value blk, Value, Value tid) {
           Value lane = g.remu(tid, g.idx(kWarp));
           Value row =
               g.add(g.mul(blk, g.idx(warps)), g.divu(tid, g.idx(kWarp)));
           g.ifThen(g.ult(row, g.idx(rowsTotal)), [&] {
             Value i = g.remu(row, g.idx(Sq));
             Value bh = g.divu(row, g.idx(Sq));
             Value bi = g.divu(bh, g.idx(H)), h = g.remu(bh, g.idx(H));
             Value sum = g.reduce(lane, g.idx(Dv), g.idx(kWarp), g.cst(0.0f),
                                  [&](Value c, Value acc) {
                                    return Value(math::FmaOp::create(
                                        b, g.load(dO, {bi, h, i, c}),
                                        g.load(o, {bi, h, i, c}), acc));
                                  });
             for (int32_t offset : {16, 8, 4, 2, 1})
               sum = g.add(sum, gpu::ShuffleOp::create(b, sum, offset, kWarp,
                                                       gpu::ShuffleMode::XOR)
                                    .getShuffleResult());
             if (dLse)
               sum = g.sub(sum, g.load(dLse, {bi, h, i}));
             g.ifThen(
                 arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                       g.idx(0)),
                 [&] {
                   memref::StoreOp::create(b, sum, delta, ValueRange{bi, h, i});
                 });
           });
         });

  // With atomic_dq the dK/dV kernel also adds each key block's part of
  // dQ into an f32 accumulator (red.global.add), scaled and rounded by a
  // last kernel; else dQ has a kernel of its own, which recomputes S and
  // dP (deterministic).
  bool atomicDq = plan.getAtomicDq();
  Value dqAcc, dqAccFlat;
  if (atomicDq) {
    dqAcc = memref::AllocOp::create(
        b, MemRefType::get({B, H, Sq, D}, b.getF32Type()));
    dqAccFlat = flatOf(b, dqAcc);
    elementwise(g, B * H * Sq * D, threads, [&](Value e) {
      memref::StoreOp::create(b, g.cst(0.0f), dqAccFlat, ValueRange{e});
    });
  }

  // dQ: R rows of (b, h) a workgroup; Q and dO fragments in registers.
  if (!atomicDq) {
    SharedTiles shared(b.getContext());
    shared.reserve({R, D + kPad}, element);
    shared.reserve({R, Dv + kPad}, element);
    shared.reserve({2, Bk, D + kPad}, element);
    shared.reserve({2, Bk, Dv + kPad}, element);
    if (shared.bytes > kMaxSharedBytes)
      return failure();
    auto &s = sq;
    launch(
        b, (Sq + R - 1) / R, B * H, threads,
        [&](Value qb, Value bh, Value tid) {
          Warp w(g, element, tid);
          QueryBlock blk(g, s, qb, bh, lengths);
          SmallVector<Value> tiles = shared.views(b);
          Value qs = tiles[0], dos = tiles[1], ks = tiles[2], vs = tiles[3];
          Copier copy{g, tid, threads, {}};
          auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, R, Bk);
          auto stageKeys = [&](Value j0, Value stage) {
            copy.rows(k, blk.bi, blk.kvh, j0, Bk, D, Skv, blk.limit, ks, stage);
            copy.rows(v, blk.bi, blk.kvh, j0, Bk, Dv, Skv, blk.limit, vs,
                      stage);
          };
          copy.rows(q, blk.bi, blk.h, blk.i0, R, D, Sq, g.idx(Sq), qs, nullptr);
          copy.rows(dO, blk.bi, blk.h, blk.i0, R, Dv, Sq, g.idx(Sq), dos,
                    nullptr);
          stageKeys(keys.start, g.idx(0));
          Value first = copy.commit();
          copy.wait(first, 0);
          g.barrier();
          Value warpRow = g.mul(w.warp, g.idx(16));
          SmallVector<AFragment> qf, dof;
          for (int64_t kk = 0; kk < D / 16; ++kk)
            qf.push_back(w.loadA(qs, nullptr, warpRow, kk * 16));
          for (int64_t kk = 0; kk < Dv / 16; ++kk)
            dof.push_back(w.loadA(dos, nullptr, warpRow, kk * 16));
          Value rows[2], lse2[2], rowDelta[2];
          for (int64_t r = 0; r < 2; ++r) {
            rows[r] = g.add(blk.i0, g.add(warpRow, w.rowOf(2 * r)));
            Value at = g.minu(rows[r], g.idx(Sq - 1));
            lse2[r] = lseLog2(g, memref::LoadOp::create(
                                     b, lse, ValueRange{blk.bi, blk.h, at}));
            rowDelta[r] =
                memref::LoadOp::create(b, delta, ValueRange{blk.bi, blk.h, at});
          }
          SmallVector<Value> init;
          flatten(w.zeros(D), init);
          int64_t nQ = D / 8;
          SmallVector<Value> result = carry(
              b, keys.start, keys.end, g.idx(Bk), init,
              [&](Value j0, ValueRange values) {
                Tiles acc = unflatten(values, nQ);
                Value step =
                    g.divu(arith::SubIOp::create(b, j0, keys.start), g.idx(Bk));
                Value stage = g.remu(step, g.idx(2));
                stageKeys(g.add(j0, g.idx(Bk)),
                          arith::SubIOp::create(b, g.idx(1), stage));
                Value group = copy.commit();
                copy.wait(group, 1);
                g.barrier();
                Tiles sc = w.zeros(Bk), dp = w.zeros(Bk);
                w.multiply(
                    sc, D, [&](int64_t kk) { return qf[kk]; }, ks, stage,
                    /*kMajor=*/false);
                w.multiply(
                    dp, Dv, [&](int64_t kk) { return dof[kk]; }, vs, stage,
                    /*kMajor=*/false);
                Value whole = s.masks.isWhole(b, blk.limit, blk.i0, R, j0, Bk,
                                              /*existsOnly=*/true);
                // dS in place of S.
                sc = unflatten(
                    perElement(g, sc.size(), 1, whole,
                               [&](int64_t n, int64_t c, bool isWhole) {
                                 Value i = rows[c / 2];
                                 Value j = g.add(j0, w.columnOf(n, c));
                                 Value mask = maskAt(g, s, blk.bi, blk.h, i, j,
                                                     blk.limit, isWhole);
                                 return SmallVector<Value>{
                                     scoreGrad(g, s, sc[n][c], dp[n][c], blk.bi,
                                               blk.h, i, j, mask, lse2[c / 2],
                                               rowDelta[c / 2])
                                         .ds};
                               }),
                    sc.size());
                // dQ += dS K.
                w.multiply(
                    acc, Bk, [&](int64_t kk) { return w.fragmentOf(sc, kk); },
                    ks, stage, /*kMajor=*/true);
                g.barrier();
                SmallVector<Value> next;
                flatten(acc, next);
                return next;
              });
          copy.wait(first, 0);
          Value scale = g.cst(float(s.scale));
          storeTiles(w, unflatten(result, nQ), dq, blk.bi, blk.h,
                     g.add(blk.i0, warpRow), Sq,
                     [&](int64_t) { return scale; });
        },
        shared.bytes);
  }

  // dK and dV: R keys of (b, KV head) a workgroup, over every head of the
  // group and every block of Bq query rows that sees them.
  {
    SharedTiles shared(b.getContext());
    shared.reserve({R, D + kPad}, element);
    shared.reserve({R, Dv + kPad}, element);
    shared.reserve({2, Bq, D + kPad}, element);
    shared.reserve({2, Bq, Dv + kPad}, element);
    shared.reserve({2, Bq}, b.getF32Type());
    shared.reserve({2, Bq}, b.getF32Type());
    if (atomicDq)
      shared.reserve({R, Bq + kPad}, element);
    if (shared.bytes > kMaxSharedBytes)
      return failure();
    auto &s = skv;
    int64_t group = H / Hkv;
    // dQ[i0 + r, :] += dS[r, keys] K[keys, :] for the step's Bq rows and
    // the workgroup's R keys: dS^T (the warps' dpt tiles) through shared
    // memory, then warps split the rows (16 each) and, where there are
    // more warps than 16-row groups, the columns; 64 columns at a time.
    auto addQueryGrads = [&](Warp &w, const Tiles &dst, Value dsts, Value ks,
                             Value bi, Value h, Value i0, Value warpRow) {
      for (int64_t n = 0; n < int64_t(dst.size()); ++n)
        for (int64_t r = 0; r < 2; ++r) {
          auto store = vector::StoreOp::create(
              b, w.pack(dst[n][2 * r], dst[n][2 * r + 1]), dsts,
              ValueRange{g.add(warpRow, w.rowOf(2 * r)), w.columnOf(n, 0)});
          store.setAlignment(4);
        }
      g.barrier();
      int64_t rowGroups = Bq / 16, colGroups = warps / rowGroups;
      int64_t width = (D / 16 + colGroups - 1) / colGroups * 16;
      Value rowGroup = g.remu(w.warp, g.idx(rowGroups));
      Value m0 = g.mul(rowGroup, g.idx(16));
      for (int64_t cg = 0; cg < colGroups; ++cg)
        g.ifThen(
            arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                  g.divu(w.warp, g.idx(rowGroups)), g.idx(cg)),
            [&] {
              for (int64_t c0 = cg * width; c0 < std::min(D, (cg + 1) * width);
                   c0 += 64) {
                int64_t cols =
                    std::min({int64_t(64), D - c0, (cg + 1) * width - c0});
                Tiles acc = w.zeros(cols);
                w.multiply(
                    acc, R,
                    [&](int64_t kk) {
                      return w.loadATransposed(dsts, m0, kk * 16);
                    },
                    ks, nullptr, /*kMajor=*/true, c0);
                for (int64_t r = 0; r < 2; ++r) {
                  Value row = g.add(i0, g.add(m0, w.rowOf(2 * r)));
                  g.ifThen(g.ult(row, g.idx(Sq)), [&] {
                    for (int64_t n = 0; n < int64_t(acc.size()); ++n)
                      for (int64_t c = 2 * r; c < 2 * r + 2; ++c)
                        memref::AtomicRMWOp::create(
                            b, arith::AtomicRMWKind::addf, acc[n][c], dqAcc,
                            ValueRange{bi, h, row,
                                       g.add(g.idx(c0), w.columnOf(n, c))});
                  });
                }
              }
            });
    };
    launch(
        b, (Skv + R - 1) / R, B * Hkv, threads,
        [&](Value kb, Value bg, Value tid) {
          Warp w(g, element, tid);
          Value bi = g.divu(bg, g.idx(Hkv)), kvh = g.remu(bg, g.idx(Hkv));
          Value j0 = g.mul(kb, g.idx(R));
          Value limit = s.masks.keyLimit(b, lengths, bi);
          SmallVector<Value> tiles = shared.views(b);
          Value ks = tiles[0], vs = tiles[1], qs = tiles[2], dos = tiles[3],
                ls = tiles[4], ds = tiles[5];
          Copier copy{g, tid, threads, {}};
          auto seeing = s.masks.rowsSeeing(b, limit, j0, R, Bq);
          Value first = seeing.first, end = g.minu(seeing.second, g.idx(Sq));
          // Blocks of rows per head (0 when the keys are past the limit).
          Value span = arith::SubIOp::create(
              b, arith::MaxSIOp::create(b, end, first), first);
          Value blocks =
              g.select(g.ult(j0, limit),
                       g.divu(g.add(span, g.idx(Bq - 1)), g.idx(Bq)), g.idx(0));
          Value steps = g.mul(blocks, g.idx(group));
          Value perHead = arith::MaxUIOp::create(b, blocks, g.idx(1));
          // Step t: head kvh * group + t / blocks, rows from first + Bq
          // (t % blocks).
          auto headOf = [&](Value t) {
            return g.add(g.mul(kvh, g.idx(group)), g.divu(t, perHead));
          };
          auto rowsOf = [&](Value t) {
            return g.add(first, g.mul(g.remu(t, perHead), g.idx(Bq)));
          };
          auto stageRows = [&](Value t, Value stage) {
            Value h = headOf(t), i0 = rowsOf(t);
            copy.rows(q, bi, h, i0, Bq, D, Sq, g.idx(Sq), qs, stage);
            copy.rows(dO, bi, h, i0, Bq, Dv, Sq, g.idx(Sq), dos, stage);
            copy.entries(lse, bi, h, i0, Bq, Sq, ls, stage);
            copy.entries(delta, bi, h, i0, Bq, Sq, ds, stage);
          };
          copy.rows(k, bi, kvh, j0, R, D, Skv, limit, ks, nullptr);
          copy.rows(v, bi, kvh, j0, R, Dv, Skv, limit, vs, nullptr);
          stageRows(g.idx(0), g.idx(0));
          Value firstGroup = copy.commit();
          copy.wait(firstGroup, 0);
          g.barrier();
          Value warpRow = g.mul(w.warp, g.idx(16));
          Value keyOf[2] = {g.add(j0, g.add(warpRow, w.rowOf(0))),
                            g.add(j0, g.add(warpRow, w.rowOf(2)))};
          SmallVector<Value> init;
          flatten(w.zeros(D), init);
          flatten(w.zeros(Dv), init);
          int64_t nK = D / 8, nV = Dv / 8;
          SmallVector<Value> result = carry(
              b, g.idx(0), steps, g.idx(1), init,
              [&](Value t, ValueRange values) {
                Tiles dkAcc = unflatten(values.take_front(nK * 4), nK);
                Tiles dvAcc = unflatten(values.drop_front(nK * 4), nV);
                Value stage = g.remu(t, g.idx(2));
                Value nextStep =
                    g.minu(g.add(t, g.idx(1)),
                           arith::SubIOp::create(b, steps, g.idx(1)));
                stageRows(nextStep, arith::SubIOp::create(b, g.idx(1), stage));
                Value grp = copy.commit();
                copy.wait(grp, 1);
                g.barrier();
                Value h = headOf(t), i0 = rowsOf(t);
                // S^T = K Q^T and dP^T = V dO^T: keys by rows.
                Tiles st = w.zeros(Bq), dpt = w.zeros(Bq);
                w.multiply(
                    st, D,
                    [&](int64_t kk) {
                      return w.loadA(ks, nullptr, warpRow, kk * 16);
                    },
                    qs, stage, /*kMajor=*/false);
                w.multiply(
                    dpt, Dv,
                    [&](int64_t kk) {
                      return w.loadA(vs, nullptr, warpRow, kk * 16);
                    },
                    dos, stage, /*kMajor=*/false);
                Value whole = s.masks.isWhole(b, limit, i0, Bq, j0, R,
                                              /*existsOnly=*/true);
                // The rows' LSE and Delta (the columns of this lane).
                SmallVector<Value> rowLse, rowDelta;
                for (int64_t n = 0; n < int64_t(st.size()); ++n)
                  for (int64_t c = 0; c < 2; ++c) {
                    Value col = w.columnOf(n, c);
                    rowLse.push_back(lseLog2(
                        g,
                        memref::LoadOp::create(b, ls, ValueRange{stage, col})));
                    rowDelta.push_back(
                        memref::LoadOp::create(b, ds, ValueRange{stage, col}));
                  }
                SmallVector<Value> grads = perElement(
                    g, st.size(), 2, whole,
                    [&](int64_t n, int64_t c, bool isWhole) {
                      Value i = g.add(i0, w.columnOf(n, c));
                      Value j = keyOf[c / 2];
                      Value mask = maskAt(g, s, bi, h, i, j, limit, isWhole);
                      ScoreGrad sg = scoreGrad(
                          g, s, st[n][c], dpt[n][c], bi, h, i, j, mask,
                          rowLse[2 * n + c % 2], rowDelta[2 * n + c % 2]);
                      return SmallVector<Value>{sg.p, sg.ds};
                    });
                for (int64_t n = 0; n < int64_t(st.size()); ++n)
                  for (int64_t c = 0; c < 4; ++c) {
                    st[n][c] = grads[(4 * n + c) * 2];
                    dpt[n][c] = grads[(4 * n + c) * 2 + 1];
                  }
                // dV += P^T dO, dK += dS^T Q.
                w.multiply(
                    dvAcc, Bq, [&](int64_t kk) { return w.fragmentOf(st, kk); },
                    dos, stage, /*kMajor=*/true);
                w.multiply(
                    dkAcc, Bq,
                    [&](int64_t kk) { return w.fragmentOf(dpt, kk); }, qs,
                    stage, /*kMajor=*/true);
                if (atomicDq)
                  addQueryGrads(w, dpt, tiles[6], ks, bi, h, i0, warpRow);
                g.barrier();
                SmallVector<Value> next;
                flatten(dkAcc, next);
                flatten(dvAcc, next);
                return next;
              });
          copy.wait(firstGroup, 0);
          Value scale = g.cst(float(s.scale)), one = g.cst(1.0f);
          storeTiles(w, unflatten(ArrayRef(result).take_front(nK * 4), nK), dk,
                     bi, kvh, g.add(j0, warpRow), Skv,
                     [&](int64_t) { return scale; });
          storeTiles(w, unflatten(ArrayRef(result).drop_front(nK * 4), nV), dv,
                     bi, kvh, g.add(j0, warpRow), Skv,
                     [&](int64_t) { return one; });
        },
        shared.bytes);
  }

  if (atomicDq) {
    Value dqFlat = flatOf(b, dq);
    float scale = float(sq.scale);
    elementwise(g, B * H * Sq * D, threads, [&](Value e) {
      Value x = memref::LoadOp::create(b, dqAccFlat, ValueRange{e});
      g.store(g.mul(x, g.cst(scale)), dqFlat, {e});
    });
  }

  SmallVector<Value> results = {tensorOf(b, dq, op.getQueryGrad().getType()),
                                tensorOf(b, dk, op.getKeyGrad().getType()),
                                tensorOf(b, dv, op.getValueGrad().getType())};
  // Integer score captures (the plan covers no float ones): zero
  // gradients.
  for (Value grad : op.getScoreCapturesGrad()) {
    Value zeros = allocLike(b, grad.getType());
    auto type = cast<MemRefType>(zeros.getType());
    Value flat = flatOf(b, zeros);
    elementwise(g, type.getNumElements(), threads, [&](Value e) {
      memref::StoreOp::create(
          b,
          arith::ConstantOp::create(b, type.getElementType(),
                                    b.getZeroAttr(type.getElementType())),
          flat, ValueRange{e});
    });
    results.push_back(tensorOf(b, zeros, grad.getType()));
  }
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace attnc
