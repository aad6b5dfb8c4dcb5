// The flash-attention CPU kernel (see FlashAttention.h).
//
// Written with scf/vector/memref builders rather than linalg tiling because
// the online softmax couples the two matmuls through per-row state (running
// max, sum, rescaling) that upstream tiling does not express; the
// microkernels are the classic broadcast-FMA register blocks:
//   S[r, 0:32]  += Q[r, d] * K^T[d, 0:32]      (Kt is K transposed, padded)
//   O[r, c:c+32] += P[r, j] * V[j, c:c+32]
#include "codegen/cpu/FlashAttention.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>

using namespace mlir;

namespace attnc {
namespace {

constexpr int64_t kLanes = 16; // one 512-bit vector of f32
constexpr int64_t kCols = 32;  // keys per tile: two vectors

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

class FlashBuilder {
public:
  FlashBuilder(ImplicitLocOpBuilder &b, attn::AttentionOp op, int64_t rows)
      : b(b), op(op), rows(rows) {
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
                      v = shapeOf(op.getValue());
    B = q[0], H = q[1], Sq = q[2], D = q[3], Hkv = k[1], Skv = k[2],
    Dv = v[3];
    SkvPad = (Skv + kCols - 1) / kCols * kCols;
    f32 = b.getF32Type();
    vec = VectorType::get({kLanes}, f32);
  }

  std::pair<Value, Value> build() {
    auto memrefOf = [&](Value tensor) {
      auto type = cast<RankedTensorType>(tensor.getType());
      return bufferization::ToBufferOp::create(
          b, MemRefType::get(type.getShape(), type.getElementType()), tensor,
          /*read_only=*/true);
    };
    Q = memrefOf(op.getQuery());
    K = memrefOf(op.getKey());
    V = memrefOf(op.getValue());
    if (op.getLengths())
      lengths = memrefOf(op.getLengths());
    auto alloc = [&](ArrayRef<int64_t> shape) {
      return memref::AllocOp::create(b, MemRefType::get(shape, f32),
                                     b.getI64IntegerAttr(64));
    };
    O = alloc({B, H, Sq, Dv});
    L = alloc({B, H, Sq});
    // K^T in key tiles: Kt[b, g, tile, d, 0:32] is contiguous per tile, so
    // the d loop walks 128-byte steps (a row-major K^T would stride by
    // SkvPad floats and alias in the L1 sets).
    Kt = alloc({B, Hkv, SkvPad / kCols, D, kCols});
    transposeKeys();
    // The tasks, one per (batch, head, query tile), run on the runtime's
    // thread pool: their loop is outlined into a function that
    // attn-lower-parallel-calls turns into an attnc_parallel_for call.
    int64_t tiles = (Sq + rows - 1) / rows;
    SmallVector<Value> args = {Q, Kt, V, O, L};
    if (lengths)
      args.push_back(lengths);
    Value outputs[2] = {O, L};
    func::FuncOp tasks = buildTaskFunction(tiles);
    O = outputs[0];
    L = outputs[1];
    args.push_back(idx(0));
    args.push_back(idx(B * H * tiles));
    func::CallOp::create(b, tasks, args);

    auto tensorOf = [&](Value memref, Type type) {
      return bufferization::ToTensorOp::create(b, type, memref,
                                               b.getUnitAttr(),
                                               b.getUnitAttr())
          .getResult();
    };
    return {tensorOf(O, op.getOutput().getType()),
            tensorOf(L, op.getLse().getType())};
  }

private:
  /// func.func private @__attnc_flash_tasks(Q, Kt, V, O, L, [lengths],
  /// begin, end) running tasks [begin, end) with its own tile buffers.
  func::FuncOp buildTaskFunction(int64_t tiles) {
    auto parent = op->getParentOfType<func::FuncOp>();
    SmallVector<Value> captured = {Q, Kt, V, O, L};
    if (lengths)
      captured.push_back(lengths);
    SmallVector<Type> types(ValueRange(captured).getTypes());
    types.push_back(b.getIndexType());
    types.push_back(b.getIndexType());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(parent);
    auto fn = func::FuncOp::create(
        b, "__attnc_flash_tasks", FunctionType::get(b.getContext(), types, {}));
    SymbolTable(parent->getParentOp()).insert(fn);
    fn.setPrivate();
    fn->setAttr("attnc.parallel_tasks", b.getUnitAttr());
    Block *block = fn.addEntryBlock();
    b.setInsertionPointToStart(block);
    Q = block->getArgument(0);
    Kt = block->getArgument(1);
    V = block->getArgument(2);
    O = block->getArgument(3);
    L = block->getArgument(4);
    if (lengths)
      lengths = block->getArgument(5);
    Value begin = block->getArgument(block->getNumArguments() - 2);
    Value end = block->getArgument(block->getNumArguments() - 1);
    oBuf = memref::AllocaOp::create(b, MemRefType::get({rows, Dv}, f32),
                                    b.getI64IntegerAttr(64));
    pBuf = memref::AllocaOp::create(b, MemRefType::get({rows, kCols}, f32),
                                    b.getI64IntegerAttr(64));
    loop(begin, end, 1, [&](Value t) {
      Value ib = arith::RemUIOp::create(b, t, idx(tiles));
      Value bh = arith::DivUIOp::create(b, t, idx(tiles));
      Value h = arith::RemUIOp::create(b, bh, idx(H));
      Value bi = arith::DivUIOp::create(b, bh, idx(H));
      task(bi, h, ib);
    });
    func::ReturnOp::create(b);
    return fn;
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f(float v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value splat(Value scalar) {
    return vector::BroadcastOp::create(b, VectorType::get({kLanes},
                                                          scalar.getType()),
                                       scalar);
  }

  /// for (i = lo; i < hi; ++i) body(i), without loop-carried values.
  void loop(int64_t lo, int64_t hi, function_ref<void(Value)> body) {
    loop(idx(lo), idx(hi), 1, body);
  }
  void loop(Value lo, Value hi, int64_t step, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, lo, hi, idx(step));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(forOp.getInductionVar());
  }

  /// Kt[b, g, j / 32, d, j % 32] = K[b, g, j, d] for j < Skv, 0 in the
  /// padding.
  void transposeKeys() {
    loop(0, B, [&](Value bi) {
      loop(0, Hkv, [&](Value g) {
        loop(0, SkvPad, [&](Value j) {
          Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                j, idx(Skv));
          Value jc = arith::MinUIOp::create(b, j, idx(Skv - 1));
          Value tile = arith::DivUIOp::create(b, j, idx(kCols));
          Value lane = arith::RemUIOp::create(b, j, idx(kCols));
          loop(0, D, [&](Value d) {
            Value x = memref::LoadOp::create(b, K, ValueRange{bi, g, jc, d});
            Value y = arith::SelectOp::create(b, inRange, x, f(0.0f));
            memref::StoreOp::create(b, y, Kt,
                                    ValueRange{bi, g, tile, d, lane});
          });
        });
      });
    });
  }

  /// One task: query rows [i0, i0 + rows) of head h in batch bi.
  void task(Value bi, Value h, Value ib) {
    Value g = arith::DivUIOp::create(b, h, idx(H / Hkv));
    Value i0 = arith::MulIOp::create(b, ib, idx(rows));
    // Rows past Sq repeat the last row; they are computed, never stored.
    SmallVector<Value> row, jMin, jMax;
    Value limit = idx(Skv);
    if (lengths) {
      Value len = memref::LoadOp::create(b, lengths, bi);
      Value lenIdx = arith::IndexCastOp::create(b, b.getIndexType(), len);
      lenIdx = arith::MaxSIOp::create(b, lenIdx, idx(0));
      limit = arith::MinSIOp::create(b, limit, lenIdx);
    }
    bool causal = op.getCausal() || op.getWindow().has_value();
    for (int64_t r = 0; r < rows; ++r) {
      Value i = arith::MinUIOp::create(
          b, arith::AddIOp::create(b, i0, idx(r)), idx(Sq - 1));
      row.push_back(i);
      Value hi = limit;
      if (causal)
        hi = arith::MinSIOp::create(b, hi,
                                    arith::AddIOp::create(b, i, idx(1)));
      jMax.push_back(hi);
      Value lo = idx(0);
      if (std::optional<int64_t> w = op.getWindow())
        lo = arith::MaxSIOp::create(
            b, lo, arith::SubIOp::create(b, i, idx(*w - 1)));
      jMin.push_back(lo);
    }
    // Key tiles that some row sees: [jMin of the first row rounded down,
    // jMax of the last row); tiles outside are skipped.
    Value jStart = arith::MulIOp::create(
        b, arith::DivUIOp::create(b, jMin.front(), idx(kCols)), idx(kCols));
    Value jEnd = arith::MaxSIOp::create(b, jMax.back(), jStart);

    // O accumulators start at 0.
    Value zeroVec = splat(f(0.0f));
    loop(0, rows, [&](Value r) {
      loop(idx(0), idx(Dv), kLanes, [&](Value c) {
        vector::StoreOp::create(b, zeroVec, oBuf, ValueRange{r, c});
      });
    });

    const float negInf = -std::numeric_limits<float>::infinity();
    SmallVector<Value> init;
    for (int64_t r = 0; r < rows; ++r)
      init.push_back(f(negInf)); // running max
    for (int64_t r = 0; r < rows; ++r)
      init.push_back(f(0.0f)); // running sum
    auto kvLoop = scf::ForOp::create(b, jStart, jEnd, idx(kCols), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(kvLoop.getBody());
      Value j0 = kvLoop.getInductionVar();
      ValueRange state = kvLoop.getRegionIterArgs();
      SmallVector<Value> next =
          keyTile(bi, h, g, j0, row, jMin, jMax, state.take_front(rows),
                  state.drop_front(rows));
      scf::YieldOp::create(b, next);
    }
    ValueRange results = kvLoop.getResults();
    epilogue(bi, h, i0, results.take_front(rows), results.drop_front(rows));
  }

  /// One key tile [j0, j0 + 32): scores, mask, online softmax, O += P V.
  /// Returns the new (max..., sum...).
  SmallVector<Value> keyTile(Value bi, Value h, Value g, Value j0,
                             ArrayRef<Value> row, ArrayRef<Value> jMin,
                             ArrayRef<Value> jMax, ValueRange maxes,
                             ValueRange sums) {
    // S = Q K^T: 2 * rows vector accumulators over d.
    SmallVector<Value> zeros(2 * rows, splat(f(0.0f)));
    auto dLoop = scf::ForOp::create(b, idx(0), idx(D), idx(1), zeros);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(dLoop.getBody());
      Value d = dLoop.getInductionVar();
      Value tile = arith::DivUIOp::create(b, j0, idx(kCols));
      Value k0 =
          vector::LoadOp::create(b, vec, Kt, ValueRange{bi, g, tile, d, idx(0)});
      Value k1 = vector::LoadOp::create(b, vec, Kt,
                                        ValueRange{bi, g, tile, d, idx(kLanes)});
      SmallVector<Value> acc(dLoop.getRegionIterArgs());
      for (int64_t r = 0; r < rows; ++r) {
        Value q = splat(
            memref::LoadOp::create(b, Q, ValueRange{bi, h, row[r], d}));
        acc[2 * r] = vector::FMAOp::create(b, q, k0, acc[2 * r]);
        acc[2 * r + 1] = vector::FMAOp::create(b, q, k1, acc[2 * r + 1]);
      }
      scf::YieldOp::create(b, acc);
    }

    // Key indices of the two vectors, as i32.
    SmallVector<int32_t> lanes(kLanes);
    for (int32_t l = 0; l < kLanes; ++l)
      lanes[l] = l;
    auto i32Vec = VectorType::get({kLanes}, b.getI32Type());
    Value step = arith::ConstantOp::create(
        b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(lanes)));
    auto toI32 = [&](Value index) {
      return arith::IndexCastOp::create(b, b.getI32Type(), index).getResult();
    };
    Value jv0 = arith::AddIOp::create(b, step, splat(toI32(j0)));
    Value jv1 = arith::AddIOp::create(
        b, jv0, splat(arith::ConstantOp::create(b, b.getI32IntegerAttr(kLanes))));

    Value scale = splat(f(float(op.getEffectiveScale())));
    const float negInf = -std::numeric_limits<float>::infinity();
    Value negInfVec = splat(f(negInf));
    SmallVector<Value> newMax, newSum, alpha;
    for (int64_t r = 0; r < rows; ++r) {
      Value lo = splat(toI32(jMin[r])), hi = splat(toI32(jMax[r]));
      auto masked = [&](Value s, Value jv) {
        Value inRange = arith::AndIOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::sge, jv, lo),
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt, jv, hi));
        return arith::SelectOp::create(
                   b, inRange, arith::MulFOp::create(b, s, scale), negInfVec)
            .getResult();
      };
      Value s0 = masked(dLoop.getResult(2 * r), jv0);
      Value s1 = masked(dLoop.getResult(2 * r + 1), jv1);
      // maxnum, not maximum: no NaN propagation to pay for (scores of
      // finite inputs are never NaN), and a tree of vmaxps.
      Value tileMax = vector::ReductionOp::create(
          b, vector::CombiningKind::MAXNUMF,
          arith::MaxNumFOp::create(b, s0, s1));
      Value m = arith::MaxNumFOp::create(b, maxes[r], tileMax);
      // While a row has seen no key, m = -inf: subtract 0 instead so that
      // exp gives 0, never NaN.
      Value safe = arith::SelectOp::create(
          b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, f(negInf)),
          f(0.0f), m);
      Value a = math::ExpOp::create(b, arith::SubFOp::create(b, maxes[r], safe));
      Value p0 = math::ExpOp::create(b, arith::SubFOp::create(b, s0, splat(safe)));
      Value p1 = math::ExpOp::create(b, arith::SubFOp::create(b, s1, splat(safe)));
      // reassoc: a tree reduction instead of 16 dependent adds.
      Value tileSum = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD, arith::AddFOp::create(b, p0, p1),
          /*acc=*/Value(), arith::FastMathFlags::reassoc);
      newSum.push_back(arith::AddFOp::create(
          b, arith::MulFOp::create(b, sums[r], a), tileSum));
      newMax.push_back(m);
      alpha.push_back(a);
      vector::StoreOp::create(b, p0, pBuf, ValueRange{idx(r), idx(0)});
      vector::StoreOp::create(b, p1, pBuf, ValueRange{idx(r), idx(kLanes)});
    }

    // O = alpha * O + P V over the keys of this tile that exist.
    Value valid = arith::MinUIOp::create(
        b, idx(kCols), arith::SubIOp::create(b, idx(Skv), j0));
    for (int64_t c = 0; c < Dv; c += 2 * kLanes) {
      int64_t width = std::min<int64_t>(2, (Dv - c) / kLanes);
      SmallVector<Value> acc;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t w = 0; w < width; ++w)
          acc.push_back(arith::MulFOp::create(
              b,
              vector::LoadOp::create(b, vec, oBuf,
                                     ValueRange{idx(r), idx(c + w * kLanes)}),
              splat(alpha[r])));
      auto jLoop = scf::ForOp::create(b, idx(0), valid, idx(1), acc);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(jLoop.getBody());
        Value j = jLoop.getInductionVar();
        Value key = arith::AddIOp::create(b, j0, j);
        SmallVector<Value> vs;
        for (int64_t w = 0; w < width; ++w)
          vs.push_back(vector::LoadOp::create(
              b, vec, V, ValueRange{bi, g, key, idx(c + w * kLanes)}));
        SmallVector<Value> next(jLoop.getRegionIterArgs());
        for (int64_t r = 0; r < rows; ++r) {
          Value p = splat(memref::LoadOp::create(b, pBuf, ValueRange{idx(r), j}));
          for (int64_t w = 0; w < width; ++w)
            next[r * width + w] =
                vector::FMAOp::create(b, p, vs[w], next[r * width + w]);
        }
        scf::YieldOp::create(b, next);
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t w = 0; w < width; ++w)
          vector::StoreOp::create(b, jLoop.getResult(r * width + w), oBuf,
                                  ValueRange{idx(r), idx(c + w * kLanes)});
    }
    SmallVector<Value> next(newMax);
    llvm::append_range(next, newSum);
    return next;
  }

  /// O = oBuf / l and LSE = m + log l for the rows that exist; a row that
  /// saw no key gets O = 0 and LSE = -inf.
  void epilogue(Value bi, Value h, Value i0, ValueRange maxes,
                ValueRange sums) {
    const float negInf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      Value i = arith::AddIOp::create(b, i0, idx(r));
      Value exists =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq));
      auto ifOp = scf::IfOp::create(b, exists, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value empty =
          arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, sums[r], f(0.0f));
      Value inv = arith::SelectOp::create(
          b, empty, f(0.0f), arith::DivFOp::create(b, f(1.0f), sums[r]));
      Value invVec = splat(inv);
      loop(idx(0), idx(Dv), kLanes, [&](Value c) {
        Value o = vector::LoadOp::create(b, vec, oBuf, ValueRange{idx(r), c});
        vector::StoreOp::create(b, arith::MulFOp::create(b, o, invVec), O,
                                ValueRange{bi, h, i, c});
      });
      Value lse = arith::AddFOp::create(b, maxes[r],
                                        math::LogOp::create(b, sums[r]));
      lse = arith::SelectOp::create(b, empty, f(negInf), lse);
      memref::StoreOp::create(b, lse, L, ValueRange{bi, h, i});
    }
  }

  ImplicitLocOpBuilder &b;
  attn::AttentionOp op;
  int64_t rows;
  int64_t B, H, Sq, D, Hkv, Skv, Dv, SkvPad;
  Type f32;
  VectorType vec;
  Value Q, K, V, lengths, O, L, Kt, oBuf, pBuf;
};

} // namespace

bool canLowerToFlashCpu(attn::AttentionOp op) {
  auto isF32 = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType().isF32();
  };
  return isF32(op.getQuery()) && isF32(op.getKey()) && isF32(op.getValue()) &&
         op.getScoreMod().empty() && op.getMaskMod().empty() &&
         shapeOf(op.getValue())[3] % kLanes == 0;
}

std::pair<Value, Value> buildFlashAttentionCpu(OpBuilder &builder,
                                               attn::AttentionOp op,
                                               const FlashTileOptions &options) {
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  return FlashBuilder(b, op, options.rows).build();
}

} // namespace attnc
