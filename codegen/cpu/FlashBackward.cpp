// The FlashAttention-2 CPU backward (see FlashBackward.h and
// FlashAttention.h).
#include "codegen/cpu/FlashBackward.h"
#include "codegen/cpu/FlashAttention.h"

#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

SmallVector<Value> FlashBackward::build() {
  Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
        v = bufferOf(op.getValue()), o = bufferOf(op.getOutput()),
        lse = bufferOf(op.getLse()), dO = bufferOf(op.getOutputGrad());
  // With the entropy's gradient folded in, the LSE gradient is the
  // entropy op's, which entropyCoefficients accounts for.
  Value dLse =
      op.getLseGrad() && !entropyBuf ? bufferOf(op.getLseGrad()) : Value();
  Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
  Value dQ = alloc({B, H, Sq, D}, elementTypeOf(op.getQuery())),
        dK = alloc({B, Hkv, Skv, D}, elementTypeOf(op.getKey())),
        dV = alloc({B, Hkv, Skv, Dv}, elementTypeOf(op.getValue()));

  int64_t qTiles = (Sq + rows - 1) / rows;
  int64_t kvTasks = kvTaskCount(op, plan);
  SmallVector<Value> partials = zeroedPartials(kvTasks);

  // Every query tile of Q and dO packed once ([B, H, tile, D, rows]): the
  // tile products and the transposed dK/dV products read them; packing
  // inside the tasks would repeat it per key tile. Q times the scale, as
  // the forward packs it: the recomputed scores are then the forward's,
  // bit for bit (with Q scaled in the forward only, an ALiBi slope's
  // gradient read errors up to 7x larger), and dK = dS^T (scale Q).
  // With dot products: bf16 and unscaled (dK^T is scaled when stored),
  // the scores taken from Q's rows as the dot forward takes them.
  Type packed = dot ? b.getBF16Type() : f32;
  std::optional<float> qScale =
      dot ? std::nullopt : std::optional<float>(scale);
  Value qT = alloc({B, H, qTiles, D, rows}, packed),
        dOT = alloc({B, H, qTiles, Dv, rows}, packed);
  // On AMX, Q's and dO's rows in whole query tiles as well (tile loads).
  Value qRows = q, dORows = dO;
  SmallVector<Value> toPack = {q, qT, dO, dOT};
  if (amx) {
    qRows = alloc({B, H, qTiles * rows, D}, packed);
    dORows = alloc({B, H, qTiles * rows, Dv}, packed);
    toPack.append({qRows, dORows});
    markUsesAmx(op);
  }
  forEachHead(amx   ? "__attnc_flash_pack_amx"
              : dot ? "__attnc_flash_pack_bf16"
                    : "__attnc_flash_pack",
              toPack, H, [&](ArrayRef<Value> args, Value bi, Value h) {
                packTiles(args[0], args[1], bi, h, qScale);
                packTiles(args[2], args[3], bi, h);
                if (amx) {
                  padRows(args[0], args[4], bi, h);
                  padRows(args[2], args[5], bi, h);
                }
              });
  // Delta from O in f32 is exact enough; from a narrower O, the float
  // captures' gradients that sum over a row's keys (terms that cancel: an
  // ALiBi slope's read errors of 0.2-1) need it from P and dP (with K^T
  // and V^T packed whole for it; the pass over key tiles packs its own
  // tile). A capture each of a row's keys reads apart (bias[h, i, j],
  // rel[h, j - i + c]: isReadOncePerRow) sums no row: its gradient's errors
  // from the rounded O are dK's, 2-3e-3 of the largest in bf16 (3e-7 with
  // this pass), and the pass cost a [Sq, Skv] bias's bf16 backward a fifth
  // of its time.
  // (An f32 O saved by the forward would not do for bf16: its P V takes P
  // rounded to bf16, so dO . O is not sum_j P dP with this kernel's f32 P.
  // Tried: ALiBi slopes' gradients then read errors of 0.07-0.15.)
  // A capture read per head (slopes[h]: readsPerHead) sums every row's
  // terms too, but its gradient's error from the rounded O is a sum of
  // the rows': each row's Delta error times sum_j P dS'/dC, which the
  // main pass sums per row beside sum_j P dP (the exact Delta) for
  // correctRowSums to take away (correctedReads) instead of this pass.
  // Not with the entropy's coefficients, which shift Delta too. (A bf16
  // ALiBi forward+backward with learnt slopes, B=1, H=8, S=2048, causal,
  // Zen 5, 2 threads, took 30.3 ms at D=64 and 53.9 ms at D=128 with the
  // pass, 25.4 and 43.5 ms so, before the reads per head summed their
  // lanes in scratch; 20.8 and 38.3 ms without ALiBi.)
  bool narrowOutput = !elementTypeOf(op.getOutput()).isF32();
  auto corrected = [&](unsigned k) {
    if (entropyBuf)
      return false;
    for (auto [r, read] : llvm::enumerate(reads))
      if (read.capture == k && !readsPerHead(r))
        return false;
    return true;
  };
  bool exactDeltas =
      narrowOutput && llvm::any_of(floatCaptures, [&](unsigned k) {
        return !isReadOncePerRow(scoreMod, k) && !corrected(k);
      });
  if (narrowOutput && !exactDeltas)
    for (auto [r, read] : llvm::enumerate(reads))
      if (!isReadOncePerRow(scoreMod, read.capture))
        correctedReads.push_back(r);
  // With dot products, P and dP from Q's and dO's rows and whole K and V
  // in column pairs.
  Value delta =
      !exactDeltas ? rowDeltas(o, dO, dLse)
      : dot ? exactRowDeltas(qRows, pairedColumnsOf(k), pairedColumnsOf(v),
                             dORows, lse, dLse, lengths)
            : exactRowDeltas(qT, transposed(k), transposed(v), dOT, lse, dLse,
                             lengths);
  Value coefficients = entropyBuf ? entropyCoefficients(lse, delta) : Value();
  SmallVector<Value> common = {qT, k, v, dOT, lse, delta};
  // The dQ copies of the splits ([splits, B, H, rows * qTiles, D]).
  Value dqCopies = alloc({splits, B, H, qTiles * rows, D});
  // dK and dV per key tile, dQ's terms into the split's copy: one task
  // per (batch, KV head, split), or with key tasks one per split, over
  // every (batch, KV head) in turn (so that no two tasks share a key).
  SmallVector<Value> captured1(common);
  captured1.append({dK, dV, k, dqCopies});
  if (lengths)
    captured1.push_back(lengths);
  appendCaptures(captured1);
  // Per split and row: sum_j P dP, then per corrected read sum_j P dS'/dC.
  Value rowSums;
  if (!correctedReads.empty()) {
    rowSums = alloc({splits, B, H, Sq, 1 + int64_t(correctedReads.size())});
    Value flat = memref::CollapseShapeOp::create(
        b, rowSums, ArrayRef<ReassociationIndices>{{0, 1, 2, 3, 4}});
    loop(0, shapeOf(rowSums)[0] * B * H * Sq * shapeOf(rowSums)[4],
         [&](Value e) { memref::StoreOp::create(b, f(0.0f), flat, e); });
    rowSumsArg = captured1.size();
    captured1.push_back(rowSums);
  }
  if (coefficients) {
    entropyArg = captured1.size();
    captured1.push_back(coefficients);
  }
  partialBase = captured1.size();
  captured1.append(partials);
  if (dot) {
    rowMajorArg = captured1.size();
    captured1.append({qRows, dORows});
  }
  parallelTasks(
      parent, "__attnc_flash_backward_kv", captured1, kvTasks,
      [&](ArrayRef<Value>) {
        SmallVector<Value> buffers =
            dot ? dotScratch()
                : SmallVector<Value>{
                      scratchBuffer({blockTiles, kChunkTiles * rows, kCols}),
                      scratchBuffer({blockTiles, kChunkTiles * rows, kCols}),
                      scratchBuffer({blockTiles, D, kCols}),
                      scratchBuffer({blockTiles, Dv, kCols}),
                      scratchBuffer({1, 1, blockTiles, D, kCols}),
                      scratchBuffer({1, 1, blockTiles, Dv, kCols}),
                      scratchBuffer({1, 1, (D / kLanes + 1) / 2,
                                     blockTiles * kCols, 2 * kLanes})};
        if (hasReadsPerHead()) {
          headSumsScratch = buffers.size();
          buffers.push_back(scratchBuffer({int64_t(reads.size()), kLanes}));
        }
        if (!correctedReads.empty()) {
          rowVecsScratch = buffers.size();
          buffers.push_back(scratchBuffer(
              {rows, 1 + int64_t(correctedReads.size()), kLanes}));
        }
        return buffers;
      },
      [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
        bindMaskInputs(args);
        auto pairTask = [&](Value split, Value bg) {
          Value bi = arith::DivUIOp::create(b, bg, idx(Hkv)),
                g = arith::RemUIOp::create(b, bg, idx(Hkv));
          zeroCopies(args[9], split, bi, g);
          loop(split, idx(keyBlocks()), splits, [&](Value block) {
            keyBlockTask(args, scratch, bi, g, block, split, t);
          });
        };
        if (keyTasks)
          loop(0, B * Hkv, [&](Value bg) { pairTask(t, bg); });
        else
          pairTask(arith::RemUIOp::create(b, t, idx(splits)),
                   arith::DivUIOp::create(b, t, idx(splits)));
      });
  sumQueryGradCopies(dqCopies, dQ);
  if (rowSums)
    correctRowSums(rowSums, delta, dLse, partials);
  SmallVector<Value> results = {tensorOf(dQ, op.getQueryGrad().getType()),
                                tensorOf(dK, op.getKeyGrad().getType()),
                                tensorOf(dV, op.getValueGrad().getType())};
  llvm::append_range(
      results, captureGrads(partials, op.getScoreCapturesGrad().getTypes()));
  return results;
}

void FlashBackward::sumQueryGradCopies(Value dqCopies, Value dQ) {
  forEachHead(
      "__attnc_flash_dq", {dqCopies, dQ}, H,
      [&](ArrayRef<Value> args, Value bi, Value h) {
        loop(0, Sq, [&](Value i) {
          loop(idx(0), idx(D), kLanes, [&](Value c) {
            Value sum = vector::LoadOp::create(b, vec, args[0],
                                               ValueRange{idx(0), bi, h, i, c});
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
}

Value FlashBackward::rowDeltas(Value o, Value dO, Value dLse) {
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

Value FlashBackward::entropyCoefficients(Value lse, Value delta) {
  Value coefficients =
      entropyCotangents(lse, entropyGradBuf, meanEntropyGradBuf);
  loop(0, B * H * Sq, [&](Value n) {
    SmallVector<Value> at = rowOf(n);
    Value l = memref::LoadOp::create(b, lse, at);
    Value seen =
        arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, l, f(kNegInf));
    Value g = memref::LoadOp::create(b, coefficients, at);
    Value mu =
        arith::SubFOp::create(b, l, memref::LoadOp::create(b, entropyBuf, at));
    Value shift = arith::SelectOp::create(
        b, seen, arith::MulFOp::create(b, g, mu), f(0.0f));
    memref::StoreOp::create(
        b,
        arith::SubFOp::create(b, memref::LoadOp::create(b, delta, at), shift),
        delta, at);
  });
  return coefficients;
}

void FlashBackward::rowDeltasOfHead(ArrayRef<Value> args, Value bi, Value h) {
  Value o = args[0], dO = args[1], delta = args[2];
  Value dLse = args.size() > 3 ? args[3] : Value();
  loop(0, Sq, [&](Value i) {
    // One FMA after another over the columns from 0, the order in which
    // tileProduct sums dP = dO V^T: where a row's P is one-hot (large
    // logits), O is that key's V row, and dP - Delta is then exactly 0 for
    // it, as in exact arithmetic. A vector sum rounds differently, and the
    // difference, times keys of size 1e3, was dQ's and dK's whole error
    // (3.6e-4 relative at inputs x1e3, 3.6e-3 at x1e4). Sq x Dv scalar FMAs
    // are noise beside the backward's products.
    auto dLoop =
        scf::ForOp::create(b, idx(0), idx(Dv), idx(1), ValueRange{f(0.0f)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(dLoop.getBody());
      Value c = dLoop.getInductionVar();
      Value x = loadF32(dO, ValueRange{bi, h, i, c});
      Value y = loadF32(o, ValueRange{bi, h, i, c});
      scf::YieldOp::create(b, ValueRange{math::FmaOp::create(
                                  b, x, y, dLoop.getRegionIterArgs()[0])});
    }
    Value sum = dLoop.getResult(0);
    if (dLse)
      sum = arith::SubFOp::create(
          b, sum, memref::LoadOp::create(b, dLse, ValueRange{bi, h, i}));
    memref::StoreOp::create(b, sum, delta, ValueRange{bi, h, i});
  });
}

void FlashBackward::probabilities(ArrayRef<Value> common, ArrayRef<Value> caps,
                                  ArrayRef<Value> partials,
                                  ArrayRef<Value> rest, Value rowVecs,
                                  Value headSums) {
  Value qT = common[0], dOT = common[3], lse = common[4], delta = common[5];
  Value pBuf = rest[0], dsBuf = rest[1], ktTile = rest[2], vtTile = rest[3],
        bi = rest[4], h = rest[5], j0 = rest[6], i0 = rest[7], limit = rest[8],
        task = rest[9], t = rest[10];
  Value queryTile = arith::DivUIOp::create(b, i0, idx(rows)), zero = idx(0);
  if (dot) {
    rowProducts(rest[12], ktTile, {}, bi, h, i0, t, pBuf);
    rowProducts(rest[13], vtTile, {}, bi, h, i0, t, dsBuf);
  } else {
    storeTile(tileProduct(qT, {bi, h, queryTile}, ktTile, zero, zero, t), pBuf);
    storeTile(tileProduct(dOT, {bi, h, queryTile}, vtTile, zero, zero, t),
              dsBuf);
  }
  Value whole =
      masks.isWhole(b, limit, i0, rows, j0, kCols, /*existsOnly=*/true);
  forRows(i0, [&](Value r, Value i) {
    MaskTiles::RowRange range =
        masks.rowRange(b, limit, i, /*existsOnly=*/true);
    SmallVector<Value> in = keyMaskUnlessWhole(whole, j0, range.lo, range.hi);
    Value l = rowLse(lse, bi, h, range.row);
    Value d =
        splat(memref::LoadOp::create(b, delta, ValueRange{bi, h, range.row}));
    Value g = entropyBuf ? splat(memref::LoadOp::create(
                               b, rest[11], ValueRange{bi, h, range.row}))
                         : Value();
    // The row's terms for correctRowSums, over the tile's 32 keys.
    SmallVector<Value> sums;
    for (int64_t w = 0; w < 2; ++w) {
      SmallVector<Value, 2> at = {r, idx(w * kLanes)};
      Value s = vector::LoadOp::create(b, vec, pBuf, at);
      Value dp = vector::LoadOp::create(b, vec, dsBuf, at);
      Scores sc = scoresOf(caps, s, in[w], bi, h, range.row, j0, w,
                           /*prescaled=*/!dot);
      Value p = recomputedP(sc, l);
      // dS' = P (dP - Delta), through the score_mod's adjoint to dS.
      Value centered = arith::SubFOp::create(b, dp, d);
      if (g) {
        // - g S' where P != 0 (S' = -inf has P = 0: never 0 * inf).
        Value take = arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, p,
                                           splat(f(0.0f)));
        centered = arith::SubFOp::create(
            b, centered,
            arith::SelectOp::create(b, take,
                                    arith::MulFOp::create(b, g, sc.modified),
                                    splat(f(0.0f))));
      }
      Value ds = scoreGrad(sc, caps, bi, h, range.row,
                           arith::MulFOp::create(b, p, centered), partials,
                           task, headSums);
      vector::StoreOp::create(b, p, pBuf, at);
      vector::StoreOp::create(b, ds, dsBuf, at);
      if (!rowVecs)
        continue;
      SmallVector<Value> terms = {arith::SelectOp::create(
          b, sc.keep, arith::MulFOp::create(b, p, dp), splat(f(0.0f)))};
      llvm::append_range(
          terms, readAdjoints(sc, caps, bi, h, range.row, p, correctedReads));
      if (w == 0)
        sums = terms;
      else
        for (auto [sum, term] : llvm::zip(sums, terms))
          sum = arith::AddFOp::create(b, sum, term);
    }
    for (auto [n, sum] : llvm::enumerate(sums)) {
      SmallVector<Value> at = {r, idx(n), idx(0)};
      vector::StoreOp::create(
          b,
          arith::AddFOp::create(b, vector::LoadOp::create(b, vec, rowVecs, at),
                                sum),
          rowVecs, at);
    }
  });
  if (dot)
    dotPairRows(pBuf, dsBuf, rest[14], rest[15], rest[16]);
}

void FlashBackward::correctRowSums(Value rowSums, Value delta, Value dLse,
                                   ArrayRef<Value> partials) {
  // The main pass summed P (dP - Delta~) dS'/dC: the sum over the rows of
  // (Delta~_i - Delta_i) sum_j P dS'/dC makes it P (dP - Delta) dS'/dC.
  // One (batch, head) at a time in row order (deterministic), into the
  // first partial row of each corrected read's capture.
  size_t n = correctedReads.size();
  loop(0, B, [&](Value bi) {
    loop(0, H, [&](Value h) {
      SmallVector<Value> zeros(n, f(0.0f));
      auto rowLoop = scf::ForOp::create(b, idx(0), idx(Sq), idx(1), zeros);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(rowLoop.getBody());
        Value i = rowLoop.getInductionVar();
        auto sumOf = [&](int64_t at) {
          Value sum = f(0.0f);
          for (int64_t t = 0; t < splits; ++t)
            sum = arith::AddFOp::create(
                b, sum,
                memref::LoadOp::create(b, rowSums,
                                       ValueRange{idx(t), bi, h, i, idx(at)}));
          return sum;
        };
        // Delta~ + dLSE is rowsum(dO O); sum_j P dP is the exact one's.
        Value error = arith::SubFOp::create(
            b, memref::LoadOp::create(b, delta, ValueRange{bi, h, i}),
            sumOf(0));
        if (dLse)
          error = arith::AddFOp::create(
              b, error, memref::LoadOp::create(b, dLse, ValueRange{bi, h, i}));
        SmallVector<Value> next;
        for (size_t r = 0; r < n; ++r)
          next.push_back(math::FmaOp::create(b, error, sumOf(1 + r),
                                             rowLoop.getRegionIterArgs()[r]));
        scf::YieldOp::create(b, next);
      }
      for (auto [r, read] : llvm::enumerate(correctedReads)) {
        Value partial = partials[partialIndex(reads[read].capture)];
        SmallVector<Value> at = {idx(0), perHeadOffset(read, bi, h)};
        Value old = memref::LoadOp::create(b, partial, at);
        memref::StoreOp::create(
            b, arith::AddFOp::create(b, old, rowLoop.getResult(r)), partial,
            at);
      }
    });
  });
}

void FlashBackward::callAccumulateTransposed(ArrayRef<Value> args) {
  std::string name = amx   ? "__attnc_flash_accumulate_amx"
                     : dot ? "__attnc_flash_accumulate_pairs"
                           : "__attnc_flash_accumulate_transposed";
  for (Value v : args.take_front(3))
    name += "_" + shapeName(v);
  auto module = parent->getParentOfType<ModuleOp>();
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn)
    fn = outline(parent, name, ValueRange(args).getTypes(),
                 [&](ArrayRef<Value> a) {
                   if (amx)
                     amxAccumulateTransposed(a[0], a[1], a[2], {a[3], a[4]},
                                             a[5], a[6], a[7], a[8]);
                   else if (dot)
                     dotAccumulateTransposed(a[0], a[1], a[2], {a[3], a[4]},
                                             a[5], a[6], a[7], a[8]);
                   else
                     accumulateTransposed(a[0], a[1], a[2], {a[3], a[4]}, a[5],
                                          a[6], a[7], a[8]);
                 });
  func::CallOp::create(b, fn, args);
}

void FlashBackward::zeroCopies(Value copies, Value split, Value bi, Value g) {
  int64_t group = H / Hkv, padded = shapeOf(copies)[3];
  Value zeros = splat(f(0.0f));
  loop(0, group, [&](Value member) {
    Value h = arith::AddIOp::create(b, arith::MulIOp::create(b, g, idx(group)),
                                    member);
    loop(0, padded, [&](Value i) {
      loop(idx(0), idx(D), kLanes, [&](Value c) {
        vector::StoreOp::create(b, zeros, copies,
                                ValueRange{split, bi, h, i, c});
      });
    });
  });
}

std::pair<Value, Value> FlashBackward::rowsSeeing(const KeyBlock &kb,
                                                  Value jt) {
  return masks.rowsSeeing(b, kb.limit, jt, kCols, rows);
}

void FlashBackward::keyBlockTask(ArrayRef<Value> args, ArrayRef<Value> scratch,
                                 Value bi, Value g, Value block, Value split,
                                 Value task) {
  KeyBlock kb = startKeyBlock(args, scratch, bi, g, block, split, task);
  Value iStart = rowsSeeing(kb, kb.j0).first,
        iEnd = rowsSeeing(kb, tileStart(kb, idx(blockTiles - 1))).second;
  int64_t group = H / Hkv;
  loop(0, group, [&](Value member) {
    Value h = arith::AddIOp::create(b, arith::MulIOp::create(b, g, idx(group)),
                                    member);
    // P and dS of up to kChunkTiles query tiles, then their dQ terms,
    // then their dV and dK terms in one pass per key tile.
    loop(iStart, iEnd, kChunkTiles * rows, [&](Value c0) {
      Value cEnd = arith::MinUIOp::create(
          b, iEnd, arith::AddIOp::create(b, c0, idx(kChunkTiles * rows)));
      chunkProbabilities(kb, h, c0, cEnd);
      chunkQueryGrads(kb, h, c0, cEnd);
      chunkKeyGrads(kb, h, c0, cEnd);
    });
  });
  storeKeyGrads(kb);
}

FlashBackward::KeyBlock FlashBackward::startKeyBlock(ArrayRef<Value> args,
                                                     ArrayRef<Value> scratch,
                                                     Value bi, Value g,
                                                     Value block, Value split,
                                                     Value task) {
  KeyBlock kb;
  kb.args = args;
  kb.scratch = scratch;
  kb.bi = bi;
  kb.g = g;
  kb.split = split;
  kb.task = task;
  Value k = args[8];
  Value lengths = op.getLengths() ? args[10] : Value();
  kb.tile0 = arith::MulIOp::create(b, block, idx(blockTiles));
  kb.j0 = arith::MulIOp::create(b, kb.tile0, idx(kCols));
  zero(kb.dkBuf());
  zero(kb.dvBuf());
  // Keys of the block.
  kb.valid = arith::MinUIOp::create(b, idx(blockTiles * kCols),
                                    arith::SubIOp::create(b, idx(Skv), kb.j0));
  // K^T and V^T of this key block only (the tile products' B operands):
  // packed whole, they took 2 Skv D floats per KV head (128 MB at S =
  // 16384, D = 128, 8 heads). And K in column chunks of 32 for dQ's
  // product, which reads a chunk's keys as one sequential stream: read
  // from K's rows (512 bytes apart at D = 128), its loop took 13% more
  // time with 128-key blocks than with 32 (perf, 1 thread).
  // K's and V's rows from the batch's length on as zeros: they may hold
  // anything (a cache's unwritten rows, NaN), and dP = dO V^T and dQ = dS K
  // multiply whole tiles (0 times NaN is NaN).
  kb.limit = masks.keyLimit(b, lengths, bi);
  Value limit = lengths ? kb.limit : Value();
  KeySource keys(k, {}, limit), values(args[2], {}, limit);
  if (dot) {
    dotPairBlock(kb, keys, values);
  } else {
    transposeTiles(keys, kb.ktTile(), bi, g, kb.tile0);
    transposeTiles(values, kb.vtTile(), bi, g, kb.tile0);
    copyColumnChunks(keys, bi, g, kb.j0, kb.valid, kb.kChunks(),
                     {idx(0), idx(0)});
  }
  // Keys from `seen` on are seen by no row (their tiles are skipped).
  kb.seen = masks.seenKeysEnd(b, kb.limit, kb.j0);
  return kb;
}

Value FlashBackward::tileStart(const KeyBlock &kb, Value t) {
  return arith::AddIOp::create(b, kb.j0,
                               arith::MulIOp::create(b, t, idx(kCols)));
}

Value FlashBackward::tileSeen(const KeyBlock &kb, Value jt) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, jt, kb.seen);
}

void FlashBackward::chunkProbabilities(const KeyBlock &kb, Value h, Value c0,
                                       Value cEnd) {
  ArrayRef<Value> args = kb.args;
  Value headSums = headSumsScratch ? kb.scratch[headSumsScratch] : Value();
  Value rowVecs = rowVecsScratch ? kb.scratch[rowVecsScratch] : Value();
  ArrayRef<Value> partials = args.slice(partialBase, floatCaptures.size());
  loop(c0, cEnd, rows, [&](Value i0) {
    Value at = arith::SubIOp::create(b, i0, c0);
    // The block's tiles add to the reads' lane sums and the rows' vector
    // sums, summed once after them.
    if (headSums && !partials.empty())
      zeroHeadSums(headSums);
    if (rowVecs)
      loop(0, rows, [&](Value r) {
        for (int64_t n = 0; n < shapeOf(rowVecs)[1]; ++n)
          vector::StoreOp::create(b, splat(f(0.0f)), rowVecs,
                                  ValueRange{r, idx(n), idx(0)});
      });
    loop(0, blockTiles, [&](Value t) {
      Value pTile = view(kb.pBuf(), {t}, at, rows),
            dsTile = view(kb.dsBuf(), {t}, at, rows);
      Value dsBf = dot ? view(kb.dsBf16(), {t}, at, rows) : Value();
      Value jt = tileStart(kb, t);
      auto [first, end] = rowsSeeing(kb, jt);
      Value live = arith::AndIOp::create(
          b, tileSeen(kb, jt),
          arith::AndIOp::create(
              b, arith::CmpIOp::create(b, arith::CmpIPredicate::uge, i0, first),
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i0, end)));
      auto ifOp = scf::IfOp::create(b, live, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      SmallVector<Value> rest = {
          pTile,       dsTile, kb.ktTile(),
          kb.vtTile(), kb.bi,  h,
          jt,          i0,     kb.limit,
          kb.task,     t,      entropyBuf ? args[entropyArg] : Value()};
      if (dot) {
        Value pairs = arith::DivUIOp::create(b, at, idx(2));
        rest.append({args[rowMajorArg], args[rowMajorArg + 1], dsBf,
                     view(kb.pRowPairs(), {t}, pairs, rows / 2),
                     view(kb.dsRowPairs(), {t}, pairs, rows / 2)});
      }
      probabilities(args.take_front(6),
                    args.slice(captureBase, captures.size()), partials, rest,
                    rowVecs,
                    headSums && !partials.empty() ? headSums : Value());
      // Only dQ's product reads a tile no row sees.
      b.setInsertionPointToStart(ifOp.elseBlock());
      storeTile(SmallVector<Value>(2 * rows, splat(f(0.0f))), dsTile);
      if (dot) {
        Value zeros = arith::ConstantOp::create(
            b, b.getZeroAttr(VectorType::get({kLanes}, b.getBF16Type())));
        loop(0, rows, [&](Value r) {
          for (int64_t w = 0; w < 2; ++w)
            vector::StoreOp::create(b, zeros, dsBf,
                                    ValueRange{r, idx(w * kLanes)});
        });
      }
    });
    if (headSums && !partials.empty())
      flushHeadSums(headSums, partials, kb.task, kb.bi, h);
    if (rowVecs)
      loop(0, rows, [&](Value r) {
        // (A row past Sq summed nothing: its lanes were all dropped.)
        Value i = arith::MinUIOp::create(b, arith::AddIOp::create(b, i0, r),
                                         idx(Sq - 1));
        for (int64_t n = 0; n < shapeOf(rowVecs)[1]; ++n) {
          SmallVector<Value> at = {kb.split, kb.bi, h, i, idx(n)};
          Value sum = vector::ReductionOp::create(
              b, vector::CombiningKind::ADD,
              vector::LoadOp::create(b, vec, rowVecs,
                                     ValueRange{r, idx(n), idx(0)}),
              Value(), arith::FastMathFlags::reassoc);
          memref::StoreOp::create(
              b,
              arith::AddFOp::create(
                  b, memref::LoadOp::create(b, args[rowSumsArg], at), sum),
              args[rowSumsArg], at);
        }
      });
  });
}

void FlashBackward::chunkQueryGrads(const KeyBlock &kb, Value h, Value c0,
                                    Value cEnd) {
  Value copies = kb.args[9];
  forColumns(D, [&](Value col, int64_t n) {
    loop(c0, cEnd, rows, [&](Value i0) {
      // Causal: no row of the tile sees a key past the position of its
      // row i0 + rows - 1 (which a cache may place before the block).
      Value keys = kb.valid;
      if (masks.causal)
        keys = arith::MinSIOp::create(
            b, keys,
            arith::MaxSIOp::create(
                b, idx(0),
                arith::SubIOp::create(
                    b,
                    masks.position(b, kb.limit,
                                   arith::AddIOp::create(b, i0, idx(rows))),
                    kb.j0)));
      // The tile's rows of dS, [blockTiles, rows, 32].
      SmallVector<OpFoldResult> offsets = {
          b.getIndexAttr(0), arith::SubIOp::create(b, i0, c0).getResult(),
          b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(blockTiles),
                                         b.getIndexAttr(rows),
                                         b.getIndexAttr(kCols)};
      SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
      Value y = view(copies, {kb.split, kb.bi, h}, i0, rows);
      if (dot) {
        Value dsRows =
            memref::SubViewOp::create(b, kb.dsBf16(), offsets, sizes, strides);
        if (amx)
          amxQueryGrads(y, dsRows, kb.kChunks(), keys, col, n);
        else
          dotQueryGrads(y, dsRows, kb.kChunks(), keys, col, n);
        return;
      }
      Value dsRows =
          memref::SubViewOp::create(b, kb.dsBuf(), offsets, sizes, strides);
      rowsTimesKeysColumns(y, dsRows, kb.kChunks(), idx(0), idx(0), idx(0),
                           keys, Value(), col, n);
    });
  });
}

void FlashBackward::chunkKeyGrads(const KeyBlock &kb, Value h, Value c0,
                                  Value cEnd) {
  Value qT = kb.args[0], dOT = kb.args[3];
  loop(0, blockTiles, [&](Value t) {
    Value jt = tileStart(kb, t);
    auto [first, end] = rowsSeeing(kb, jt);
    Value lo = arith::MaxUIOp::create(b, c0, first),
          hi = arith::MinUIOp::create(b, cEnd, end);
    Value any = arith::AndIOp::create(
        b, tileSeen(kb, jt),
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
    Value pc = dot ? kb.pRowPairs() : kb.pBuf(),
          dsc = dot ? kb.dsRowPairs() : kb.dsBuf();
    for (auto [zt, c, packed] :
         {std::tuple(kb.dvBuf(), pc, dOT), std::tuple(kb.dkBuf(), dsc, qT)})
      callAccumulateTransposed({zt, c, packed, kb.bi, h,
                                arith::DivUIOp::create(b, lo, idx(rows)), count,
                                t, row0});
  });
}

void FlashBackward::storeKeyGrads(const KeyBlock &kb) {
  Value dK = kb.args[6], dV = kb.args[7];
  loop(idx(0), kb.valid, 1, [&](Value j) {
    Value key = arith::AddIOp::create(b, kb.j0, j);
    Value t = arith::DivUIOp::create(b, j, idx(kCols)),
          lane = arith::RemUIOp::create(b, j, idx(kCols));
    // With dot products, dK^T summed Q^T dS of unscaled Q.
    for (auto [grad, buffer, width, factor] :
         {std::tuple(dK, kb.dkBuf(), D, dot ? scale : 1.0f),
          std::tuple(dV, kb.dvBuf(), Dv, 1.0f)})
      copyLoop(
          0, width,
          [&, grad = grad, buffer = buffer, factor = factor](Value c) {
            Value x = memref::LoadOp::create(b, buffer, ValueRange{t, c, lane});
            if (factor != 1.0f)
              x = arith::MulFOp::create(b, x, f(factor));
            storeScalar(x, grad, ValueRange{kb.bi, kb.g, key, c});
          });
  });
}

bool canLowerToFlashCpu(attn::AttentionGradOp op, attn::CpuPlanAttr plan) {
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod()) &&
         ScoreModGradients::partialsFit(
             op.getScoreMod(), op.getScoreCaptures(), op.getScoreCapturesGrad(),
             FlashBackward::kvTaskCount(op, plan), q[0] * q[1] * q[2] * k[2],
             plan.getKeyTasks() ? attn::keyCountOf(op) : 0) &&
         q[3] % kLanes == 0 && shapeOf(op.getValue())[3] % kLanes == 0;
}

EntropyGradient entropyGradientOf(attn::AttentionGradOp op) {
  Value lseGrad = op.getLseGrad();
  auto grad = lseGrad ? lseGrad.getDefiningOp<attn::AttentionStatsGradOp>()
                      : attn::AttentionStatsGradOp();
  if (!grad || !lseGrad.hasOneUse() || grad.getQuery() != op.getQuery() ||
      grad.getKey() != op.getKey() || grad.getLse() != op.getLse() ||
      grad.getEffectiveScale() != op.getEffectiveScale() ||
      grad.getCausal() != op.getCausal() || op.getCache() || op.getVarlen() ||
      grad.getWindow() != op.getWindow() ||
      grad.getLengths() != op.getLengths() ||
      !llvm::equal(grad.getScoreCaptures(), op.getScoreCaptures()) ||
      !llvm::equal(grad.getMaskCaptures(), op.getMaskCaptures()))
    return {};
  auto flags = OperationEquivalence::IgnoreLocations;
  if (!OperationEquivalence::isRegionEquivalentTo(&grad.getScoreMod(),
                                                  &op.getScoreMod(), flags) ||
      !OperationEquivalence::isRegionEquivalentTo(&grad.getMaskMod(),
                                                  &op.getMaskMod(), flags))
    return {};
  SmallVector<std::pair<Value, Value>> pairs = {
      {grad.getQueryGrad(), op.getQueryGrad()},
      {grad.getKeyGrad(), op.getKeyGrad()}};
  for (auto [mine, theirs] :
       llvm::zip(grad.getScoreCapturesGrad(), op.getScoreCapturesGrad()))
    pairs.push_back({mine, theirs});
  EntropyGradient found;
  for (auto [mine, theirs] : pairs) {
    if (mine.use_empty()) {
      found.sums.push_back(nullptr);
      continue;
    }
    auto sum = dyn_cast<arith::AddFOp>(*mine.getUsers().begin());
    if (!mine.hasOneUse() || !sum ||
        !((sum.getLhs() == mine && sum.getRhs() == theirs) ||
          (sum.getRhs() == mine && sum.getLhs() == theirs)))
      return {};
    found.sums.push_back(sum);
  }
  found.op = grad;
  return found;
}

FailureOr<SmallVector<Value>> lowerToFlashBackward(RewriterBase &rewriter,
                                                   attn::AttentionGradOp op,
                                                   attn::CpuPlanAttr plan,
                                                   int64_t vectorBits) {
  if (!canLowerToFlashCpu(op, plan))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  EntropyGradient entropy = entropyGradientOf(op);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  FlashBackward kernel(b, op, plan, vectorBits);
  if (entropy.op) {
    // The rows' entropies from the statistics kernel (mu = LSE - H).
    attn::AttentionStatsGradOp grad = entropy.op;
    auto stats = attn::AttentionStatsOp::create(
        b, grad.getLse().getType(), Type(), Type(), Type(), grad.getQuery(),
        grad.getKey(), grad.getLse(), grad.getScaleAttr(), grad.getCausalAttr(),
        grad.getWindowAttr(), grad.getLengths(), grad.getScoreCaptures(),
        grad.getMaskCaptures());
    attn::cloneRegions(grad, stats);
    auto statsPlan = attn::CpuPlanAttr::get(
        op.getContext(), std::min<int64_t>(plan.getRows(), 12),
        std::min<int64_t>(plan.getRows(), 12),
        std::min<int64_t>(plan.getKeyBlock(), 128), /*amx=*/false,
        /*splits=*/1, /*dotBf16=*/false, /*keyTasks=*/false);
    FailureOr<SmallVector<Value>> entropies =
        lowerToFlashStats(rewriter, stats, statsPlan, vectorBits);
    if (failed(entropies)) {
      rewriter.eraseOp(stats);
      entropy = {};
    } else {
      kernel.addEntropyGradient(
          kernel.bufferOf(entropies->front()),
          grad.getEntropyGrad() ? kernel.bufferOf(grad.getEntropyGrad())
                                : Value(),
          grad.getMeanEntropyGrad() ? kernel.bufferOf(grad.getMeanEntropyGrad())
                                    : Value());
    }
  }
  SmallVector<Value> results = kernel.build();
  if (entropy.op) {
    // The sums of the two ops' gradients are the kernel's; then neither op
    // is used.
    SmallVector<Value> summed = {results[0], results[1]};
    summed.append(results.begin() + 3, results.end());
    for (auto [sum, result] : llvm::zip(entropy.sums, summed))
      if (sum)
        rewriter.replaceOp(sum, result);
    rewriter.replaceOp(op, results);
    rewriter.eraseOp(entropy.op);
    return results;
  }
  rewriter.replaceOp(op, results);
  return results;
}

} // namespace attnc
