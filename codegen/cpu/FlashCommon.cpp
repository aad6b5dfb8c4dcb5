// The flash kernels' shared building blocks (see FlashCommon.h).
#include "codegen/cpu/FlashCommon.h"
#include "codegen/PooledCells.h"

#include "codegen/cpu/FastExp.h"
#include "codegen/cpu/WidenRegion.h"
#include "dialect/AttnAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

// Plans count keys in the kernels' tiles.
static_assert(KernelBuilder::kCols == attn::CpuPlanAttr::kKeyTile);

void FlashCommon::forEachHead(
    StringRef name, ArrayRef<Value> captured, int64_t heads,
    function_ref<void(ArrayRef<Value>, Value, Value)> body, bool shared) {
  auto noScratch = [&](ArrayRef<Value>) { return SmallVector<Value>(); };
  auto task = [&](ArrayRef<Value> args, ArrayRef<Value>, Value t) {
    body(args, arith::DivUIOp::create(b, t, idx(heads)),
         arith::RemUIOp::create(b, t, idx(heads)));
  };
  if (shared)
    sharedParallelTasks(parent, name, captured, B * heads, noScratch, task);
  else
    parallelTasks(parent, name, captured, B * heads, noScratch, task);
}

std::string FlashCommon::shapeName(Value memref) {
  std::string name;
  llvm::raw_string_ostream os(name);
  llvm::interleave(shapeOf(memref), os, "x");
  return name;
}

Value FlashCommon::transposed(Value memref, int64_t tileMultiple,
                              int64_t spareTiles) {
  int64_t count =
      (tiles + tileMultiple - 1) / tileMultiple * tileMultiple + spareTiles;
  // (K's heads: attn.distill's teacher may have other KV heads.)
  int64_t heads = shapeOf(memref)[1];
  Value t = alloc({B, heads, count, shapeOf(memref)[3], kCols});
  // Transposes of one shape share one function (the backward's K and V
  // when D = Dv): the body depends on nothing but the two types.
  std::string name;
  llvm::raw_string_ostream(name)
      << "__attnc_flash_transpose_" << shapeName(memref) << "x"
      << elementTypeOf(memref) << "_" << count;
  forEachHead(
      name, {memref, t}, heads,
      [&](ArrayRef<Value> args, Value bi, Value g) {
        transposeTiles(args[0], args[1], bi, g);
      },
      /*shared=*/true);
  return t;
}

Value FlashCommon::chunkedValues(Value v, int64_t spareKeys) {
  Value t = alloc({B, Hkv, (Dv / kLanes + 1) / 2, Skv + spareKeys, 2 * kLanes});
  std::string name;
  llvm::raw_string_ostream(name)
      << "__attnc_flash_chunk_" << shapeName(v) << "x" << elementTypeOf(v);
  forEachHead(
      name, {v, t}, Hkv,
      [&](ArrayRef<Value> args, Value bi, Value g) {
        copyColumnChunks(args[0], bi, g, Value(), idx(Skv), args[1], {bi, g});
      },
      /*shared=*/true);
  return t;
}

void FlashCommon::copyColumnChunks(const KeySource &src, Value bi, Value g,
                                   Value j0, Value count, Value dst,
                                   ValueRange at) {
  int64_t vectors = shapeOf(src.memref)[3] / kLanes;
  loop(idx(0), count, 1, [&](Value j) {
    Value key = j0 ? arith::AddIOp::create(b, j0, j).getResult() : j;
    SmallVector<Value> row = src.rowAt(b, bi, g, key);
    Value exists = src.limit ? src.exists(b, key) : Value();
    for (int64_t w = 0; w < vectors; ++w) {
      SmallVector<Value> to(at), from(row);
      to.append({idx(w / 2), j, idx(w % 2 * kLanes)});
      from.push_back(idx(w * kLanes));
      Value x = loadVectorF32(src.memref, from);
      if (exists)
        x = arith::SelectOp::create(b, exists, x, splat(f(0.0f)));
      vector::StoreOp::create(b, x, dst, to);
    }
  });
}

FlashCommon::QueryTile FlashCommon::queryTile(Value lengths, Value bi, Value h,
                                              Value ib, int64_t block) {
  QueryTile t;
  t.g = arith::DivUIOp::create(b, h, idx(H / Hkv));
  t.i0 = arith::MulIOp::create(b, ib, idx(rows));
  t.limit = masks.keyLimit(b, lengths, bi);
  t.keys = masks.keysSeenBy(b, t.limit, t.i0, rows, block);
  return t;
}

void FlashCommon::forRows(Value i0, function_ref<void(Value, Value)> body) {
  loop(0, rows, [&](Value r) { body(r, arith::AddIOp::create(b, i0, r)); });
}

SmallVector<Value> FlashCommon::keyMaskUnlessWhole(Value whole, Value j0,
                                                   Value lo, Value hi,
                                                   int64_t width) {
  auto maskType = VectorType::get({kLanes}, b.getI1Type());
  SmallVector<Type> types(width / kLanes, maskType);
  auto ifOp = scf::IfOp::create(b, types, whole, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value all =
      arith::ConstantOp::create(b, DenseElementsAttr::get(maskType, true));
  scf::YieldOp::create(b, SmallVector<Value>(types.size(), all));
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, keyMask(j0, lo, hi, width));
  return SmallVector<Value>(ifOp.getResults());
}

SmallVector<Value> FlashCommon::keyMask(Value j0, Value lo, Value hi,
                                        int64_t width) {
  auto i32Vec = VectorType::get({kLanes}, b.getI32Type());
  auto toI32 = [&](Value index) {
    return arith::IndexCastOp::create(b, b.getI32Type(), index).getResult();
  };
  Value l = splat(toI32(lo)), h = splat(toI32(hi));
  SmallVector<Value> inside;
  for (int64_t w = 0; w < width / kLanes; ++w) {
    SmallVector<int32_t> lanes(kLanes);
    for (int32_t lane = 0; lane < kLanes; ++lane)
      lanes[lane] = int32_t(w * kLanes) + lane;
    Value jv = arith::AddIOp::create(
        b,
        arith::ConstantOp::create(
            b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(lanes))),
        splat(toI32(j0)));
    inside.push_back(MaskTiles::inRange(b, jv, l, h));
  }
  return inside;
}

void FlashCommon::rowsTimesKeys(Value y, Value c, const KeySource &x, Value bi,
                                Value g, Value j0, Value valid, Value alpha,
                                int64_t prefetchAhead) {
  // x as given (not in 32-wide chunks) is read a row at a time: with few
  // rows, chunks of up to 8 vectors (kMaxAccumulators in all), so that
  // each row of x is read once per block rather than once per 32 columns.
  bool chunked = shapeOf(x.memref).size() == 5;
  int64_t width = shapeOf(y).back();
  int64_t perChunk =
      chunked ? 2
              : std::min(width / kLanes,
                         std::clamp<int64_t>(kMaxAccumulators / rows, 2, 8));
  forColumns(
      width,
      [&](Value col, int64_t n) {
        rowsTimesKeysColumns(y, c, x, bi, g, j0, valid, alpha, col, n,
                             prefetchAhead);
      },
      perChunk);
}

void FlashCommon::forColumns(int64_t width,
                             function_ref<void(Value, int64_t)> body,
                             int64_t perChunk) {
  int64_t chunk = perChunk * kLanes, whole = width / chunk;
  if (whole)
    loop(idx(0), idx(whole * chunk), chunk,
         [&](Value col) { body(col, perChunk); });
  for (int64_t col = whole * chunk; col < width;) {
    int64_t n = std::min<int64_t>(2, (width - col) / kLanes);
    body(idx(col), n);
    col += n * kLanes;
  }
}

void FlashCommon::rowsTimesKeysColumns(Value y, Value c, const KeySource &x,
                                       Value bi, Value g, Value j0, Value valid,
                                       Value alpha, Value col, int64_t n,
                                       int64_t prefetchAhead) {
  SmallVector<Value> cols;
  for (int64_t w = 0; w < n; ++w)
    cols.push_back(arith::AddIOp::create(b, col, idx(w * kLanes)));
  // x chunked ([B, Hkv, chunks, S, 32], chunkedValues) or as given.
  bool chunked = shapeOf(x.memref).size() == 5;
  assert(!(chunked && x.table) && "chunks are copies, never paged");
  Value chunk =
      chunked ? arith::DivUIOp::create(b, col, idx(2 * kLanes)) : Value();
  SmallVector<Value> acc;
  for (int64_t r = 0; r < rows; ++r) {
    Value scaleRow;
    if (alpha)
      scaleRow = splat(memref::LoadOp::create(b, alpha, idx(r)));
    for (int64_t w = 0; w < n; ++w) {
      Value v = vector::LoadOp::create(b, vec, y, ValueRange{idx(r), cols[w]});
      acc.push_back(scaleRow ? arith::MulFOp::create(b, v, scaleRow).getResult()
                             : v);
    }
  }
  // sum over keys first + j, j < count, of c[tile..., r, j] x[key].
  auto keyLoop = [&](ValueRange init, Value first, Value count, Value tile) {
    auto jLoop = scf::ForOp::create(b, idx(0), count, idx(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(jLoop.getBody());
    Value j = jLoop.getInductionVar();
    Value key = arith::AddIOp::create(b, first, j);
    if (chunked && prefetchAhead)
      prefetchVectors(
          x.memref,
          {bi, g, chunk, arith::AddIOp::create(b, key, idx(prefetchAhead))}, n);
    if (!chunked && prefetchAhead) {
      // (A paged cache's row ahead through its table: the key clamped.)
      SmallVector<Value> ahead =
          x.rowAt(b, bi, g,
                  arith::MinUIOp::create(
                      b, arith::AddIOp::create(b, key, idx(prefetchAhead)),
                      idx(x.keys() - 1)));
      for (int64_t w = 0; w < n; ++w) {
        SmallVector<Value> at(ahead);
        at.push_back(cols[w]);
        memref::PrefetchOp::create(b, x.memref, at, /*isWrite=*/false,
                                   /*localityHint=*/3, /*isDataCache=*/true);
      }
    }
    SmallVector<Value> xs, row;
    if (!chunked)
      row = x.rowAt(b, bi, g, key);
    for (int64_t w = 0; w < n; ++w)
      xs.push_back(chunked
                       ? loadVectorF32(x.memref, ValueRange{bi, g, chunk, key,
                                                            idx(w * kLanes)})
                       : loadVectorF32(x.memref, ValueRange{row[0], row[1],
                                                            row[2], cols[w]}));
    SmallVector<Value> next(jLoop.getRegionIterArgs());
    for (int64_t r = 0; r < rows; ++r) {
      Value coef = splat(memref::LoadOp::create(
          b, c, tile ? ValueRange{tile, idx(r), j} : ValueRange{idx(r), j}));
      for (int64_t w = 0; w < n; ++w)
        next[r * n + w] =
            vector::FMAOp::create(b, coef, xs[w], next[r * n + w]);
    }
    scf::YieldOp::create(b, next);
    b.setInsertionPointAfter(jLoop);
    return unroll(jLoop, 2);
  };
  SmallVector<Value> sums;
  if (shapeOf(c).size() == 3) {
    // c in key tiles: a loop over them, each over its 32 keys (no
    // division per key).
    Value tiles = arith::DivUIOp::create(
        b, arith::AddIOp::create(b, valid, idx(kCols - 1)), idx(kCols));
    auto tLoop = scf::ForOp::create(b, idx(0), tiles, idx(1), acc);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(tLoop.getBody());
    Value t = tLoop.getInductionVar();
    Value base = arith::MulIOp::create(b, t, idx(kCols));
    Value count = arith::MinUIOp::create(b, idx(kCols),
                                         arith::SubIOp::create(b, valid, base));
    scf::YieldOp::create(b,
                         keyLoop(tLoop.getRegionIterArgs(),
                                 arith::AddIOp::create(b, j0, base), count, t));
    sums.assign(tLoop.getResults().begin(), tLoop.getResults().end());
  } else {
    sums = keyLoop(acc, j0, valid, Value());
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < n; ++w)
      vector::StoreOp::create(b, sums[r * n + w], y,
                              ValueRange{idx(r), cols[w]});
}

void FlashCommon::appendCaptures(SmallVectorImpl<Value> &captured) {
  if (varlen) {
    offsetsArg = captured.size();
    captured.push_back(bufferOf(varlen));
  }
  captureBase = captured.size();
  for (Value capture : captures)
    captured.push_back(bufferOf(capture));
}

void FlashCommon::bindMaskInputs(ArrayRef<Value> args) {
  if (varlen)
    masks.offsets = args[offsetsArg];
}

Value FlashCommon::keyIndices(Value j0, int64_t w) {
  auto type = VectorType::get({kLanes}, b.getIndexType());
  Value iota = arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, ArrayRef<int64_t>(llvm::to_vector(
                                          llvm::seq<int64_t>(0, kLanes)))));
  return arith::AddIOp::create(
      b, iota,
      vector::BroadcastOp::create(
          b, type, arith::AddIOp::create(b, j0, idx(w * kLanes))));
}

FlashCommon::Scores FlashCommon::scoresOf(ArrayRef<Value> caps, Value s,
                                          Value inRange, Value bi, Value h,
                                          Value row, Value j0, int64_t w,
                                          bool prescaled) {
  Scores out;
  out.scaled =
      prescaled ? s : arith::MulFOp::create(b, s, splat(f(scale))).getResult();
  out.modified = out.scaled;
  out.keep = inRange;
  if (scoreMod.empty() && maskMod.empty())
    return out;
  Value j = out.keys = keyIndices(j0, w);
  if (!scoreMod.empty()) {
    SmallVector<Value> bound = {out.scaled, bi, h, row, j};
    bound.append(caps.begin(), caps.begin() + numScoreCaptures);
    out.modified = broadcastToLanes(
        b, b.getLoc(),
        widenBlock(b, b.getLoc(), scoreMod.front(), bound, inRange).front());
  }
  if (!maskMod.empty()) {
    SmallVector<Value> bound = {bi, h, row, j};
    bound.append(caps.begin() + numScoreCaptures, caps.end());
    Value visible = broadcastToLanes(
        b, b.getLoc(),
        widenBlock(b, b.getLoc(), maskMod.front(), bound, inRange).front());
    out.keep = arith::AndIOp::create(b, inRange, visible);
  }
  return out;
}

void FlashCommon::storeTile(ArrayRef<Value> tile, Value buffer, Value col) {
  if (!col)
    col = idx(0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < 2; ++w)
      vector::StoreOp::create(
          b, tile[2 * r + w], buffer,
          ValueRange{idx(r), arith::AddIOp::create(b, col, idx(w * kLanes))});
}

void FlashCommon::zero(Value buffer) {
  ArrayRef<int64_t> s = shapeOf(buffer);
  Value zeros = splat(f(0.0f));
  auto rows = [&](ValueRange leading) {
    loop(0, s[s.size() - 2], [&](Value r) {
      loop(idx(0), idx(s.back()), kLanes, [&](Value c) {
        SmallVector<Value> at(leading);
        at.append({r, c});
        vector::StoreOp::create(b, zeros, buffer, at);
      });
    });
  };
  if (s.size() == 3)
    loop(0, s[0], [&](Value t) { rows(t); });
  else
    rows({});
}

Value FlashCommon::view(Value buffer, ValueRange leading, Value from,
                        int64_t count) {
  auto type = cast<MemRefType>(buffer.getType());
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<OpFoldResult> offsets(leading.begin(), leading.end()),
      sizes(leading.size(), b.getIndexAttr(1)),
      strides(shape.size(), b.getIndexAttr(1));
  SmallVector<int64_t> kept;
  for (size_t d = leading.size(); d < shape.size(); ++d) {
    bool sliced = from && d == leading.size();
    offsets.push_back(sliced ? OpFoldResult(from) : b.getIndexAttr(0));
    kept.push_back(sliced ? count : shape[d]);
    sizes.push_back(b.getIndexAttr(kept.back()));
  }
  auto resultType = memref::SubViewOp::inferRankReducedResultType(
      kept, type, offsets, sizes, strides);
  return memref::SubViewOp::create(b, cast<MemRefType>(resultType), buffer,
                                   offsets, sizes, strides);
}

Value FlashCommon::expVector(Value x) {
  return scalefExp ? buildExpScalef(b, x)
                   : flushTiny(x, math::ExpOp::create(b, x));
}

Value FlashCommon::tree(ArrayRef<Value> values,
                        function_ref<Value(Value, Value)> combine) {
  SmallVector<Value> level(values);
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t w = 0; w + 1 < level.size(); w += 2)
      next.push_back(combine(level[w], level[w + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

Value FlashCommon::flushTiny(Value x, Value e) {
  auto constant = [&](float v) {
    return isa<VectorType>(x.getType()) ? splat(f(v)) : f(v);
  };
  Value tiny = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x,
                                     constant(-87.3365447f));
  return arith::SelectOp::create(b, tiny, constant(0.0f), e);
}

Value FlashCommon::meanOfSeenRows(Value values, Value lse, bool perHead) {
  int64_t groups = perHead ? B * H : 1, rowsPerGroup = B * H * Sq / groups;
  Value mean = perHead ? alloc({B, H}) : alloc({});
  loop(0, groups, [&](Value group) {
    Value first = arith::MulIOp::create(b, group, idx(rowsPerGroup));
    auto rowLoop = scf::ForOp::create(b, idx(0), idx(rowsPerGroup), idx(1),
                                      ValueRange{f(0.0f), f(0.0f)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(rowLoop.getBody());
      SmallVector<Value> at =
          rowOf(arith::AddIOp::create(b, first, rowLoop.getInductionVar()));
      Value seen =
          arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                memref::LoadOp::create(b, lse, at), f(kNegInf));
      Value sum = rowLoop.getRegionIterArgs()[0],
            rowsSeen = rowLoop.getRegionIterArgs()[1];
      scf::YieldOp::create(
          b,
          ValueRange{arith::SelectOp::create(
                         b, seen,
                         arith::AddFOp::create(
                             b, sum, memref::LoadOp::create(b, values, at)),
                         sum),
                     arith::SelectOp::create(
                         b, seen, arith::AddFOp::create(b, rowsSeen, f(1.0f)),
                         rowsSeen)});
    }
    Value sum = rowLoop.getResult(0), rowsSeen = rowLoop.getResult(1);
    Value none =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, rowsSeen, f(0.0f));
    SmallVector<Value> to;
    if (perHead)
      to = {arith::DivUIOp::create(b, group, idx(H)),
            arith::RemUIOp::create(b, group, idx(H))};
    memref::StoreOp::create(
        b,
        arith::SelectOp::create(b, none, f(0.0f),
                                arith::DivFOp::create(b, sum, rowsSeen)),
        mean, to);
  });
  return mean;
}

void FlashCommon::forQueryTilesSeeing(Value limit, Value j0, int64_t width,
                                      int64_t qTiles, Value g, int64_t group,
                                      function_ref<void(Value, Value)> body) {
  Value first, end;
  std::tie(first, end) = masks.rowsSeeing(b, limit, j0, width, rows);
  Value iEnd = arith::MinUIOp::create(b, end, idx(qTiles * rows));
  loop(0, group, [&](Value member) {
    Value h = arith::AddIOp::create(b, arith::MulIOp::create(b, g, idx(group)),
                                    member);
    loop(first, iEnd, rows, [&](Value i0) { body(h, i0); });
  });
}

void FlashCommon::storeTransposedKeys(Value dkT, Value dK, Value bi, Value g,
                                      Value j0) {
  ArrayRef<int64_t> shape = shapeOf(dkT);
  loop(0, shape[0], [&](Value t) {
    Value key0 =
        arith::AddIOp::create(b, j0, arith::MulIOp::create(b, t, idx(kCols)));
    loop(0, kCols, [&](Value c) {
      Value key = arith::AddIOp::create(b, key0, c);
      ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::ult, key, idx(Skv)),
             [&] {
               copyLoop(0, shape[1], [&](Value e) {
                 storeScalar(
                     memref::LoadOp::create(b, dkT, ValueRange{t, e, c}), dK,
                     ValueRange{bi, g, key, e});
               });
             });
    });
  });
}

void FlashCommon::addToPair(Value parts, ValueRange at, Value h, Value g,
                            Value x) {
  auto add = [&](Value u, Value v) {
    SmallVector<Value> where(at);
    where.append({u, v});
    memref::StoreOp::create(
        b, arith::AddFOp::create(b, memref::LoadOp::create(b, parts, where), x),
        parts, where);
  };
  add(h, g);
  auto offDiagonal = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, h, g),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(offDiagonal.thenBlock());
  add(g, h);
}

Value FlashCommon::similarityOf(Value parts) {
  int64_t cells = shapeOf(parts)[1];
  Value sim = alloc({B, H, H});
  loop(0, B, [&](Value bi) {
    // <P_h, P_g> summed over the cells in order, into sim.
    loop(0, H, [&](Value h) {
      loop(0, H, [&](Value g) {
        auto cellLoop = scf::ForOp::create(b, idx(0), idx(cells), idx(1),
                                           ValueRange{f(0.0f)});
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(cellLoop.getBody());
          Value c = cellLoop.getInductionVar();
          scf::YieldOp::create(
              b,
              ValueRange{arith::AddFOp::create(
                  b, cellLoop.getRegionIterArgs()[0],
                  memref::LoadOp::create(b, parts, ValueRange{bi, c, h, g}))});
        }
        memref::StoreOp::create(b, cellLoop.getResult(0), sim,
                                ValueRange{bi, h, g});
      });
    });
    // Divided by the norms; 0 where one is 0. Off the diagonal first: the
    // diagonal holds the squared norms until its own turn.
    loop(0, H, [&](Value h) {
      loop(0, H, [&](Value g) {
        auto ifOp = scf::IfOp::create(
            b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, h, g),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value norms = arith::MulFOp::create(
            b,
            math::SqrtOp::create(
                b, memref::LoadOp::create(b, sim, ValueRange{bi, h, h})),
            math::SqrtOp::create(
                b, memref::LoadOp::create(b, sim, ValueRange{bi, g, g})));
        Value none =
            arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, norms, f(0.0f));
        Value x = memref::LoadOp::create(b, sim, ValueRange{bi, h, g});
        memref::StoreOp::create(
            b,
            arith::SelectOp::create(b, none, f(0.0f),
                                    arith::DivFOp::create(b, x, norms)),
            sim, ValueRange{bi, h, g});
      });
    });
    loop(0, H, [&](Value h) {
      Value norm2 = memref::LoadOp::create(b, sim, ValueRange{bi, h, h});
      Value none =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, norm2, f(0.0f));
      // NaN stays NaN: x / x.
      memref::StoreOp::create(
          b,
          arith::SelectOp::create(b, none, f(0.0f),
                                  arith::DivFOp::create(b, norm2, norm2)),
          sim, ValueRange{bi, h, h});
    });
  });
  return sim;
}

SmallVector<Value> FlashCommon::rowOf(Value n) {
  return {
      arith::DivUIOp::create(b, n, idx(H * Sq)),
      arith::RemUIOp::create(b, arith::DivUIOp::create(b, n, idx(Sq)), idx(H)),
      arith::RemUIOp::create(b, n, idx(Sq))};
}

Value FlashCommon::cellOf(Value e, int64_t n, int64_t count) {
  return pooledCellOf(b, e, n, count);
}

Value FlashCommon::cellStart(Value c, int64_t n, int64_t count) {
  return pooledCellStart(b, c, n, count);
}

void FlashCommon::addToKeyCells(Value p, Value j0, int64_t w, int64_t cells,
                                Value to, ValueRange at) {
  auto i64Vec = VectorType::get({kLanes}, b.getI64Type());
  auto toI64 = [&](Value index) {
    return arith::IndexCastUIOp::create(b, b.getI64Type(), index).getResult();
  };
  auto splatI64 = [&](int64_t v) {
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(i64Vec, ArrayRef<int64_t>(v)));
  };
  Value first = arith::AddIOp::create(b, j0, idx(w * kLanes));
  auto ifOp = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, first, idx(Skv)),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value last = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, first, idx(kLanes - 1)), idx(Skv - 1));
  auto addTo = [&](Value c, Value part) {
    SmallVector<Value> where(at);
    where.push_back(c);
    memref::StoreOp::create(
        b, arith::AddFOp::create(b, memref::LoadOp::create(b, to, where), part),
        to, where);
  };
  auto sumOf = [&](Value lanes) {
    return vector::ReductionOp::create(b, vector::CombiningKind::ADD, lanes,
                                       Value(), arith::FastMathFlags::reassoc)
        .getResult();
  };
  // The keys in one cell (cells of 16 keys or more: most vectors): their
  // sum. (The pooled forward at S = 16384 ran 12% faster with this path.)
  Value firstCell = cellOf(first, Skv, cells),
        lastCell = cellOf(last, Skv, cells);
  auto oneCell = scf::IfOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, firstCell, lastCell),
      /*withElseRegion=*/true);
  b.setInsertionPointToStart(oneCell.thenBlock());
  addTo(firstCell, sumOf(p));
  b.setInsertionPointToStart(oneCell.elseBlock());
  // Each lane's key cell (a lane past Skv lands in a cell past the last).
  SmallVector<int64_t> lanes = llvm::to_vector(llvm::seq<int64_t>(0, kLanes));
  Value keys = arith::AddIOp::create(
      b,
      arith::ConstantOp::create(
          b, DenseElementsAttr::get(i64Vec, ArrayRef<int64_t>(lanes))),
      vector::BroadcastOp::create(b, i64Vec, toI64(first)));
  Value laneCells = arith::DivUIOp::create(
      b,
      arith::SubIOp::create(
          b,
          arith::MulIOp::create(b, arith::AddIOp::create(b, keys, splatI64(1)),
                                splatI64(cells)),
          splatI64(1)),
      splatI64(Skv));
  loop(firstCell, arith::AddIOp::create(b, lastCell, idx(1)), 1, [&](Value c) {
    Value inCell =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, laneCells,
                              vector::BroadcastOp::create(b, i64Vec, toI64(c)));
    addTo(c, sumOf(arith::SelectOp::create(b, inCell, p, splat(f(0.0f)))));
  });
}

void FlashCommon::toCellMeans(Value pooled, Value bi, Value h, Value rowCell,
                              int64_t gq, int64_t gk) {
  Value cellRows = arith::SubIOp::create(
      b, cellStart(arith::AddIOp::create(b, rowCell, idx(1)), Sq, gq),
      cellStart(rowCell, Sq, gq));
  loop(0, gk, [&](Value c) {
    Value cellKeys = arith::SubIOp::create(
        b, cellStart(arith::AddIOp::create(b, c, idx(1)), Skv, gk),
        cellStart(c, Skv, gk));
    Value count = arith::UIToFPOp::create(
        b, f32,
        arith::IndexCastUIOp::create(
            b, b.getI64Type(), arith::MulIOp::create(b, cellRows, cellKeys)));
    SmallVector<Value> at{bi, h, rowCell, c};
    memref::StoreOp::create(
        b,
        arith::DivFOp::create(b, memref::LoadOp::create(b, pooled, at), count),
        pooled, at);
  });
}

} // namespace attnc
