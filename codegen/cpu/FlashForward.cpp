// The flash-attention CPU forward (see FlashForward.h and FlashAttention.h).
#include "codegen/cpu/FlashForward.h"

#include "codegen/cpu/FastExp.h"
#include "codegen/cpu/FlashAttention.h"

#include "codegen/cpu/WidenRegion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

#include <limits>

using namespace mlir;

namespace attnc {

FlashForward::Built FlashForward::build() {
  Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
        v = bufferOf(op.getValue());
  if (foldHeads)
    q = regroup(q, {B, H, Sq, D});
  Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
  Value table = op.getPages() ? bufferOf(op.getPages()) : Value();
  Value o = alloc({B, H, Sq, Dv}, elementTypeOf(op.getOutput())),
        l = alloc({B, H, Sq});
  // Split-KV: the tasks write partial results, merged into O and LSE.
  Value partO, partL;
  if (kvSplits > 1) {
    partO = alloc({kvSplits, B, H, Sq, Dv});
    partL = alloc({kvSplits, B, H, Sq});
  }
  // K and V as the products' B operands: K^T in key tiles and V in column
  // chunks, or on AMX K and V in bf16 pairs (VNNI). Copied whole once per
  // call where several tasks of a head share the copy; with packedBlocks
  // read where the caller put them, each task packing the block it is at.
  SmallVector<Value> captured = {q, k, v, partO ? partO : o,
                                partL ? partL : l};
  if (paired && !packedBlocks)
    std::tie(captured[1], captured[2]) = pairedKeysAndValues(k, v, lengths);
  else if (!packedBlocks)
    std::tie(captured[1], captured[2]) =
        std::pair(transposed(k, blockTiles, (kPrefetchRows + D - 1) / D),
                  chunkedValues(v, kPrefetchRows));
  if (lengths)
    captured.push_back(lengths);
  if (table)
    captured.push_back(table);
  appendCaptures(captured);
  Value entropyBuf, poolParts;
  if (entropy) {
    entropyBuf = alloc({B, H, Sq});
    entropyArg = captured.size();
    captured.push_back(entropyBuf);
  }
  int64_t cellWidth = (gk + kLanes - 1) / kLanes * kLanes;
  if (gk) {
    poolParts = alloc({B, H, qTiles, 2, gk});
    poolArg = captured.size();
    captured.push_back(poolParts);
  }
  int64_t groups = (qTiles + groupTiles - 1) / groupTiles;
  Value simParts;
  if (similarity) {
    simParts = alloc({B, groups, H, H});
    simArg = captured.size();
    captured.push_back(simParts);
  }
  int64_t width = blockTiles * kCols;
  int64_t states = headsPerTask * groupTiles;
  parallelTasks(
      parent, "__attnc_flash_forward", captured,
      B * (H / headsPerTask) * groups * kvSplits,
      [&](ArrayRef<Value>) {
        // Per query tile of the group (of each of the task's heads): O,
        // the running max and sum, and the packed rows of Q, times the
        // scale (the products give scaled scores: no multiply per score);
        // per step: P and the rescaling factors; with packedBlocks, the
        // block's K^T tiles (and V chunks).
        // On AMX or with BF16 dot products: Q's rows in bf16, and per step
        // P in bf16 and (AMX) P V.
        SmallVector<Value> buffers = {scratchBuffer({states, rows, Dv}),
                                      scratchBuffer({rows, blockTiles * kCols}),
                                      scratchBuffer({states, rows}),
                                      scratchBuffer({states, rows}),
                                      scratchBuffer({rows})};
        if (!paired)
          buffers.push_back(scratchBuffer({states, D, rows}));
        else
          buffers.append({scratchBuffer({states, rows, D}, bf16),
                          scratchBuffer({rows, blockTiles * kCols}, bf16),
                          scratchBuffer({rows, Dv})});
        if (packedBlocks && paired) {
          pairsScratch = buffers.size();
          buffers.append(
              {scratchBuffer({1, 1, 2 * blockTiles, D / 2, kCols}, bf16),
               scratchBuffer({1, 1, blockTiles, kLanes, 2 * Dv}, bf16)});
        } else if (packedBlocks) {
          // (With directScores no K^T tiles: a one-element stand-in keeps
          // the positions of the buffers after it.)
          buffers.push_back(directScores
                                ? scratchBuffer({1, 1, 1, 1, 1})
                                : scratchBuffer({1, 1, blockTiles, D, kCols}));
        }
        if (packedBlocks && !paired && !valuesInPlace)
          buffers.push_back(scratchBuffer(
              {1, 1, (Dv / kLanes + 1) / 2, blockTiles * kCols, 2 * kLanes}));
        if (pipelined) {
          pipeScratch = buffers.size();
          buffers.push_back(scratchBuffer({rows, blockTiles * kCols}));
        }
        if (entropy) {
          entropyScratch = buffers.size();
          buffers.push_back(scratchBuffer({states, rows}));
        }
        if (gk) {
          poolScratch = buffers.size();
          buffers.push_back(scratchBuffer({states, rows, cellWidth}));
        }
        if (similarity) {
          // Each head's p and alpha of the step, and the tiles' A_hg.
          simScratch = buffers.size();
          buffers.append({scratchBuffer({H, rows, width}),
                          scratchBuffer({H, rows}),
                          scratchBuffer({groupTiles, rows, pairs * kLanes})});
        }
        return buffers;
      },
      [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
        Value split = arith::RemUIOp::create(b, t, idx(kvSplits));
        t = arith::DivUIOp::create(b, t, idx(kvSplits));
        Value group = arith::RemUIOp::create(b, t, idx(groups));
        Value bh = arith::DivUIOp::create(b, t, idx(groups));
        int64_t headBlocks = H / headsPerTask;
        task(args, scratch, arith::DivUIOp::create(b, bh, idx(headBlocks)),
             arith::MulIOp::create(
                 b, arith::RemUIOp::create(b, bh, idx(headBlocks)),
                 idx(headsPerTask)),
             group, split);
      });
  if (kvSplits > 1)
    mergeSplits(partO, partL, o, l);
  if (foldHeads) {
    o = regroup(o, shapeOf(op.getOutput()));
    l = regroup(l, shapeOf(op.getLse()));
  }
  return {tensorOf(o, op.getOutput().getType()),
          tensorOf(l, op.getLse().getType()),
          l,
          entropyBuf,
          gk ? finishPooled(poolParts) : Value(),
          similarity ? similarityOf(simParts) : Value()};
}

Value FlashForward::regroup(Value memref, ArrayRef<int64_t> shape) {
  // Dimensions 1 and 2 (heads and rows) as one, then split as `shape` says.
  int64_t rank = shape.size();
  SmallVector<ReassociationIndices> groups = {{0}, {1, 2}};
  for (int64_t d = 3; d < rank; ++d)
    groups.push_back({d});
  Value flat = memref::CollapseShapeOp::create(b, memref, groups);
  return memref::ExpandShapeOp::create(
      b,
      MemRefType::get(shape,
                      cast<MemRefType>(memref.getType()).getElementType()),
      flat, groups);
}

KeySource FlashForward::sourceOf(ArrayRef<Value> args, unsigned n) {
  if (!op.getPages())
    return args[n];
  return {args[n], args[6]};
}

Value FlashForward::stateIndex(Value hh, Value t) {
  return arith::AddIOp::create(b, arith::MulIOp::create(b, hh, idx(groupTiles)),
                               t);
}

FlashForward::TileState FlashForward::stateOf(ArrayRef<Value> scratch,
                                              Value t) {
  return {t,
          view(scratch[0], t),
          view(scratch[2], t),
          view(scratch[3], t),
          view(scratch[5], t),
          entropy ? view(scratch[entropyScratch], t) : Value(),
          gk ? view(scratch[poolScratch], t) : Value()};
}

void FlashForward::task(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi,
                        Value h0, Value group, Value split) {
  bindMaskInputs(args);
  Value q = args[0], o = args[3], l = args[4];
  if (kvSplits > 1) {
    o = view(o, split);
    l = view(l, split);
  }
  Value lengths = op.getLengths() ? args[5] : Value();
  KeySource keys = sourceOf(args, 1), values = sourceOf(args, 2);
  int64_t width = blockTiles * kCols;
  Value first = arith::MulIOp::create(b, group, idx(groupTiles));
  Value count = arith::MinUIOp::create(
      b, idx(groupTiles), arith::SubIOp::create(b, idx(qTiles), first));
  auto tileOf = [&](Value h, Value t) {
    return queryTile(lengths, bi, h, arith::AddIOp::create(b, first, t), width);
  };
  // body(h, t, state) for each of the task's heads and query tiles.
  auto forTiles = [&](function_ref<void(Value, Value, Value)> body) {
    loop(0, headsPerTask, [&](Value hh) {
      Value h = arith::AddIOp::create(b, h0, hh);
      loop(idx(0), count, 1, [&](Value t) { body(h, t, stateIndex(hh, t)); });
    });
  };
  if (similarity)
    zero(scratch[simScratch + 2]);
  forTiles([&](Value h, Value t, Value state) {
    TileState st = stateOf(scratch, state);
    zero(st.oBuf);
    if (paired)
      copyRows(q, bi, h, tileOf(h, t).i0, st.qPacked);
    else
      packRows(q, bi, h, tileOf(h, t).i0, Sq - 1, st.qPacked, scale);
    loop(0, rows, [&](Value r) {
      memref::StoreOp::create(b, f(kNegInf), st.maxBuf, r);
      memref::StoreOp::create(b, f(0.0f), st.sumBuf, r);
      if (entropy)
        memref::StoreOp::create(b, f(0.0f), st.tBuf, r);
    });
    if (gk) {
      zero(st.cellBuf);
      loop(0, 2, [&](Value slot) {
        loop(0, gk, [&](Value c) {
          memref::StoreOp::create(
              b, f(0.0f), args[poolArg],
              ValueRange{bi, h, arith::AddIOp::create(b, first, t), slot, c});
        });
      });
    }
  });
  // Tiles' key ranges grow with their rows: the first tile's start and
  // the last one's end bound the group's.
  // (The named masks do not depend on the head.)
  Value jStart = tileOf(h0, idx(0)).keys.start;
  Value jEnd = tileOf(h0, arith::SubIOp::create(b, count, idx(1))).keys.end;
  if (kvSplits > 1) {
    // Split `split`'s share: the s-th of kvSplits runs of whole blocks.
    Value blocks = arith::DivUIOp::create(
        b,
        arith::AddIOp::create(b, arith::SubIOp::create(b, jEnd, jStart),
                              idx(width - 1)),
        idx(width));
    Value per = arith::MulIOp::create(
        b,
        arith::DivUIOp::create(
            b, arith::AddIOp::create(b, blocks, idx(kvSplits - 1)),
            idx(kvSplits)),
        idx(width));
    jStart = arith::AddIOp::create(b, jStart,
                                   arith::MulIOp::create(b, split, per));
    jEnd = arith::MinUIOp::create(b, jEnd,
                                  arith::AddIOp::create(b, jStart, per));
  }
  // (K's and V's rows from the batch's length on are packed as zeros.)
  if (lengths)
    keys.limit = values.limit = masks.keyLimit(b, lengths, bi);
  loop(jStart, jEnd, width, [&](Value j0) {
    if (packedBlocks) {
      // The block's K^T tiles and V chunks (keys past Skv: zeros in K^T;
      // V's are never read, P V stops at the last key); V in place when
      // valuesInPlace.
      Value g = arith::DivUIOp::create(b, h0, idx(H / Hkv));
      if (paired) {
        // Their pairs (zeros past Skv).
        // (On dot products, the rows kPackPrefetchKeys ahead prefetched.)
        int64_t ahead = amx ? 0 : kPackPrefetchKeys;
        if (!directScores)
          pairColumns(keys, scratch[pairsScratch], {idx(0), idx(0)}, bi, g, j0,
                      2 * blockTiles, ahead);
        pairKeys(values, scratch[pairsScratch + 1], {idx(0), idx(0)}, bi, g, j0,
                 blockTiles, ahead);
      } else if (!directScores) {
        transposeTiles(keys, scratch[6], bi, g,
                       arith::DivUIOp::create(b, j0, idx(kCols)));
      }
      if (!paired && !valuesInPlace)
        copyColumnChunks(
            values, bi, g, j0,
            arith::MinUIOp::create(b, idx(width),
                                   arith::SubIOp::create(b, idx(Skv), j0)),
            scratch[7], {idx(0), idx(0)});
    }
    if (pipelined && !similarity) {
      loop(0, headsPerTask, [&](Value hh) {
        Value h = arith::AddIOp::create(b, h0, hh);
        pipelinedKeyBlocks(
            args, scratch, bi, count,
            [&](Value t) {
              return Step{tileOf(h, t), h, stateIndex(hh, t)};
            },
            j0);
      });
      return;
    }
    if (!similarity) {
      forTiles([&](Value h, Value t, Value state) {
        QueryTile qt = tileOf(h, t);
        Value sees = masks.seesKeyBlock(b, qt.keys, j0);
        auto ifOp = scf::IfOp::create(b, sees, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        keyBlock(args, scratch, stateOf(scratch, state), qt, bi, h, j0);
      });
      return;
    }
    // Tile by tile, every head's step, then the tile's A_hg.
    loop(idx(0), count, 1, [&](Value t) {
      Value sees = masks.seesKeyBlock(b, tileOf(h0, t).keys, j0);
      auto ifOp = scf::IfOp::create(b, sees, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      if (pipelined)
        pipelinedKeyBlocks(
            args, scratch, bi, idx(H),
            [&](Value h) {
              return Step{tileOf(h, t), h, stateIndex(h, t)};
            },
            j0);
      else
        loop(0, H, [&](Value h) {
          keyBlock(args, scratch, stateOf(scratch, stateIndex(h, t)),
                   tileOf(h, t), bi, h, j0);
        });
      similarityStep(scratch, t);
    });
  });
  // O = oBuf / l and LSE = m + log l for the rows that exist; a row that
  // saw no key gets O = 0 and LSE = -inf.
  forTiles([&](Value h, Value t, Value state) {
    TileState st = stateOf(scratch, state);
    Value oBuf = st.oBuf, maxBuf = st.maxBuf, sumBuf = st.sumBuf;
    Value i0 = tileOf(h, t).i0;
    forRows(i0, [&](Value r, Value i) {
      auto ifOp = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value m = memref::LoadOp::create(b, maxBuf, r),
            sum = memref::LoadOp::create(b, sumBuf, r);
      Value empty =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sum, f(0.0f));
      Value inv = splat(arith::SelectOp::create(
          b, empty, f(0.0f), arith::DivFOp::create(b, f(1.0f), sum)));
      loop(idx(0), idx(Dv), kLanes, [&](Value c) {
        Value x = vector::LoadOp::create(b, vec, oBuf, ValueRange{r, c});
        storeVector(arith::MulFOp::create(b, x, inv), o,
                    ValueRange{bi, h, i, c});
      });
      Value logSum = math::LogOp::create(b, sum);
      Value lse = arith::AddFOp::create(b, m, logSum);
      memref::StoreOp::create(
          b, arith::SelectOp::create(b, empty, f(kNegInf), lse), l,
          ValueRange{bi, h, i});
      if (gk) {
        // The row's P summed over each key cell, into its row cell's slot
        // of the tile's partial.
        Value tile = arith::AddIOp::create(b, first, t);
        Value slot = arith::SubIOp::create(
            b, cellOf(i, Sq, gq),
            cellOf(arith::MulIOp::create(b, tile, idx(rows)), Sq, gq));
        Value invSum = arith::SelectOp::create(
            b, empty, f(0.0f), arith::DivFOp::create(b, f(1.0f), sum));
        loop(0, gk, [&](Value c) {
          SmallVector<Value> at{bi, h, tile, slot, c};
          Value x = arith::MulFOp::create(
              b, memref::LoadOp::create(b, st.cellBuf, ValueRange{r, c}),
              invSum);
          memref::StoreOp::create(
              b,
              arith::AddFOp::create(
                  b, memref::LoadOp::create(b, args[poolArg], at), x),
              args[poolArg], at);
        });
      }
      if (entropy) {
        // H = log l - t / l (0 for a row that saw no key).
        Value rowEntropy = arith::SubFOp::create(
            b, logSum,
            arith::DivFOp::create(b, memref::LoadOp::create(b, st.tBuf, r),
                                  sum));
        memref::StoreOp::create(
            b, arith::SelectOp::create(b, empty, f(0.0f), rowEntropy),
            args[entropyArg], ValueRange{bi, h, i});
      }
    });
  });
  if (similarity)
    similarityOfRows(args, scratch, bi, group, count);
}

void FlashForward::similarityStep(ArrayRef<Value> scratch, Value t) {
  Value probs = scratch[simScratch], alphas = scratch[simScratch + 1],
        acc = view(scratch[simScratch + 2], t);
  int64_t n = blockTiles * kCols / kLanes;
  // The head pairs in tiles of up to kHeads x kHeads heads (the lower
  // triangle's): a tile's A_hg stay in registers over the block's keys,
  // each vector of its heads' p loaded once for every product it feeds
  // (two loads per FMA otherwise: the loads bound the step).
  constexpr int64_t kHeads = 4;
  loop(0, rows, [&](Value r) {
    SmallVector<Value> alpha;
    for (int64_t h = 0; h < H; ++h)
      alpha.push_back(memref::LoadOp::create(b, alphas, ValueRange{idx(h), r}));
    for (int64_t hb = 0; hb < H; hb += kHeads) {
      for (int64_t gb = 0; gb <= hb; gb += kHeads) {
        SmallVector<std::pair<int64_t, int64_t>> tile;
        SmallVector<int64_t> heads;
        for (int64_t h = hb; h < std::min(hb + kHeads, H); ++h) {
          heads.push_back(h);
          for (int64_t g = gb; g < std::min(gb + kHeads, h + 1); ++g)
            tile.push_back({h, g});
        }
        for (int64_t g = gb; g < std::min(gb + kHeads, H); ++g)
          if (g < hb)
            heads.push_back(g);
        // A_hg moved to the new pair of running maxima, then the block's
        // sum_j p_hj p_gj added.
        auto colOf = [&](int64_t h, int64_t g) {
          return idx((h * (h + 1) / 2 + g) * kLanes);
        };
        SmallVector<Value> init;
        for (auto [h, g] : tile)
          init.push_back(arith::MulFOp::create(
              b,
              vector::LoadOp::create(b, vec, acc, ValueRange{r, colOf(h, g)}),
              splat(arith::MulFOp::create(b, alpha[h], alpha[g]))));
        auto sums = scf::ForOp::create(
            b, idx(0), idx(n * kLanes), idx(kLanes), init,
            [&](OpBuilder &, Location, Value c, ValueRange a) {
              DenseMap<int64_t, Value> p;
              for (int64_t h : heads)
                p[h] = vector::LoadOp::create(b, vec, probs,
                                              ValueRange{idx(h), r, c});
              SmallVector<Value> next;
              for (auto [k, hg] : llvm::enumerate(tile))
                next.push_back(
                    vector::FMAOp::create(b, p[hg.first], p[hg.second], a[k]));
              scf::YieldOp::create(b, next);
            });
        for (auto [k, hg] : llvm::enumerate(tile))
          vector::StoreOp::create(b, sums.getResult(k), acc,
                                  ValueRange{r, colOf(hg.first, hg.second)});
      }
    }
  });
}

void FlashForward::similarityOfRows(ArrayRef<Value> args,
                                    ArrayRef<Value> scratch, Value bi,
                                    Value group, Value count) {
  Value parts = args[simArg], sums = scratch[3];
  auto at = [&](Value h, Value g) {
    return SmallVector<Value>{bi, group, h, g};
  };
  loop(0, H, [&](Value h) {
    loop(0, H, [&](Value g) {
      memref::StoreOp::create(b, f(0.0f), parts, at(h, g));
    });
  });
  Value first = arith::MulIOp::create(b, group, idx(groupTiles));
  loop(idx(0), count, 1, [&](Value t) {
    Value acc = view(scratch[simScratch + 2], t);
    Value i0 =
        arith::MulIOp::create(b, arith::AddIOp::create(b, first, t), idx(rows));
    auto sumOf = [&](Value h, Value r) {
      return memref::LoadOp::create(b, sums, ValueRange{stateIndex(h, t), r});
    };
    forRows(i0, [&](Value r, Value i) {
      auto ifOp = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      loop(0, H, [&](Value h) {
        Value lh = sumOf(h, r);
        loop(idx(0), arith::AddIOp::create(b, h, idx(1)), 1, [&](Value g) {
          // <P_hi, P_gi> = A_hg / (l_h l_g); 0 where a head saw no key.
          Value norms = arith::MulFOp::create(b, lh, sumOf(g, r));
          Value dot = vector::ReductionOp::create(
              b, vector::CombiningKind::ADD,
              vector::LoadOp::create(
                  b, vec, acc,
                  ValueRange{
                      r, arith::MulIOp::create(b, pairOf(h, g), idx(kLanes))}),
              Value(), arith::FastMathFlags::reassoc);
          Value x = arith::SelectOp::create(
              b,
              arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, norms,
                                    f(0.0f)),
              f(0.0f), arith::DivFOp::create(b, dot, norms));
          addToPair(parts, {bi, group}, h, g, x);
        });
      });
    });
  });
}

Value FlashForward::pairOf(Value h, Value g) {
  // Row h of the lower triangle starts at h (h + 1) / 2.
  return arith::AddIOp::create(
      b,
      arith::DivUIOp::create(
          b, arith::MulIOp::create(b, h, arith::AddIOp::create(b, h, idx(1))),
          idx(2)),
      g);
}

void FlashForward::keyBlock(ArrayRef<Value> args, ArrayRef<Value> scratch,
                            const TileState &st, const QueryTile &qt, Value bi,
                            Value h, Value j0, const Pipeline *pipe) {
  Value kt = args[1], v = args[2];
  Value pBuf = scratch[1], alphaBuf = scratch[4];
  Value oBuf = st.oBuf, maxBuf = st.maxBuf, sumBuf = st.sumBuf,
        qPacked = st.qPacked;
  Value g = qt.g, i0 = qt.i0;
  int64_t width = blockTiles * kCols, n = width / kLanes;
  // The block's scores, tile by tile; a tile no row sees (past the end,
  // on the causal diagonal) is skipped: the masks drop its lanes.
  Value tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
  KeyPairs kvPairs = keyPairsOf(args, scratch, qt, bi, j0);
  if (pipe)
    pBuf = pipe->scores;
  else if (amx)
    amxScores(scratch[5], st.t, kvPairs.k, kvPairs.bi, kvPairs.g, kvPairs.tile,
              pBuf, blockTiles);
  else if (dot) {
    // (prefetchNextBlock: K's and V's rows of the next block's 32-key tile
    // kt while this block's tile kt is multiplied.)
    auto prefetchNext = [&](Value kt) {
      Value first = arith::AddIOp::create(
          b, j0,
          arith::AddIOp::create(b, idx(width),
                                arith::MulIOp::create(b, kt, idx(kCols))));
      prefetchKeyRows(sourceOf(args, 1), bi, g, first, kCols);
      prefetchKeyRows(sourceOf(args, 2), bi, g, first, kCols);
    };
    if (directScores)
      directScoresOf(sourceOf(args, 1), scratch[5], st.t, bi, g, j0,
                     qt.keys.end, pBuf,
                     prefetchNextBlock ? function_ref<void(Value)>(prefetchNext)
                                       : nullptr);
    else
      dotScores(scratch[5], st.t, kvPairs.k, kvPairs.bi, kvPairs.g,
                kvPairs.tile, kvPairs.end, pBuf,
                prefetchNextBlock ? function_ref<void(Value)>(prefetchNext)
                                  : nullptr);
  } else if (directScores)
    directScoresOf(sourceOf(args, 1), qPacked, st.t, bi, g, j0, qt.keys.end,
                   pBuf);
  else
    loop(0, blockTiles, [&](Value t) {
      // A loop, not blockTiles copies of the product (JIT compile time).
      Value col = arith::MulIOp::create(b, t, idx(kCols));
      auto ifOp = scf::IfOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                arith::AddIOp::create(b, j0, col), qt.keys.end),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      storeTile(packedBlocks
                    ? tileProduct(qPacked, {}, scratch[6], idx(0), idx(0), t)
                    : tileProduct(qPacked, {}, kt, bi, g,
                                  arith::AddIOp::create(b, tile0, t),
                                  kPrefetchRows),
                pBuf, col);
    });
  Value whole =
      masks.isWhole(b, qt.limit, i0, rows, j0, width, /*existsOnly=*/false);
  // With a pooled grid: whether the block's keys lie in one key cell (cells
  // as wide as a block or wider: most blocks), whose p is then the row's
  // block sum, with no per-vector cells.
  Value blockCell, inOneCell;
  if (gk) {
    Value last = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, j0, idx(width - 1)), idx(Skv - 1));
    blockCell = cellOf(j0, Skv, gk);
    inOneCell = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, blockCell,
                                      cellOf(last, Skv, gk));
  }
  forRows(i0, [&](Value r, Value i) {
    MaskTiles::RowRange range =
        masks.rowRange(b, qt.limit, i, /*existsOnly=*/false);
    SmallVector<Value> in =
        keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
    Value negInf = splat(f(kNegInf));
    SmallVector<Value> s;
    for (int64_t w = 0; w < n; ++w) {
      Value x =
          vector::LoadOp::create(b, vec, pBuf, ValueRange{r, idx(w * kLanes)});
      // (foldScale: unscaled.)
      Scores sc = scoresOf(args.slice(captureBase, captures.size()), x, in[w],
                           bi, h, range.row, j0, w,
                           /*prescaled=*/!paired || foldScale);
      s.push_back(arith::SelectOp::create(b, sc.keep, sc.modified, negInf));
    }
    Value blockMax =
        maxOfLanes(tree(s, [&](Value x, Value y) { return maxOf(x, y); }));
    // (The scale is positive: the scaled max is the max scaled.)
    if (foldScale)
      blockMax = arith::MulFOp::create(b, blockMax, f(scale));
    Value mOld = memref::LoadOp::create(b, maxBuf, r);
    Value m, moved;
    if (lazyMax) {
      // The max moves only past mOld + kLazyMaxSlack (from -inf, to any
      // key's score; never to NaN, whose p are NaN all the same).
      moved = arith::CmpFOp::create(
          b, arith::CmpFPredicate::OGT, blockMax,
          arith::AddFOp::create(b, mOld, f(kLazyMaxSlack)));
      m = arith::SelectOp::create(b, moved, blockMax, mOld);
    } else {
      m = maxOf(mOld, blockMax);
    }
    // While a row has seen no key, m = -inf: subtract 0 instead so that
    // exp gives 0, never NaN.
    Value safe = arith::SelectOp::create(
        b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, f(kNegInf)),
        f(0.0f), m);
    // Flushed too: a denormal alpha would make O's rescale denormal.
    auto rescale = [&] {
      Value shift = arith::SubFOp::create(b, mOld, safe);
      return flushTiny(shift, math::ExpOp::create(b, shift));
    };
    Value alpha;
    if (lazyMax) {
      auto ifOp = scf::IfOp::create(b, f32, moved, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(b, rescale());
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, f(1.0f));
      alpha = ifOp.getResult(0);
    } else {
      alpha = rescale();
    }
    // P for the step's P V: f32 for the FMA product, bf16 straight into
    // the A tile's rows on AMX (and pairs for the dot products).
    SmallVector<Value> p, terms;
    constexpr double kLog2e = 1.4426950408889634;
    Value log2eScale = splat(f((foldScale ? scale : 1.0) * kLog2e)),
          negShift = splat(arith::MulFOp::create(b, safe, f(-kLog2e)));
    for (int64_t w = 0; w < n; ++w) {
      Value shifted;
      if (base2) {
        // (The entropy's terms in base 2: the block's sum is moved to
        // base e once, below.)
        shifted = vector::FMAOp::create(b, s[w], log2eScale, negShift);
        p.push_back(buildExp2ScalefForBf16(b, shifted));
      } else {
        shifted = arith::SubFOp::create(b, s[w], splat(safe));
        p.push_back(expVector(shifted));
      }
      storeVector(p.back(), paired ? scratch[6] : pBuf,
                  ValueRange{r, idx(w * kLanes)});
      if (similarity)
        vector::StoreOp::create(b, p.back(), scratch[simScratch],
                                ValueRange{h, r, idx(w * kLanes)});
      // p (S' - m), with -inf (masked: p = 0) as the lowest float: 0.
      if (entropy)
        terms.push_back(arith::MulFOp::create(
            b, p.back(),
            arith::MaximumFOp::create(
                b, shifted, splat(f(-std::numeric_limits<float>::max())))));
    }
    Value pSum = tree(p, [&](Value x, Value y) {
      return arith::AddFOp::create(b, x, y).getResult();
    });
    // reassoc: a tree reduction instead of 16 dependent adds.
    Value blockSum =
        vector::ReductionOp::create(b, vector::CombiningKind::ADD, pSum,
                                    Value(), arith::FastMathFlags::reassoc);
    Value sum = arith::AddFOp::create(
        b,
        arith::MulFOp::create(b, memref::LoadOp::create(b, sumBuf, r), alpha),
        blockSum);
    if (gk) {
      // The key cells' sums move to the new max (where it moved: in most
      // blocks it does not), then take the block's p.
      auto moved = scf::IfOp::create(
          b,
          arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, alpha, f(1.0f)),
          /*withElseRegion=*/false);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(moved.thenBlock());
        loop(idx(0), idx(shapeOf(st.cellBuf)[1]), kLanes, [&](Value c) {
          Value x =
              vector::LoadOp::create(b, vec, st.cellBuf, ValueRange{r, c});
          vector::StoreOp::create(b, arith::MulFOp::create(b, x, splat(alpha)),
                                  st.cellBuf, ValueRange{r, c});
        });
      }
      auto oneCell = scf::IfOp::create(b, inOneCell, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(oneCell.thenBlock());
      SmallVector<Value> at{r, blockCell};
      memref::StoreOp::create(
          b,
          arith::AddFOp::create(b, memref::LoadOp::create(b, st.cellBuf, at),
                                blockSum),
          st.cellBuf, at);
      b.setInsertionPointToStart(oneCell.elseBlock());
      for (int64_t w = 0; w < n; ++w)
        addToKeyCells(p[w], j0, w, gk, st.cellBuf, {r});
    }
    if (entropy) {
      // t = alpha (t + (mOld - m) l) + sum_j p (S' - m): the sums of the
      // earlier keys move to the new max (nothing to move while l = 0).
      Value sumOld = memref::LoadOp::create(b, sumBuf, r);
      Value moved = arith::SelectOp::create(
          b,
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sumOld, f(0.0f)),
          f(0.0f),
          arith::MulFOp::create(b, arith::SubFOp::create(b, mOld, safe),
                                sumOld));
      Value tOld = arith::AddFOp::create(
          b, memref::LoadOp::create(b, st.tBuf, r), moved);
      Value blockT = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD,
          tree(terms,
               [&](Value x, Value y) {
                 return arith::AddFOp::create(b, x, y).getResult();
               }),
          Value(), arith::FastMathFlags::reassoc);
      if (base2)
        blockT = arith::MulFOp::create(b, blockT, f(1.0 / kLog2e));
      memref::StoreOp::create(
          b,
          arith::AddFOp::create(b, arith::MulFOp::create(b, tOld, alpha),
                                blockT),
          st.tBuf, r);
    }
    memref::StoreOp::create(b, m, maxBuf, r);
    memref::StoreOp::create(b, sum, sumBuf, r);
    memref::StoreOp::create(b, alpha, alphaBuf, r);
    if (similarity)
      memref::StoreOp::create(b, alpha, scratch[simScratch + 1],
                              ValueRange{h, r});
    if (pipe) {
      // The next tile's Q K^T, a C tile of each tile of rows every few rows.
      int64_t passes = 2 * blockTiles,
              every = std::max<int64_t>(1, rows / passes);
      Value pass = arith::DivUIOp::create(b, r, idx(every));
      Value now = arith::AndIOp::create(
          b, pipe->next,
          arith::AndIOp::create(
              b,
              arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                    arith::RemUIOp::create(b, r, idx(every)),
                                    idx(0)),
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, pass,
                                    idx(passes))));
      ifThen(now, [&] {
        const KeyPairs &kp = pipe->nextPairs;
        amxScoreGroup(scratch[5], pipe->nextState, kp.k, kp.bi, kp.g, kp.tile,
                      pipe->nextScores, pass, 1);
      });
    }
  });
  if (amx) {
    amxUpdate(scratch, oBuf, kvPairs.v, kvPairs.bi, kvPairs.g, kvPairs.tile);
    return;
  }
  if (dot) {
    dotUpdate(scratch, oBuf, kvPairs.v, kvPairs.bi, kvPairs.g, kvPairs.tile,
              kvPairs.end);
    return;
  }
  // Keys past the tile's have p = 0: no row sees them.
  Value valid = arith::MinUIOp::create(
      b, idx(width), arith::SubIOp::create(b, qt.keys.end, j0));
  // V from the block's chunks, or where it is (in place, or the per-call
  // copy, whose rows ahead are prefetched).
  if (packedBlocks && !valuesInPlace)
    rowsTimesKeys(oBuf, pBuf, scratch[7], idx(0), idx(0), idx(0), valid,
                  alphaBuf);
  else
    rowsTimesKeys(oBuf, pBuf, packedBlocks ? sourceOf(args, 2) : v, bi, g, j0,
                  valid, alphaBuf, kPrefetchRows);
}

void FlashForward::directScoresOf(const KeySource &keys, Value qPacked, Value t,
                                  Value bi, Value g, Value j0, Value end,
                                  Value pBuf,
                                  function_ref<void(Value)> perTile) {
  // 16 f32 columns per FMA, or 32 bf16 ones (16 pairs) per dot product.
  int64_t perVector = paired ? 2 * kLanes : kLanes, vectors = D / perVector;
  auto pairType = VectorType::get({2 * kLanes}, bf16);
  // Q's rows as vectors, once per block.
  SmallVector<SmallVector<Value>> q(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < vectors; ++w) {
      if (paired) {
        q[r].push_back(vector::LoadOp::create(
            b, pairType, qPacked, ValueRange{t, idx(r), idx(w * perVector)}));
        continue;
      }
      SmallVector<Value> lanes;
      for (int64_t l = 0; l < kLanes; ++l)
        lanes.push_back(memref::LoadOp::create(
            b, qPacked, ValueRange{idx(w * kLanes + l), idx(r)}));
      q[r].push_back(vector::FromElementsOp::create(b, vec, lanes));
    }
  Value last = arith::SubIOp::create(b, end, idx(1));
  loop(0, blockTiles * kCols / kLanes, [&](Value group) {
    if (perTile)
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                   arith::RemUIOp::create(b, group, idx(2)),
                                   idx(0)),
             [&] { perTile(arith::DivUIOp::create(b, group, idx(2))); });
    Value first = arith::AddIOp::create(
        b, j0, arith::MulIOp::create(b, group, idx(kLanes)));
    ifThen(
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, first, end), [&] {
          // Keys past `end` read the last one again (rows past a
          // cache's length may hold anything).
          SmallVector<SmallVector<Value>> at;
          for (int64_t l = 0; l < kLanes; ++l)
            at.push_back(keys.rowAt(
                b, bi, g,
                arith::MinUIOp::create(
                    b, arith::AddIOp::create(b, first, idx(l)), last)));
          for (int64_t r = 0; r < rows; ++r) {
            SmallVector<Value> acc;
            for (int64_t l = 0; l < kLanes; ++l) {
              Value sum;
              for (int64_t w = 0; w < vectors; ++w) {
                SmallVector<Value> indices(at[l]);
                indices.push_back(idx(w * perVector));
                if (paired) {
                  sum = x86vector::DotBF16Op::create(
                      b, sum ? sum : splat(f(0.0f)), q[r][w],
                      vector::LoadOp::create(b, pairType, keys.memref,
                                             indices));
                  continue;
                }
                Value x = loadVectorF32(keys.memref, indices);
                sum =
                    sum ? vector::FMAOp::create(b, q[r][w], x, sum).getResult()
                        : arith::MulFOp::create(b, q[r][w], x).getResult();
              }
              acc.push_back(sum);
            }
            vector::StoreOp::create(
                b, laneSums16(acc), pBuf,
                ValueRange{idx(r),
                           arith::MulIOp::create(b, group, idx(kLanes))});
          }
        });
  });
}

FlashForward::KeyPairs FlashForward::keyPairsOf(ArrayRef<Value> args,
                                                ArrayRef<Value> scratch,
                                                const QueryTile &qt, Value bi,
                                                Value j0) {
  // The AMX tiles' and dot products' K and V pairs: the per-call copies
  // from the block's tile on, or (packedBlocks) the block's own from its
  // first key.
  if (paired && packedBlocks)
    return {scratch[pairsScratch],
            scratch[pairsScratch + 1],
            idx(0),
            idx(0),
            idx(0),
            arith::SubIOp::create(b, qt.keys.end, j0)};
  return {
      args[1],    args[2], bi, qt.g, arith::DivUIOp::create(b, j0, idx(kCols)),
      qt.keys.end};
}

void FlashForward::pipelinedKeyBlocks(ArrayRef<Value> args,
                                      ArrayRef<Value> scratch, Value bi,
                                      Value count,
                                      function_ref<Step(Value)> stepOf,
                                      Value j0) {
  // Step n's scores in the first buffer when n is even, else the second.
  auto scoresOf = [&](Value n) {
    Value even =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                              arith::RemUIOp::create(b, n, idx(2)), idx(0));
    return arith::SelectOp::create(b, even, scratch[1], scratch[pipeScratch])
        .getResult();
  };
  auto sees = [&](const Step &step) {
    return masks.seesKeyBlock(b, step.qt.keys, j0);
  };
  auto scoresFor = [&](Value n, const Step &step) {
    KeyPairs kp = keyPairsOf(args, scratch, step.qt, bi, j0);
    amxScores(scratch[5], step.state, kp.k, kp.bi, kp.g, kp.tile, scoresOf(n),
              blockTiles);
  };
  Step first = stepOf(idx(0));
  ifThen(sees(first), [&] { scoresFor(idx(0), first); });
  loop(idx(0), count, 1, [&](Value n) {
    Step step = stepOf(n);
    Value next = arith::AddIOp::create(b, n, idx(1));
    Step nextStep = stepOf(next);
    Value nextSees = arith::AndIOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, next, count),
        sees(nextStep));
    auto ifOp = scf::IfOp::create(b, sees(step), /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Pipeline pipe = {scoresOf(n), nextSees, nextStep.state,
                     keyPairsOf(args, scratch, nextStep.qt, bi, j0),
                     scoresOf(next)};
    keyBlock(args, scratch, stateOf(scratch, step.state), step.qt, bi, step.h,
             j0, &pipe);
    // A step whose tile does not see the block leaves the next step's
    // scores to be computed here.
    b.setInsertionPointToStart(ifOp.elseBlock());
    ifThen(nextSees, [&] { scoresFor(next, nextStep); });
  });
}

void FlashForward::mergeSplits(Value partO, Value partL, Value o, Value l) {
  std::string name;
  llvm::raw_string_ostream(name)
      << "__attnc_flash_merge_splits_" << kvSplits << "x" << shapeName(o)
      << "x" << elementTypeOf(o);
  forEachHead(
      name, {partO, partL, o, l}, H,
      [&](ArrayRef<Value> args, Value bi, Value h) {
        Value parts = args[0], lses = args[1];
        loop(0, Sq, [&](Value i) {
          SmallVector<Value> lse;
          for (int64_t s = 0; s < kvSplits; ++s)
            lse.push_back(memref::LoadOp::create(
                b, lses, ValueRange{idx(s), bi, h, i}));
          Value m = lse[0];
          for (int64_t s = 1; s < kvSplits; ++s)
            m = arith::MaximumFOp::create(b, m, lse[s]);
          // A row no split saw: every LSE_s is -inf (its O_s are 0).
          Value empty =
              arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, f(kNegInf));
          Value shift = arith::SelectOp::create(b, empty, f(0.0f), m);
          SmallVector<Value> weights;
          Value sum = f(0.0f);
          for (int64_t s = 0; s < kvSplits; ++s) {
            weights.push_back(math::ExpOp::create(
                b, arith::SubFOp::create(b, lse[s], shift)));
            sum = arith::AddFOp::create(b, sum, weights.back());
          }
          Value inv = arith::SelectOp::create(
              b, empty, f(0.0f), arith::DivFOp::create(b, f(1.0f), sum));
          loop(idx(0), idx(Dv), kLanes, [&](Value c) {
            Value acc = splat(f(0.0f));
            for (int64_t s = 0; s < kvSplits; ++s)
              acc = math::FmaOp::create(
                  b,
                  vector::LoadOp::create(b, vec, parts,
                                         ValueRange{idx(s), bi, h, i, c}),
                  splat(arith::MulFOp::create(b, weights[s], inv)), acc);
            storeVector(acc, args[2], ValueRange{bi, h, i, c});
          });
          memref::StoreOp::create(
              b,
              arith::SelectOp::create(
                  b, empty, f(kNegInf),
                  arith::AddFOp::create(b, m, math::LogOp::create(b, sum))),
              args[3], ValueRange{bi, h, i});
        });
      });
}

bool canLowerToFlashCpu(attn::AttentionOp op) {
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod()) &&
         shapeOf(op.getValue())[3] % kLanes == 0;
}

Value FlashForward::finishPooled(Value parts) {
  Value pooled = alloc({B, H, gq, gk});
  loop(0, B, [&](Value bi) {
    loop(0, H, [&](Value h) {
      loop(0, gq, [&](Value cell) {
        loop(0, gk, [&](Value c) {
          memref::StoreOp::create(b, f(0.0f), pooled,
                                  ValueRange{bi, h, cell, c});
        });
      });
      loop(0, qTiles, [&](Value tile) {
        Value cell0 = cellOf(arith::MulIOp::create(b, tile, idx(rows)), Sq, gq);
        loop(0, 2, [&](Value slot) {
          Value cell = arith::AddIOp::create(b, cell0, slot);
          auto ifOp = scf::IfOp::create(
              b,
              arith::CmpIOp::create(b, arith::CmpIPredicate::ult, cell,
                                    idx(gq)),
              /*withElseRegion=*/false);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          loop(0, gk, [&](Value c) {
            SmallVector<Value> at{bi, h, cell, c};
            memref::StoreOp::create(
                b,
                arith::AddFOp::create(
                    b, memref::LoadOp::create(b, pooled, at),
                    memref::LoadOp::create(b, parts,
                                           ValueRange{bi, h, tile, slot, c})),
                pooled, at);
          });
        });
      });
      loop(0, gq,
           [&](Value cell) { toCellMeans(pooled, bi, h, cell, gq, gk); });
    });
  });
  return pooled;
}

ForwardStatistics forwardStatistics(attn::AttentionOp op,
                                    attn::CpuPlanAttr plan) {
  for (Operation *user : op.getLse().getUsers()) {
    auto stats = dyn_cast<attn::AttentionStatsOp>(user);
    if (!stats || stats.getQuery() != op.getQuery() ||
        stats.getKey() != op.getKey() ||
        stats.getEffectiveScale() != op.getEffectiveScale() ||
        stats.getCausal() != op.getCausal() || op.getCache() ||
        op.getVarlen() || stats.getWindow() != op.getWindow() ||
        stats.getLengths() != op.getLengths() ||
        !llvm::equal(stats.getScoreCaptures(), op.getScoreCaptures()) ||
        !llvm::equal(stats.getMaskCaptures(), op.getMaskCaptures()))
      continue;
    auto flags = OperationEquivalence::IgnoreLocations;
    if (!OperationEquivalence::isRegionEquivalentTo(&stats.getScoreMod(),
                                                    &op.getScoreMod(), flags) ||
        !OperationEquivalence::isRegionEquivalentTo(&stats.getMaskMod(),
                                                    &op.getMaskMod(), flags))
      continue;
    ForwardStatistics forward;
    forward.op = stats;
    // (Only what something uses.)
    forward.entropy = FlashCommon::isUsed(stats.getEntropy()) ||
                      FlashCommon::isUsed(stats.getMeanEntropy());
    if (Value pooled = stats.getPooled(); FlashCommon::isUsed(pooled)) {
      ArrayRef<int64_t> grid = shapeOf(pooled);
      // A query tile's rows in at most two row cells.
      if (shapeOf(op.getQuery())[2] / grid[2] >= plan.getRows())
        forward.gq = grid[2], forward.gk = grid[3];
    }
    forward.similarity = FlashCommon::isUsed(stats.getSimilarity());
    if (!forward.entropy && !forward.gk && !forward.similarity)
      continue;
    return forward;
  }
  return {};
}

/// Replaces the statistics of `stats.op` that the forward computed with its
/// buffers, and the others (if any) with those of a new
/// attn.attention_stats asking for them only (the same plan), which
/// attn-lower-cpu lowers next. (`kernel` builds at `b`, set before it.)
static void replaceCompanion(RewriterBase &rewriter, ImplicitLocOpBuilder &b,
                             const ForwardStatistics &stats,
                             FlashCommon &kernel,
                             const FlashForward::Built &built) {
  attn::AttentionStatsOp op = stats.op;
  auto isUsed = FlashCommon::isUsed;
  if (Value entropy = op.getEntropy(); isUsed(entropy))
    rewriter.replaceAllUsesWith(
        entropy, kernel.tensorOf(built.entropyBuf, entropy.getType()));
  if (Value mean = op.getMeanEntropy(); isUsed(mean))
    rewriter.replaceAllUsesWith(
        mean,
        kernel.tensorOf(kernel.meanOfSeenRows(built.entropyBuf, built.lseBuf,
                                              /*perHead=*/true),
                        mean.getType()));
  Value pooled = isUsed(op.getPooled()) ? op.getPooled() : Value();
  Value similarity = isUsed(op.getSimilarity()) ? op.getSimilarity() : Value();
  if (pooled && stats.gk) {
    rewriter.replaceAllUsesWith(
        pooled, kernel.tensorOf(built.pooledBuf, pooled.getType()));
    pooled = Value();
  }
  if (similarity && stats.similarity) {
    rewriter.replaceAllUsesWith(
        similarity, kernel.tensorOf(built.similarityBuf, similarity.getType()));
    similarity = Value();
  }
  if (pooled || similarity) {
    auto rest = attn::AttentionStatsOp::create(
        b, Type(), Type(), pooled ? pooled.getType() : Type(),
        similarity ? similarity.getType() : Type(), op.getQuery(), op.getKey(),
        op.getLse(), op.getScaleAttr(), op.getCausalAttr(), op.getWindowAttr(),
        op.getLengths(), op.getScoreCaptures(), op.getMaskCaptures());
    attn::cloneRegions(op, rest);
    attn::setTilePlan(rest, attn::getTilePlan(op));
    if (pooled)
      rewriter.replaceAllUsesWith(pooled, rest.getPooled());
    if (similarity)
      rewriter.replaceAllUsesWith(similarity, rest.getSimilarity());
  }
  rewriter.eraseOp(op);
}

FailureOr<FlashForwardResult> lowerToFlashForward(RewriterBase &rewriter,
                                                  attn::AttentionOp op,
                                                  attn::CpuPlanAttr plan,
                                                  int64_t vectorBits) {
  if (!canLowerToFlashCpu(op))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  if (plan.getAmx())
    FlashCommon::markUsesAmx(op);
  ForwardStatistics stats = forwardStatistics(op, plan);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  FlashForward kernel(b, op, plan, vectorBits, stats);
  FlashForward::Built built = kernel.build();
  if (stats.op) {
    b.setInsertionPoint(stats.op);
    replaceCompanion(rewriter, b, stats, kernel, built);
  }
  rewriter.replaceOp(op, ValueRange{built.output, built.lse});
  return FlashForwardResult{built.output, built.lse};
}

} // namespace attnc
