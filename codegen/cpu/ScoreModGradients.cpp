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
                                   Value task) {
  if (!adjointBlock)
    return dsModified;
  SmallVector<Value> bound = {sc.scaled, bi, h, row, sc.keys};
  bound.append(caps.begin(), caps.begin() + numScoreCaptures);
  bound.push_back(dsModified);
  SmallVector<Value> adjoints =
      widenBlock(b, b.getLoc(), *adjointBlock, bound, sc.keep);
  if (!partials.empty())
    accumulateCaptureGrads(partials, task, adjoints, sc.keep);
  // (0 where dS' is 0: buildScoreModAdjoints.)
  return broadcastToLanes(b, b.getLoc(), adjoints.front());
}

SmallVector<Value> ScoreModGradients::zeroedPartials(int64_t tasks) {
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

SmallVector<Value> ScoreModGradients::captureGrads(ArrayRef<Value> partials,
                                                   TypeRange gradTypes) {
  SmallVector<Value> grads;
  for (auto [k, type] : llvm::enumerate(gradTypes)) {
    auto tensor = cast<RankedTensorType>(type);
    if (!tensor.getElementType().isFloat()) {
      grads.push_back(
          arith::ConstantOp::create(b, cast<TypedAttr>(b.getZeroAttr(tensor))));
      continue;
    }
    grads.push_back(
        tensorOf(sumPartials(partials[partialIndex(k)], captures[k]), tensor));
  }
  return grads;
}

bool ScoreModGradients::partialsFit(ValueRange scoreCaptures, int64_t tasks,
                                    int64_t scoreFloats) {
  int64_t partialFloats = 0;
  for (Value capture : scoreCaptures)
    if (isFloatTensor(capture))
      partialFloats +=
          tasks * cast<ShapedType>(capture.getType()).getNumElements();
  return partialFloats <= std::max<int64_t>(1 << 24, 4 * scoreFloats);
}

Value ScoreModGradients::sumPartials(Value partial, Value capture) {
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

void ScoreModGradients::accumulateCaptureGrads(ArrayRef<Value> partials,
                                               Value task,
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
    reads.push_back({read.capture, read.indices.size()});
    results.push_back(read.adjoint);
    results.append(read.indices);
  }
  func::ReturnOp::create(inner, b.getLoc(), results);
}

} // namespace attnc
