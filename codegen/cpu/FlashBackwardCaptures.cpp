// What float score captures add to the flash backward (see
// FlashBackward.h): Delta from recomputed P and dP where the output is
// narrow, per-task partial gradients summed in task order, and the
// score_mod's reverse sweep widened to 16 lanes.
#include "codegen/cpu/FlashBackward.h"

#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

Value FlashBackward::exactRowDeltas(Value qT, Value kt, Value vt, Value dOT,
                                    Value lse, Value dLse, Value lengths) {
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
        bindMaskInputs(args);
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
          if (dot) {
            rowProducts(args[0], args[1], {bi, qt.g}, bi, h, qt.i0, tile, sBuf);
            rowProducts(args[3], args[2], {bi, qt.g}, bi, h, qt.i0, tile,
                        dpBuf);
          } else {
            storeTile(
                tileProduct(args[0], {bi, h, ib}, args[1], bi, qt.g, tile),
                sBuf);
            storeTile(
                tileProduct(args[3], {bi, h, ib}, args[2], bi, qt.g, tile),
                dpBuf);
          }
          Value whole = masks.isWhole(b, qt.limit, qt.i0, rows, j0, kCols,
                                      /*existsOnly=*/true);
          forRows(qt.i0, [&](Value r, Value i) {
            MaskTiles::RowRange range =
                masks.rowRange(b, qt.limit, i, /*existsOnly=*/true);
            SmallVector<Value> in =
                keyMaskUnlessWhole(whole, j0, range.lo, range.hi);
            Value l = rowLse(args[4], bi, h, range.row);
            Value acc =
                vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)});
            for (int64_t w = 0; w < 2; ++w) {
              SmallVector<Value, 2> at = {r, idx(w * kLanes)};
              Value sv = vector::LoadOp::create(b, vec, sBuf, at);
              Value dp = vector::LoadOp::create(b, vec, dpBuf, at);
              Scores sc = scoresOf(caps, sv, in[w], bi, h, range.row, j0, w,
                                   /*prescaled=*/!dot);
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

SmallVector<Value> FlashBackward::zeroedPartials(int64_t tasks) {
  SmallVector<Value> partials;
  for (unsigned k : floatCaptures) {
    int64_t elements = cast<ShapedType>(captures[k].getType()).getNumElements();
    Value partial = alloc({tasks, elements});
    loop(0, tasks, [&](Value t) {
      loop(0, elements, [&](Value e) {
        memref::StoreOp::create(b, f(0.0f), partial, ValueRange{t, e});
      });
    });
    partials.push_back(partial);
  }
  return partials;
}

SmallVector<Value> FlashBackward::captureGrads(ArrayRef<Value> partials) {
  SmallVector<Value> grads;
  for (auto [k, grad] : llvm::enumerate(op.getScoreCapturesGrad())) {
    if (!isFloatTensor(grad)) {
      grads.push_back(arith::ConstantOp::create(
          b, cast<TypedAttr>(b.getZeroAttr(grad.getType()))));
      continue;
    }
    grads.push_back(tensorOf(
        sumPartials(partials[partialIndex(k)], captures[k]), grad.getType()));
  }
  return grads;
}

Value FlashBackward::sumPartials(Value partial, Value capture) {
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
    flat = memref::CollapseShapeOp::create(b, grad,
                                           ArrayRef<ReassociationIndices>{all});
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

void FlashBackward::accumulateCaptureGrads(ArrayRef<Value> partials, Value task,
                                           ArrayRef<Value> adjoints,
                                           Value keep) {
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
      Value index = uniform ? indices[d] : broadcastToLanes(b, loc, indices[d]);
      Value step =
          uniform ? idx(stride) : broadcastToLanes(b, loc, idx(stride));
      linear = arith::AddIOp::create(b, linear,
                                     arith::MulIOp::create(b, index, step));
      stride *= shape[d];
    }
    Value partial = partials[partialIndex(read.capture)];
    auto add = [&](Value at, Value value) {
      Value old = memref::LoadOp::create(b, partial, ValueRange{task, at});
      memref::StoreOp::create(b, arith::AddFOp::create(b, old, value), partial,
                              ValueRange{task, at});
    };
    if (uniform) {
      add(linear,
          vector::ReductionOp::create(b, vector::CombiningKind::ADD, adjoint,
                                      Value(), arith::FastMathFlags::reassoc));
      continue;
    }
    // Lanes one at a time (several may hit one element); a masked lane
    // adds 0 at a clamped, in-bounds offset.
    auto lanes = [&, linear]() -> Value {
      Value last = broadcastToLanes(b, loc, idx(stride - 1));
      Value clamped = arith::MinSIOp::create(
          b,
          arith::MaxSIOp::create(b, linear, broadcastToLanes(b, loc, idx(0))),
          last);
      for (int64_t lane = 0; lane < kLanes; ++lane)
        add(vector::ExtractOp::create(b, clamped, lane),
            vector::ExtractOp::create(b, adjoint, lane));
      return Value();
    };
    // 16 consecutive elements (bias[i, j]): one vector of them.
    Value first = consecutiveOffset(b, loc, indices, shape);
    if (!first) {
      lanes();
      continue;
    }
    ifConsecutiveInBounds(
        b, loc, first, stride, Type(),
        [&]() -> Value {
          Value old =
              vector::LoadOp::create(b, vec, partial, ValueRange{task, first});
          vector::StoreOp::create(b, arith::AddFOp::create(b, old, adjoint),
                                  partial, ValueRange{task, first});
          return Value();
        },
        lanes);
  }
}

size_t FlashBackward::partialIndex(unsigned capture) {
  return llvm::find(floatCaptures, capture) - floatCaptures.begin();
}

void FlashBackward::buildAdjointBlock() {
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

} // namespace attnc
