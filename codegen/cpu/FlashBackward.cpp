// The FlashAttention-2 CPU backward of attn.attention_grad (see
// FlashAttention.h).
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/FlashCommon.h"

#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {
namespace {

//===----------------------------------------------------------------------===//
// Backward (FlashAttention-2 in one pass over key tiles: dK/dV per key tile,
// dQ into one f32 copy per split of the key tiles, summed in order, so that
// every gradient has a fixed order of accumulation)
//===----------------------------------------------------------------------===//

class FlashBackward : public FlashCommon {
public:
  FlashBackward(ImplicitLocOpBuilder &b, attn::AttentionGradOp op,
                attn::CpuPlanAttr plan, int64_t vectorBits)
      : FlashCommon(b, op, plan.getRows(), vectorBits),
        blockTiles(plan.getKeyBlock() / kCols), op(op),
        splits(plan.getSplits()) {
    for (auto [k, capture] : llvm::enumerate(op.getScoreCaptures()))
      if (isFloatTensor(capture))
        floatCaptures.push_back(k);
    if (!scoreMod.empty())
      buildAdjointBlock();
  }

  SmallVector<Value> build() {
    Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
          v = bufferOf(op.getValue()), o = bufferOf(op.getOutput()),
          lse = bufferOf(op.getLse()), dO = bufferOf(op.getOutputGrad());
    Value dLse = op.getLseGrad() ? bufferOf(op.getLseGrad()) : Value();
    Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
    Value dQ = alloc({B, H, Sq, D}, elementTypeOf(op.getQuery())),
          dK = alloc({B, Hkv, Skv, D}, elementTypeOf(op.getKey())),
          dV = alloc({B, Hkv, Skv, Dv}, elementTypeOf(op.getValue()));

    int64_t qTiles = (Sq + rows - 1) / rows;
    int64_t kvTasks = B * Hkv * splits;
    // Float captures' gradients: one partial row per task, summed in task
    // order afterwards (deterministic for any thread count).
    SmallVector<Value> partials;
    for (unsigned k : floatCaptures) {
      int64_t elements =
          cast<ShapedType>(captures[k].getType()).getNumElements();
      Value partial = alloc({kvTasks, elements});
      loop(0, kvTasks, [&](Value t) {
        loop(0, elements, [&](Value e) {
          memref::StoreOp::create(b, f(0.0f), partial, ValueRange{t, e});
        });
      });
      partials.push_back(partial);
    }

    // Every query tile of Q and dO packed once ([B, H, tile, D, rows]): the
    // tile products and the transposed dK/dV products read them; packing
    // inside the tasks would repeat it per key tile. Q times the scale, as
    // the forward packs it: the recomputed scores are then the forward's,
    // bit for bit (with Q scaled in the forward only, an ALiBi slope's
    // gradient read errors up to 7x larger), and dK = dS^T (scale Q).
    Value qT = alloc({B, H, qTiles, D, rows}),
          dOT = alloc({B, H, qTiles, Dv, rows});
    forEachHead("__attnc_flash_pack", {q, qT, dO, dOT}, H,
                [&](ArrayRef<Value> args, Value bi, Value h) {
                  packTiles(args[0], args[1], bi, h, scale);
                  packTiles(args[2], args[3], bi, h);
                });
    // Delta from O in f32 is exact enough; from a narrower O, the float
    // captures' gradients (sums of terms that cancel: an ALiBi slope's
    // read errors of 0.2-1) need it from P and dP (with K^T and V^T
    // packed whole for it; the pass over key tiles packs its own tile).
    bool narrowOutput = !elementTypeOf(op.getOutput()).isF32();
    Value delta = narrowOutput && !floatCaptures.empty()
                      ? exactRowDeltas(qT, transposed(k), transposed(v), dOT,
                                       lse, dLse, lengths)
                      : rowDeltas(o, dO, dLse);
    SmallVector<Value> common = {qT, k, v, dOT, lse, delta};
    // The dQ copies of the splits ([splits, B, H, rows * qTiles, D]).
    Value dqCopies = alloc({splits, B, H, qTiles * rows, D});
    // dK and dV per key tile, dQ's terms into the split's copy: one task
    // per (batch, KV head, split).
    SmallVector<Value> captured1(common);
    captured1.append({dK, dV, k, dqCopies});
    if (lengths)
      captured1.push_back(lengths);
    appendCaptures(captured1);
    partialBase = captured1.size();
    captured1.append(partials);
    parallelTasks(
        parent, "__attnc_flash_backward_kv", captured1, kvTasks,
        [&](ArrayRef<Value>) {
          return SmallVector<Value>{
              scratchBuffer({blockTiles, kChunkTiles * rows, kCols}),
              scratchBuffer({blockTiles, kChunkTiles * rows, kCols}),
              scratchBuffer({blockTiles, D, kCols}),
              scratchBuffer({blockTiles, Dv, kCols}),
              scratchBuffer({1, 1, blockTiles, D, kCols}),
              scratchBuffer({1, 1, blockTiles, Dv, kCols}),
              scratchBuffer({1, 1, (D / kLanes + 1) / 2, blockTiles * kCols,
                             2 * kLanes})};
        },
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value split = arith::RemUIOp::create(b, t, idx(splits));
          Value bg = arith::DivUIOp::create(b, t, idx(splits));
          Value bi = arith::DivUIOp::create(b, bg, idx(Hkv)),
                g = arith::RemUIOp::create(b, bg, idx(Hkv));
          zeroCopies(args[9], split, bi, g);
          loop(split, idx(keyBlocks()), splits, [&](Value block) {
            keyBlockTask(args, scratch, bi, g, block, split, t);
          });
        });
    // dQ = scale dS K: the splits' copies summed in order, times the scale.
    forEachHead(
        "__attnc_flash_dq", {dqCopies, dQ}, H,
        [&](ArrayRef<Value> args, Value bi, Value h) {
          loop(0, Sq, [&](Value i) {
            loop(idx(0), idx(D), kLanes, [&](Value c) {
              Value sum = vector::LoadOp::create(
                  b, vec, args[0], ValueRange{idx(0), bi, h, i, c});
              for (int64_t p = 1; p < splits; ++p)
                sum = arith::AddFOp::create(
                    b, sum,
                    vector::LoadOp::create(b, vec, args[0],
                                           ValueRange{idx(p), bi, h, i, c}));
              sum = arith::MulFOp::create(b, sum, splat(f(scale)));
              storeVector(sum, args[1], ValueRange{bi, h, i, c});
            });
          });
        });
    SmallVector<Value> results = {tensorOf(dQ, op.getQueryGrad().getType()),
                                  tensorOf(dK, op.getKeyGrad().getType()),
                                  tensorOf(dV, op.getValueGrad().getType())};
    // Integer captures have no gradient: zeros.
    for (auto [k, grad] : llvm::enumerate(op.getScoreCapturesGrad())) {
      if (!isFloatTensor(grad)) {
        results.push_back(arith::ConstantOp::create(
            b, cast<TypedAttr>(b.getZeroAttr(grad.getType()))));
        continue;
      }
      results.push_back(tensorOf(
          sumPartials(partials[partialIndex(k)], captures[k]), grad.getType()));
    }
    return results;
  }

private:
  /// Delta[b, h, i] = rowsum(dO * O) - dLSE (the dLSE term of the LSE's own
  /// gradient folds in here).
  Value rowDeltas(Value o, Value dO, Value dLse) {
    Value delta = alloc({B, H, Sq});
    SmallVector<Value> captured = {o, dO, delta};
    if (dLse)
      captured.push_back(dLse);
    forEachHead("__attnc_flash_deltas", captured, H,
                [&](ArrayRef<Value> args, Value bi, Value h) {
                  rowDeltasOfHead(args, bi, h);
                });
    return delta;
  }

  /// P = exp(S' - LSE) on the lanes the masks keep, else 0 (a row with no
  /// visible key has LSE = -inf: the select keeps P = 0).
  Value recomputedP(const Scores &sc, Value lse) {
    return arith::SelectOp::create(
        b, sc.keep, expVector(arith::SubFOp::create(b, sc.modified, lse)),
        splat(f(0.0f)));
  }

  /// rowDeltas as rowsum(P * dP) - dLSE, with P and dP recomputed from the
  /// packed Q, dO, K^T and V^T tiles (two of the backward's products once
  /// more) rather than from O in its narrow type: one task per (batch, head,
  /// query tile) over the key tiles its rows see.
  Value exactRowDeltas(Value qT, Value kt, Value vt, Value dOT, Value lse,
                       Value dLse, Value lengths) {
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
            storeTile(
                tileProduct(args[0], {bi, h, ib}, args[1], bi, qt.g, tile),
                sBuf);
            storeTile(
                tileProduct(args[3], {bi, h, ib}, args[2], bi, qt.g, tile),
                dpBuf);
            Value whole = masks.isWhole(b, qt.limit, qt.i0, rows, j0, kCols,
                                        /*existsOnly=*/true);
            forRows(qt.i0, [&](Value r, Value i) {
              MaskTiles::RowRange range =
                  masks.rowRange(b, qt.limit, i, /*existsOnly=*/true);
              SmallVector<Value> in =
                  keyMaskUnlessWhole(whole, j0, range.lo, range.hi);
              Value l = splat(memref::LoadOp::create(
                  b, args[4], ValueRange{bi, h, range.row}));
              Value acc =
                  vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)});
              for (int64_t w = 0; w < 2; ++w) {
                SmallVector<Value, 2> at = {r, idx(w * kLanes)};
                Value sv = vector::LoadOp::create(b, vec, sBuf, at);
                Value dp = vector::LoadOp::create(b, vec, dpBuf, at);
                Scores sc = scoresOf(caps, sv, in[w], bi, h, range.row, j0, w,
                                     /*prescaled=*/true);
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

  /// rowDeltas for one (batch, head); args: O, dO, Delta[, dLSE].
  void rowDeltasOfHead(ArrayRef<Value> args, Value bi, Value h) {
    Value o = args[0], dO = args[1], delta = args[2];
    Value dLse = args.size() > 3 ? args[3] : Value();
    loop(0, Sq, [&](Value i) {
      Value acc = splat(f(0.0f));
      for (int64_t c = 0; c < Dv; c += kLanes) {
        Value x = loadVectorF32(o, ValueRange{bi, h, i, idx(c)});
        Value y = loadVectorF32(dO, ValueRange{bi, h, i, idx(c)});
        acc = vector::FMAOp::create(b, x, y, acc);
      }
      Value sum =
          vector::ReductionOp::create(b, vector::CombiningKind::ADD, acc,
                                      Value(), arith::FastMathFlags::reassoc);
      if (dLse)
        sum = arith::SubFOp::create(
            b, sum, memref::LoadOp::create(b, dLse, ValueRange{bi, h, i}));
      memref::StoreOp::create(b, sum, delta, ValueRange{bi, h, i});
    });
  }

  /// P = exp(S' - LSE) and dS = P * (dP - Delta) * dS'/dS of the
  /// rows x 32 tile of rows i0.. and key tile t of the block (keys from
  /// j0) into pBuf and dsBuf (0 outside each row's [lo, hi); rows past Sq
  /// see no key, so that they add no capture gradient); the task's rows of
  /// the float captures' partial gradients receive theirs. `common`: qT,
  /// K, V, dOT, lse, delta; `rest`: pBuf, dsBuf, the block's K^T and V^T
  /// ([1, 1, tiles, D or Dv, 32]), bi, h, j0, i0, limit, task, t.
  void probabilities(ArrayRef<Value> common, ArrayRef<Value> caps,
                     ArrayRef<Value> partials, ArrayRef<Value> rest) {
    Value qT = common[0], dOT = common[3], lse = common[4], delta = common[5];
    Value pBuf = rest[0], dsBuf = rest[1], ktTile = rest[2], vtTile = rest[3],
          bi = rest[4], h = rest[5], j0 = rest[6], i0 = rest[7],
          limit = rest[8], task = rest[9], t = rest[10];
    Value queryTile = arith::DivUIOp::create(b, i0, idx(rows)), zero = idx(0);
    storeTile(tileProduct(qT, {bi, h, queryTile}, ktTile, zero, zero, t), pBuf);
    storeTile(tileProduct(dOT, {bi, h, queryTile}, vtTile, zero, zero, t),
              dsBuf);
    Value whole =
        masks.isWhole(b, limit, i0, rows, j0, kCols, /*existsOnly=*/true);
    forRows(i0, [&](Value r, Value i) {
      MaskTiles::RowRange range =
          masks.rowRange(b, limit, i, /*existsOnly=*/true);
      SmallVector<Value> in = keyMaskUnlessWhole(whole, j0, range.lo, range.hi);
      Value l =
          splat(memref::LoadOp::create(b, lse, ValueRange{bi, h, range.row}));
      Value d =
          splat(memref::LoadOp::create(b, delta, ValueRange{bi, h, range.row}));
      for (int64_t w = 0; w < 2; ++w) {
        SmallVector<Value, 2> at = {r, idx(w * kLanes)};
        Value s = vector::LoadOp::create(b, vec, pBuf, at);
        Value dp = vector::LoadOp::create(b, vec, dsBuf, at);
        Scores sc = scoresOf(caps, s, in[w], bi, h, range.row, j0, w,
                             /*prescaled=*/true);
        Value p = recomputedP(sc, l);
        // dS' = P (dP - Delta), through the score_mod's adjoint to dS.
        Value ds = arith::MulFOp::create(b, p, arith::SubFOp::create(b, dp, d));
        if (adjointBlock) {
          SmallVector<Value> bound = {sc.scaled, bi, h, range.row, sc.keys};
          bound.append(caps.begin(), caps.begin() + numScoreCaptures);
          bound.push_back(ds);
          SmallVector<Value> adjoints =
              widenBlock(b, b.getLoc(), *adjointBlock, bound, sc.keep);
          // (0 where dS' is 0: buildScoreModAdjoints.)
          ds = broadcastToLanes(b, b.getLoc(), adjoints.front());
          if (!partials.empty())
            accumulateCaptureGrads(partials, task, adjoints, sc.keep);
        }
        vector::StoreOp::create(b, p, pBuf, at);
        vector::StoreOp::create(b, ds, dsBuf, at);
      }
    });
  }

  /// accumulateTransposed(args[0..2], {args[3], args[4]}, args[5..8])
  /// as a call of one function per operand types: dK's and dV's (D = Dv)
  /// share it, which took mha_causal's JIT work from 1.93 to 1.81 G
  /// instructions (the backward ran as fast: 4 process pairs).
  void callAccumulateTransposed(ArrayRef<Value> args) {
    std::string name = "__attnc_flash_accumulate_transposed";
    for (Value v : args.take_front(3))
      name += "_" + shapeName(v);
    auto module = parent->getParentOfType<ModuleOp>();
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn)
      fn = outline(parent, name, ValueRange(args).getTypes(),
                   [&](ArrayRef<Value> a) {
                     accumulateTransposed(a[0], a[1], a[2], {a[3], a[4]}, a[5],
                                          a[6], a[7], a[8]);
                   });
    func::CallOp::create(b, fn, args);
  }

  /// Zeros the rows of split `split`'s dQ copy for the heads of KV head g.
  void zeroCopies(Value copies, Value split, Value bi, Value g) {
    int64_t group = H / Hkv, padded = shapeOf(copies)[3];
    Value zeros = splat(f(0.0f));
    loop(0, group, [&](Value member) {
      Value h = arith::AddIOp::create(
          b, arith::MulIOp::create(b, g, idx(group)), member);
      loop(0, padded, [&](Value i) {
        loop(idx(0), idx(D), kLanes, [&](Value c) {
          vector::StoreOp::create(b, zeros, copies,
                                  ValueRange{split, bi, h, i, c});
        });
      });
    });
  }

  /// The key blocks of blockTiles key tiles each.
  int64_t keyBlocks() const { return (tiles + blockTiles - 1) / blockTiles; }

  /// The query rows [first, end) that can see key tile t (keys from jt on;
  /// first a multiple of rows).
  std::pair<Value, Value> rowsSeeing(Value jt) {
    return masks.rowsSeeing(b, jt, kCols, rows);
  }

  /// The dK and dV rows of key block `block` of (bi, g), and its dS K terms
  /// of dQ into split `split`'s copy; `task` owns a partial row of the
  /// capture gradients.
  void keyBlockTask(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                    Value g, Value block, Value split, Value task) {
    Value qT = args[0], dOT = args[3], dK = args[6], dV = args[7];
    Value k = args[8], copies = args[9];
    Value lengths = captureBase > 10 ? args[10] : Value();
    // P, dS, dK^T and dV^T in key tiles ([tiles, chunk rows, 32], [tiles,
    // D or Dv, 32]).
    Value pBuf = scratch[0], dsBuf = scratch[1], dkBuf = scratch[2],
          dvBuf = scratch[3], ktTile = scratch[4], vtTile = scratch[5],
          kChunks = scratch[6];
    Value tile0 = arith::MulIOp::create(b, block, idx(blockTiles));
    Value j0 = arith::MulIOp::create(b, tile0, idx(kCols));
    zero(dkBuf);
    zero(dvBuf);
    // Keys of the block.
    Value valid = arith::MinUIOp::create(
        b, idx(blockTiles * kCols), arith::SubIOp::create(b, idx(Skv), j0));
    // K^T and V^T of this key block only (the tile products' B operands):
    // packed whole, they took 2 Skv D floats per KV head (128 MB at S =
    // 16384, D = 128, 8 heads). And K in column chunks of 32 for dQ's
    // product, which reads a chunk's keys as one sequential stream: read
    // from K's rows (512 bytes apart at D = 128), its loop took 13% more
    // time with 128-key blocks than with 32 (perf, 1 thread).
    transposeTiles(k, ktTile, bi, g, tile0);
    transposeTiles(args[2], vtTile, bi, g, tile0);
    copyColumnChunks(k, bi, g, j0, valid, kChunks, {idx(0), idx(0)});
    Value limit = masks.keyLimit(b, lengths, bi);
    // Keys from `seen` on are seen by no row (their tiles are skipped).
    Value seen = masks.seenKeysEnd(b, limit, j0);
    auto tileStart = [&](Value t) {
      return arith::AddIOp::create(b, j0,
                                   arith::MulIOp::create(b, t, idx(kCols)));
    };
    auto tileSeen = [&](Value jt) {
      return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, jt, seen);
    };
    Value iStart = rowsSeeing(j0).first,
          iEnd = rowsSeeing(tileStart(idx(blockTiles - 1))).second;
    int64_t group = H / Hkv;
    loop(0, group, [&](Value member) {
      Value h = arith::AddIOp::create(
          b, arith::MulIOp::create(b, g, idx(group)), member);
      // P and dS of up to kChunkTiles query tiles, then their dQ terms,
      // then their dV and dK terms in one pass per key tile.
      loop(iStart, iEnd, kChunkTiles * rows, [&](Value c0) {
        Value cEnd = arith::MinUIOp::create(
            b, iEnd, arith::AddIOp::create(b, c0, idx(kChunkTiles * rows)));
        loop(c0, cEnd, rows, [&](Value i0) {
          Value at = arith::SubIOp::create(b, i0, c0);
          loop(0, blockTiles, [&](Value t) {
            Value pTile = view(pBuf, {t}, at, rows),
                  dsTile = view(dsBuf, {t}, at, rows);
            Value jt = tileStart(t);
            auto [first, end] = rowsSeeing(jt);
            Value live = arith::AndIOp::create(
                b, tileSeen(jt),
                arith::AndIOp::create(
                    b,
                    arith::CmpIOp::create(b, arith::CmpIPredicate::uge, i0,
                                          first),
                    arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i0,
                                          end)));
            auto ifOp = scf::IfOp::create(b, live, /*withElseRegion=*/true);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            probabilities(
                args.take_front(6), args.slice(captureBase, captures.size()),
                args.drop_front(partialBase),
                {pTile, dsTile, ktTile, vtTile, bi, h, jt, i0, limit, task, t});
            // Only dQ's product reads a tile no row sees.
            b.setInsertionPointToStart(ifOp.elseBlock());
            storeTile(SmallVector<Value>(2 * rows, splat(f(0.0f))), dsTile);
          });
        });
        // dQ += dS K, a column chunk of K at a time over the chunk's query
        // tiles (the other way round, each tile over all of K's chunks, ran
        // the backward 9% slower at S = 2048, D = 128: interleaved A/B).
        forColumns(D, [&](Value col, int64_t n) {
          loop(c0, cEnd, rows, [&](Value i0) {
            // Causal: no row of the tile sees a key past i0 + rows - 1.
            Value keys = valid;
            if (masks.causal)
              keys = arith::MinUIOp::create(
                  b, keys,
                  arith::SubIOp::create(
                      b, arith::AddIOp::create(b, i0, idx(rows)), j0));
            // The tile's rows of dS, [blockTiles, rows, 32].
            SmallVector<OpFoldResult> offsets = {
                b.getIndexAttr(0), arith::SubIOp::create(b, i0, c0).getResult(),
                b.getIndexAttr(0)};
            SmallVector<OpFoldResult> sizes = {b.getIndexAttr(blockTiles),
                                               b.getIndexAttr(rows),
                                               b.getIndexAttr(kCols)};
            SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
            Value dsRows =
                memref::SubViewOp::create(b, dsBuf, offsets, sizes, strides);
            rowsTimesKeysColumns(view(copies, {split, bi, h}, i0, rows), dsRows,
                                 kChunks, idx(0), idx(0), idx(0), keys, Value(),
                                 col, n);
          });
        });
        // dV^T += dO^T P and dK^T += Q^T dS per key tile, over the chunk's
        // query tiles that see it.
        loop(0, blockTiles, [&](Value t) {
          Value jt = tileStart(t);
          auto [first, end] = rowsSeeing(jt);
          Value lo = arith::MaxUIOp::create(b, c0, first),
                hi = arith::MinUIOp::create(b, cEnd, end);
          Value any = arith::AndIOp::create(
              b, tileSeen(jt),
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, lo, hi));
          auto ifOp = scf::IfOp::create(b, any, /*withElseRegion=*/false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          Value count = arith::DivUIOp::create(
              b,
              arith::AddIOp::create(b, arith::SubIOp::create(b, hi, lo),
                                    idx(rows - 1)),
              idx(rows));
          Value row0 = arith::SubIOp::create(b, lo, c0);
          for (auto [zt, c, packed] :
               {std::tuple(dvBuf, pBuf, dOT), std::tuple(dkBuf, dsBuf, qT)})
            callAccumulateTransposed({zt, c, packed, bi, h,
                                      arith::DivUIOp::create(b, lo, idx(rows)),
                                      count, t, row0});
        });
      });
    });
    loop(idx(0), valid, 1, [&](Value j) {
      Value key = arith::AddIOp::create(b, j0, j);
      Value t = arith::DivUIOp::create(b, j, idx(kCols)),
            lane = arith::RemUIOp::create(b, j, idx(kCols));
      for (auto [grad, buffer, width] :
           {std::tuple(dK, dkBuf, D), std::tuple(dV, dvBuf, Dv)})
        copyLoop(0, width, [&, grad = grad, buffer = buffer](Value c) {
          storeScalar(memref::LoadOp::create(b, buffer, ValueRange{t, c, lane}),
                      grad, ValueRange{bi, g, key, c});
        });
    });
  }

  /// The gradient of a capture: the rows of its partial buffer summed in
  /// task order, in the capture's shape and element type.
  Value sumPartials(Value partial, Value capture) {
    ArrayRef<int64_t> p = shapeOf(partial);
    loop(1, p[0], [&](Value t) {
      loop(0, p[1], [&](Value e) {
        Value sum = arith::AddFOp::create(
            b, memref::LoadOp::create(b, partial, ValueRange{idx(0), e}),
            memref::LoadOp::create(b, partial, ValueRange{t, e}));
        memref::StoreOp::create(b, sum, partial, ValueRange{idx(0), e});
      });
    });
    auto type = cast<RankedTensorType>(capture.getType());
    Value grad = alloc(type.getShape(), type.getElementType());
    Value flat = grad;
    if (type.getRank() > 1) {
      ReassociationIndices all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      flat = memref::CollapseShapeOp::create(
          b, grad, ArrayRef<ReassociationIndices>{all});
    }
    loop(0, p[1], [&](Value e) {
      Value x = memref::LoadOp::create(b, partial, ValueRange{idx(0), e});
      if (!type.getElementType().isF32())
        x = arith::TruncFOp::create(b, type.getElementType(), x);
      // A 0-d capture's one element has no index.
      memref::StoreOp::create(b, x, flat,
                              type.getRank() ? ValueRange{e} : ValueRange{});
    });
    return grad;
  }

  /// Adds the adjoints of the capture reads (adjoint block results after
  /// the first: per read, the adjoint then the read's indices) to the
  /// task's partial gradients; lanes outside `keep` add nothing. A read at
  /// the same element in every lane (ALiBi's slopes[h]) adds one lane sum.
  void accumulateCaptureGrads(ArrayRef<Value> partials, Value task,
                              ArrayRef<Value> adjoints, Value keep) {
    Location loc = b.getLoc();
    size_t next = 1;
    for (const CaptureRead &read : reads) {
      // (In f32 whatever the capture's type: buildScoreModAdjoints.)
      Value adjoint = arith::SelectOp::create(
          b, keep, broadcastToLanes(b, loc, adjoints[next]), splat(f(0.0f)));
      ArrayRef<Value> indices = adjoints.slice(next + 1, read.rank);
      next += 1 + read.rank;
      ArrayRef<int64_t> shape = shapeOf(captures[read.capture]);
      bool uniform = llvm::none_of(
          indices, [](Value v) { return isa<VectorType>(v.getType()); });
      // The element's offset in the flattened capture.
      Value linear = uniform ? idx(0) : broadcastToLanes(b, loc, idx(0));
      int64_t stride = 1;
      for (int64_t d = read.rank - 1; d >= 0; --d) {
        Value index =
            uniform ? indices[d] : broadcastToLanes(b, loc, indices[d]);
        Value step =
            uniform ? idx(stride) : broadcastToLanes(b, loc, idx(stride));
        linear = arith::AddIOp::create(b, linear,
                                       arith::MulIOp::create(b, index, step));
        stride *= shape[d];
      }
      Value partial = partials[partialIndex(read.capture)];
      auto add = [&](Value at, Value value) {
        Value old = memref::LoadOp::create(b, partial, ValueRange{task, at});
        memref::StoreOp::create(b, arith::AddFOp::create(b, old, value),
                                partial, ValueRange{task, at});
      };
      if (uniform) {
        add(linear, vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                                adjoint, Value(),
                                                arith::FastMathFlags::reassoc));
        continue;
      }
      // Lanes one at a time (several may hit one element); a masked lane
      // adds 0 at a clamped, in-bounds offset.
      Value last = broadcastToLanes(b, loc, idx(stride - 1));
      linear = arith::MinSIOp::create(
          b,
          arith::MaxSIOp::create(b, linear, broadcastToLanes(b, loc, idx(0))),
          last);
      for (int64_t lane = 0; lane < kLanes; ++lane)
        add(vector::ExtractOp::create(b, linear, lane),
            vector::ExtractOp::create(b, adjoint, lane));
    }
  }

  /// Where float score capture `capture`'s partial buffer is among them.
  size_t partialIndex(unsigned capture) {
    return llvm::find(floatCaptures, capture) - floatCaptures.begin();
  }

  /// The score_mod's reverse sweep as scalar code in a block of its own:
  /// (score, b, h, i, j, captures..., seed) -> (seed * d score_mod / d score,
  /// then per read of a float capture: its adjoint and its indices), which
  /// the kernel widens to 16 lanes like the region itself. The block ends
  /// in a func.return only as a holder of these values (never verified).
  void buildAdjointBlock() {
    adjointRegion = std::make_unique<Region>();
    adjointBlock = new Block();
    adjointRegion->push_back(adjointBlock);
    for (BlockArgument arg : scoreMod.front().getArguments())
      adjointBlock->addArgument(arg.getType(), arg.getLoc());
    Value seed = adjointBlock->addArgument(f32, b.getLoc());
    // The region has no parent op to take the context from.
    OpBuilder inner(b.getContext());
    inner.setInsertionPointToStart(adjointBlock);
    ScoreModAdjoints adjoints =
        buildScoreModAdjoints(inner, b.getLoc(), scoreMod,
                              adjointBlock->getArguments().drop_back(), seed);
    SmallVector<Value> results = {adjoints.scoreAdjoint};
    for (CaptureAdjoint &read : adjoints.captures) {
      reads.push_back({read.capture, read.indices.size()});
      results.push_back(read.adjoint);
      results.append(read.indices);
    }
    func::ReturnOp::create(inner, b.getLoc(), results);
  }

  /// The query tiles whose P and dS one pass of accumulateTransposed sums
  /// into a key block's dK and dV (two [blockTiles, 8 tiles x rows, 32] f32
  /// scratch buffers).
  static constexpr int64_t kChunkTiles = 8;
  const int64_t blockTiles; // key tiles per key block

  attn::AttentionGradOp op;
  int64_t splits; // see backwardSplits
  std::unique_ptr<Region> adjointRegion;
  Block *adjointBlock = nullptr;
  struct CaptureRead {
    unsigned capture; // among the score captures
    size_t rank;      // the number of indices
  };
  SmallVector<CaptureRead> reads;
  SmallVector<unsigned> floatCaptures; // score captures with a gradient
  size_t partialBase = 0; // where their partial buffers start in task args
};

} // namespace

bool canLowerToFlashCpu(attn::AttentionGradOp op, attn::CpuPlanAttr plan) {
  // Float captures take a partial gradient per task: at most 2^24 floats
  // (64 MB) of them, else the unfused lowering.
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
  int64_t tasks = q[0] * k[1] * plan.getSplits();
  int64_t partialFloats = 0;
  for (Value capture : op.getScoreCaptures())
    if (isFloatTensor(capture))
      partialFloats +=
          tasks * cast<ShapedType>(capture.getType()).getNumElements();
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod()) && partialFloats <= (1 << 24) &&
         q[3] % kLanes == 0 && shapeOf(op.getValue())[3] % kLanes == 0;
}

FailureOr<SmallVector<Value>> lowerToFlashBackward(RewriterBase &rewriter,
                                                   attn::AttentionGradOp op,
                                                   attn::CpuPlanAttr plan,
                                                   int64_t vectorBits) {
  if (!canLowerToFlashCpu(op, plan))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  SmallVector<Value> results = FlashBackward(b, op, plan, vectorBits).build();
  rewriter.replaceOp(op, results);
  return results;
}

} // namespace attnc
