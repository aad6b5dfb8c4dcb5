// What the CPU kernels that differentiate through a score_mod share (see
// ScoreModGradients.h).
#include "codegen/cpu/ScoreModGradients.h"

#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace attnc {

Value ScoreModGradients::recomputedP(const Scores &sc, Value lse) {
  return arith::SelectOp::create(
      b, sc.keep, expVector(arith::SubFOp::create(b, sc.modified, lse)),
      splat(f(0.0f)));
}

Value ScoreModGradients::rowLse(Value lse, Value bi, Value h, Value row) {
  Value l = memref::LoadOp::create(b, lse, ValueRange{bi, h, row});
  Value empty =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, l, f(kNegInf));
  return splat(arith::SelectOp::create(b, empty, f(-kNegInf), l));
}

Value ScoreModGradients::entropyCotangents(Value lse, Value entropyGrad,
                                           Value meanEntropyGrad) {
  Value g = alloc({B, H, Sq});
  loop(0, B, [&](Value bi) {
    loop(0, H, [&](Value h) {
      auto seenRow = [&](Value i) {
        return arith::CmpFOp::create(
            b, arith::CmpFPredicate::UNE,
            memref::LoadOp::create(b, lse, ValueRange{bi, h, i}), f(kNegInf));
      };
      // The mean's cotangent, shared among the rows that see a key.
      Value share = f(0.0f);
      if (meanEntropyGrad) {
        auto count =
            scf::ForOp::create(b, idx(0), idx(Sq), idx(1), ValueRange{f(0.0f)});
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(count.getBody());
          Value n = count.getRegionIterArgs()[0];
          scf::YieldOp::create(b,
                               ValueRange{arith::SelectOp::create(
                                   b, seenRow(count.getInductionVar()),
                                   arith::AddFOp::create(b, n, f(1.0f)), n)});
        }
        share = arith::DivFOp::create(
            b, memref::LoadOp::create(b, meanEntropyGrad, ValueRange{bi, h}),
            arith::MaximumFOp::create(b, count.getResult(0), f(1.0f)));
      }
      loop(0, Sq, [&](Value i) {
        SmallVector<Value> at{bi, h, i};
        Value x = share;
        if (entropyGrad)
          x = arith::AddFOp::create(b, x,
                                    memref::LoadOp::create(b, entropyGrad, at));
        memref::StoreOp::create(
            b, arith::SelectOp::create(b, seenRow(i), x, f(0.0f)), g, at);
      });
    });
  });
  return g;
}

Value ScoreModGradients::scoreGrad(const Scores &sc, ArrayRef<Value> caps,
                                   Value bi, Value h, Value row,
                                   Value dsModified, ArrayRef<Value> partials,
                                   Value task, Value headSums) {
  if (!adjointBlock)
    return dsModified;
  SmallVector<Value> bound = {sc.scaled, bi, h, row, sc.keys};
  bound.append(caps.begin(), caps.begin() + numScoreCaptures);
  bound.push_back(dsModified);
  SmallVector<Value> adjoints =
      widenBlock(b, b.getLoc(), *adjointBlock, bound, sc.keep);
  if (!partials.empty())
    accumulateCaptureGrads(partials, task, row, adjoints, sc.keep, headSums);
  // (0 where dS' is 0: buildScoreModAdjoints.)
  return broadcastToLanes(b, b.getLoc(), adjoints.front());
}

size_t ScoreModGradients::readResult(size_t r) const {
  size_t at = 1;
  for (size_t k = 0; k < r; ++k)
    at += 1 + reads[k].rank;
  return at;
}

SmallVector<Value> ScoreModGradients::readAdjoints(const Scores &sc,
                                                   ArrayRef<Value> caps,
                                                   Value bi, Value h, Value row,
                                                   Value seed,
                                                   ArrayRef<size_t> which) {
  SmallVector<Value> bound = {sc.scaled, bi, h, row, sc.keys};
  bound.append(caps.begin(), caps.begin() + numScoreCaptures);
  bound.push_back(seed);
  SmallVector<Value> adjoints =
      widenBlock(b, b.getLoc(), *adjointBlock, bound, sc.keep);
  SmallVector<Value> result;
  for (size_t r : which)
    result.push_back(arith::SelectOp::create(
        b, sc.keep, broadcastToLanes(b, b.getLoc(), adjoints[readResult(r)]),
        splat(f(0.0f))));
  return result;
}

OperandRange ScoreModGradients::readIndices(size_t r) const {
  return adjointBlock->getTerminator()->getOperands().slice(readResult(r) + 1,
                                                            reads[r].rank);
}

bool ScoreModGradients::readsPerHead(size_t r) const {
  return llvm::all_of(readIndices(r), [&](Value x) {
    return x == adjointBlock->getArgument(1) ||
           x == adjointBlock->getArgument(2) || matchPattern(x, m_Constant());
  });
}

Value ScoreModGradients::perHeadOffset(size_t r, Value bi, Value h) {
  assert(readsPerHead(r) && "a read at other indices");
  OperandRange indices = readIndices(r);
  ArrayRef<int64_t> shape = shapeOf(captures[reads[r].capture]);
  Value offset = idx(0);
  int64_t stride = 1;
  for (int64_t d = reads[r].rank - 1; d >= 0; --d) {
    IntegerAttr constant;
    Value index = indices[d] == adjointBlock->getArgument(1)   ? bi
                  : indices[d] == adjointBlock->getArgument(2) ? h
                  : matchPattern(indices[d], m_Constant(&constant))
                      ? idx(constant.getInt())
                      : Value();
    offset = arith::AddIOp::create(
        b, offset, arith::MulIOp::create(b, index, idx(stride)));
    stride *= shape[d];
  }
  return offset;
}

bool ScoreModGradients::hasReadsPerHead() const {
  for (size_t r = 0; r < reads.size(); ++r)
    if (readsPerHead(r))
      return true;
  return false;
}

void ScoreModGradients::zeroHeadSums(Value headSums) {
  for (size_t r = 0; r < reads.size(); ++r)
    if (readsPerHead(r))
      vector::StoreOp::create(b, splat(f(0.0f)), headSums,
                              ValueRange{idx(r), idx(0)});
}

void ScoreModGradients::flushHeadSums(Value headSums, ArrayRef<Value> partials,
                                      Value task, Value bi, Value h) {
  for (size_t r = 0; r < reads.size(); ++r) {
    if (!readsPerHead(r))
      continue;
    Value partial = partials[partialIndex(reads[r].capture)];
    SmallVector<Value, 2> at = {task, perHeadOffset(r, bi, h)};
    Value sum = vector::ReductionOp::create(
        b, vector::CombiningKind::ADD,
        vector::LoadOp::create(b, vec, headSums, ValueRange{idx(r), idx(0)}),
        Value(), arith::FastMathFlags::reassoc);
    memref::StoreOp::create(
        b,
        arith::AddFOp::create(b, memref::LoadOp::create(b, partial, at), sum),
        partial, at);
  }
}

void ScoreModGradients::forVectorsOnPool(
    StringRef name, ArrayRef<Value> captured, int64_t count,
    function_ref<void(ArrayRef<Value>, Value)> body) {
  // Elements per task.
  constexpr int64_t kChunk = 4096;
  parallelTasks(
      parent, name, captured, (count + kChunk - 1) / kChunk,
      [&](ArrayRef<Value>) { return SmallVector<Value>(); },
      [&](ArrayRef<Value> args, ArrayRef<Value>, Value t) {
        Value first = arith::MulIOp::create(b, t, idx(kChunk));
        Value end = arith::MinUIOp::create(
            b, arith::AddIOp::create(b, first, idx(kChunk)), idx(count));
        loop(first, end, kLanes, [&](Value e) { body(args, e); });
      });
}

SmallVector<Value> ScoreModGradients::zeroedPartials(int64_t tasks) {
  // Rows of whole vectors (the columns past the capture's elements are
  // zeroed too, never read), zeroed in chunks on the pool: a [Sq, Skv]
  // bias's partials are a copy of it per task (S = 2048, H = 8: 128 MB).
  // With the sum below on the pool too, that bias's backward (f32, B=1,
  // D=64, causal, 2 threads, AOT at -O3, three rounds of the minimum of 8)
  // ran in 40.6-42.2 ms against 42.3-43.9 ms with both on one thread
  // (D=128: 66.1-68.8 against 68.3-69.6 ms).
  SmallVector<Value> partials;
  for (unsigned k : floatCaptures) {
    int64_t elements = cast<ShapedType>(captures[k].getType()).getNumElements();
    int64_t padded = (elements + kLanes - 1) / kLanes * kLanes;
    int64_t rowCount = llvm::is_contained(sharedCaptures, k) ? 1 : tasks;
    Value partial = alloc({rowCount, padded});
    Value flat = memref::CollapseShapeOp::create(
        b, partial, ArrayRef<ReassociationIndices>{{0, 1}});
    forVectorsOnPool("__attnc_zero_partials", {flat}, rowCount * padded,
                     [&](ArrayRef<Value> args, Value e) {
                       vector::StoreOp::create(b, splat(f(0.0f)), args[0], e);
                     });
    partials.push_back(partial);
  }
  return partials;
}

SmallVector<Value> ScoreModGradients::captureGrads(ArrayRef<Value> partials,
                                                   TypeRange gradTypes) {
  SmallVector<Value> grads;
  for (auto [k, type] : llvm::enumerate(gradTypes)) {
    auto tensor = cast<RankedTensorType>(type);
    if (!llvm::is_contained(floatCaptures, k)) {
      grads.push_back(
          arith::ConstantOp::create(b, cast<TypedAttr>(b.getZeroAttr(tensor))));
      continue;
    }
    grads.push_back(
        tensorOf(sumPartials(partials[partialIndex(k)], captures[k]), tensor));
  }
  return grads;
}

void ScoreModGradients::shareCapturesReadAtTheirKeys() {
  for (unsigned k : floatCaptures)
    if (isReadAtItsKey(scoreMod, k, Skv))
      sharedCaptures.push_back(k);
}

bool ScoreModGradients::partialsFit(Region &scoreMod, ValueRange scoreCaptures,
                                    ValueRange grads, int64_t tasks,
                                    int64_t scoreFloats, int64_t keyTaskKeys) {
  int64_t partialFloats = 0;
  for (auto [k, capture, grad] : llvm::enumerate(scoreCaptures, grads)) {
    if (!isFloatTensor(capture) || !isUsed(grad))
      continue;
    bool shared = keyTaskKeys && isReadAtItsKey(scoreMod, k, keyTaskKeys);
    partialFloats += (shared ? 1 : tasks) *
                     cast<ShapedType>(capture.getType()).getNumElements();
  }
  return partialFloats <= std::max<int64_t>(1 << 24, 4 * scoreFloats);
}

Value ScoreModGradients::sumPartials(Value partial, Value capture) {
  // Each element's rows summed in task order, ((p0 + p1) + p2) + ..., into
  // the gradient: 16 elements at a time, chunks of them on the pool, the
  // elements past the last whole vector one at a time here.
  auto type = cast<RankedTensorType>(capture.getType());
  Type element = type.getElementType();
  int64_t tasks = shapeOf(partial)[0], elements = type.getNumElements(),
          whole = elements / kLanes * kLanes;
  // One f32 row of whole vectors (a shared one) is the gradient itself.
  if (tasks == 1 && element.isF32() && whole == elements) {
    Value flat = memref::CollapseShapeOp::create(
        b, partial, ArrayRef<ReassociationIndices>{{0, 1}});
    if (type.getRank() == 1)
      return flat;
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d)
      all.push_back(d);
    return memref::ExpandShapeOp::create(
        b, MemRefType::get(type.getShape(), element), flat,
        ArrayRef<ReassociationIndices>{all});
  }
  Value grad = alloc(type.getShape(), element);
  Value flat = grad;
  if (type.getRank() > 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d)
      all.push_back(d);
    flat = memref::CollapseShapeOp::create(b, grad,
                                           ArrayRef<ReassociationIndices>{all});
  }
  // partials[0, e] + ... + partials[tasks - 1, e] (16 lanes from e for a
  // vector type), in the gradient's element type.
  auto sumAt = [&](Value partials, Value e, Type sumType) {
    auto load = [&](Value t) -> Value {
      if (auto v = dyn_cast<VectorType>(sumType))
        return vector::LoadOp::create(b, v, partials, ValueRange{t, e});
      return memref::LoadOp::create(b, partials, ValueRange{t, e});
    };
    auto sum = scf::ForOp::create(
        b, idx(1), idx(tasks), idx(1), ValueRange{load(idx(0))},
        [&](OpBuilder &, Location, Value t, ValueRange acc) {
          scf::YieldOp::create(
              b, ValueRange{arith::AddFOp::create(b, acc[0], load(t))});
        });
    Value x = sum.getResult(0);
    if (!element.isF32())
      x = arith::TruncFOp::create(b,
                                  isa<VectorType>(sumType)
                                      ? Type(VectorType::get({kLanes}, element))
                                      : element,
                                  x);
    return x;
  };
  if (whole)
    forVectorsOnPool("__attnc_sum_partials", {partial, flat}, whole,
                     [&](ArrayRef<Value> args, Value e) {
                       vector::StoreOp::create(b, sumAt(args[0], e, vec),
                                               args[1], e);
                     });
  loop(whole, elements, [&](Value e) {
    // A 0-d capture's one element has no index.
    memref::StoreOp::create(b, sumAt(partial, e, f32), flat,
                            type.getRank() ? ValueRange{e} : ValueRange{});
  });
  return grad;
}

void ScoreModGradients::accumulateCaptureGrads(ArrayRef<Value> partials,
                                               Value task, Value queryRow,
                                               ArrayRef<Value> adjoints,
                                               Value keep, Value headSums) {
  Location loc = b.getLoc();
  size_t next = 1;
  for (size_t r = 0; r < reads.size(); ++r) {
    const CaptureRead &read = reads[r];
    // (In f32 whatever the capture's type: buildScoreModAdjoints.)
    Value adjoint = arith::SelectOp::create(
        b, keep, broadcastToLanes(b, loc, adjoints[next]), splat(f(0.0f)));
    ArrayRef<Value> indices = adjoints.slice(next + 1, read.rank);
    next += 1 + read.rank;
    // One element for the whole call: its lanes summed once, by
    // flushHeadSums (a lane sum per 16 scores and the load and store of
    // the element were a fifth of an ALiBi backward's score loop).
    if (headSums && readsPerHead(r)) {
      SmallVector<Value, 2> at = {idx(r), idx(0)};
      Value old = vector::LoadOp::create(b, vec, headSums, at);
      vector::StoreOp::create(b, arith::AddFOp::create(b, old, adjoint),
                              headSums, at);
      continue;
    }
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
    // A shared row (shareCapturesReadAtTheirKeys) takes only the kept lanes
    // in bounds: elements of this task's own keys. The others may be another
    // task's, which adding 0 would race with.
    bool shared = llvm::is_contained(sharedCaptures, read.capture);
    Value row = shared ? idx(0) : task;
    auto add = [&](Value at, Value value) {
      Value old = memref::LoadOp::create(b, partial, ValueRange{row, at});
      memref::StoreOp::create(b, arith::AddFOp::create(b, old, value), partial,
                              ValueRange{row, at});
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
      Value zero = broadcastToLanes(b, loc, idx(0));
      Value clamped = arith::MinSIOp::create(
          b, arith::MaxSIOp::create(b, linear, zero), last);
      Value owned = shared
                        ? arith::AndIOp::create(
                              b, keep,
                              arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                                    clamped, linear))
                        : Value();
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        Value at = vector::ExtractOp::create(b, clamped, lane),
              value = vector::ExtractOp::create(b, adjoint, lane);
        if (!shared) {
          add(at, value);
          continue;
        }
        auto ifOp = scf::IfOp::create(
            b, vector::ExtractOp::create(b, owned, lane), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        add(at, value);
      }
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
          SmallVector<Value, 2> at = {row, first};
          // bias[..., i, j]: the elements of the next query tile's row,
          // which the kernels add to after this tile's (rows Skv floats
          // apart, each an L2 miss: 2-4% of a [Sq, Skv] bias's bf16
          // backward on Zen 5).
          if (read.rank >= 2 && indices[read.rank - 2] == queryRow) {
            Value ahead = arith::MinSIOp::create(
                b, arith::AddIOp::create(b, first, idx(rows * shape.back())),
                idx(stride - 1));
            memref::PrefetchOp::create(b, partial, ValueRange{row, ahead},
                                       /*isWrite=*/true, /*localityHint=*/3,
                                       /*isDataCache=*/true);
          }
          if (shared) {
            Value old = vector::MaskedLoadOp::create(b, vec, partial, at, keep,
                                                     splat(f(0.0f)));
            vector::MaskedStoreOp::create(
                b, partial, at, keep, arith::AddFOp::create(b, old, adjoint));
            return Value();
          }
          Value old = vector::LoadOp::create(b, vec, partial, at);
          vector::StoreOp::create(b, arith::AddFOp::create(b, old, adjoint),
                                  partial, at);
          return Value();
        },
        lanes);
  }
}

size_t ScoreModGradients::partialIndex(unsigned capture) {
  return llvm::find(floatCaptures, capture) - floatCaptures.begin();
}

void ScoreModGradients::buildAdjointBlock() {
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
    if (!llvm::is_contained(floatCaptures, read.capture))
      continue;
    reads.push_back({read.capture, read.indices.size()});
    results.push_back(read.adjoint);
    results.append(read.indices);
  }
  func::ReturnOp::create(inner, b.getLoc(), results);
}

} // namespace attnc
