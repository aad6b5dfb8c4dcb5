// Attention steps as linalg ops on tensors (see LinalgBuilders.h).
#include "codegen/LinalgBuilders.h"
#include "codegen/MaskTiles.h"
#include "dialect/ShapeUtils.h"

#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "passes/ScalarGradients.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;

namespace attnc {
namespace {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

/// A tensor of `shape` x `elementType` filled with `value`.
Value filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
             Type elementType, double value) {
  Value empty = tensor::EmptyOp::create(b, loc, shape, elementType);
  Value scalar = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(elementType, value));
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

Value empty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
            Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

/// Converts a float scalar to f32 (for accumulation) or from f32.
Value convertFloat(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v);
}

/// Converts every element of an f32 tensor to `elementType`.
Value convertTensor(OpBuilder &b, Location loc, Value source,
                    Type elementType) {
  if (elementTypeOf(source) == elementType)
    return source;
  ArrayRef<int64_t> shape = shapeOf(source);
  AffineMap id = b.getMultiDimIdentityMap(shape.size());
  SmallVector<IteratorType> iters(shape.size(), kPar);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(shape, elementType)},
             ValueRange{source},
             ValueRange{empty(b, loc, shape, elementType)},
             ArrayRef<AffineMap>{id, id}, iters,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl, convertFloat(nb, nl, args[0], elementType));
             })
      .getResult(0);
}

/// acc[...] += a * b over the reduction dimension, in f32, with the given
/// indexing maps; the result is converted to `resultType`'s element type.
Value buildContraction(OpBuilder &b, Location loc, Value lhs, Value rhs,
                       ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iters,
                       RankedTensorType resultType) {
  Type f32 = b.getF32Type();
  Value init = filled(b, loc, resultType.getShape(), f32, 0.0);
  Value acc =
      linalg::GenericOp::create(
          b, loc, TypeRange{init.getType()}, ValueRange{lhs, rhs},
          ValueRange{init}, maps, iters,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value x = convertFloat(nb, nl, args[0], f32);
            Value y = convertFloat(nb, nl, args[1], f32);
            Value prod = arith::MulFOp::create(nb, nl, x, y);
            linalg::YieldOp::create(
                nb, nl, arith::AddFOp::create(nb, nl, args[2], prod)
                            .getResult());
          })
          .getResult(0);
  return convertTensor(b, loc, acc, resultType.getElementType());
}

/// Clones a score_mod/mask_mod region's body at `nb`, with `leading` bound
/// to the region's first arguments and `captures` to the rest; returns the
/// yielded value.
Value inlineModRegion(OpBuilder &nb, Region &region, ValueRange leading,
                      ValueRange captures) {
  Block &block = region.front();
  IRMapping mapping;
  for (auto [arg, value] : llvm::zip(
           block.getArguments().take_front(leading.size()), leading))
    mapping.map(arg, value);
  for (auto [arg, value] : llvm::zip(
           block.getArguments().drop_front(leading.size()), captures))
    mapping.map(arg, value);
  for (Operation &op : block.without_terminator())
    nb.clone(op, mapping);
  auto yield = cast<attn::YieldOp>(block.getTerminator());
  return mapping.lookup(yield.getValue());
}

/// (b, h, i, j) -> (b, h, i): a per-row value of a rank-4 score tensor.
AffineMap rowMap(MLIRContext *ctx) {
  return AffineMap::get(4, 0,
                        {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx),
                         getAffineDimExpr(2, ctx)},
                        ctx);
}

/// The four loop indices (b, h, i, j) inside a rank-4 linalg.generic.
SmallVector<Value> loopIndices(OpBuilder &nb, Location nl) {
  SmallVector<Value> indices;
  for (int64_t d = 0; d < 4; ++d)
    indices.push_back(linalg::IndexOp::create(nb, nl, d));
  return indices;
}

/// An elementwise generic over a rank-4 f32 score tensor whose body gets the
/// score and (b, h, i, j) and returns the new score.
Value mapScores(OpBuilder &b, Location loc, Value scores,
                function_ref<Value(OpBuilder &, Location, Value, ValueRange)>
                    body) {
  ArrayRef<int64_t> shape = shapeOf(scores);
  AffineMap id = b.getMultiDimIdentityMap(4);
  return linalg::GenericOp::create(
             b, loc, TypeRange{scores.getType()}, ValueRange{scores},
             ValueRange{empty(b, loc, shape, b.getF32Type())},
             ArrayRef<AffineMap>{id, id}, SmallVector<IteratorType>(4, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value r = body(nb, nl, args[0], loopIndices(nb, nl));
               linalg::YieldOp::create(nb, nl, r);
             })
      .getResult(0);
}

} // namespace

Value buildProjection(OpBuilder &b, Location loc, Value input, Value weight,
                      RankedTensorType resultType) {
  // Loops (b, h, s, d, e): out[b,h,s,d] += X[b,s,e] * W[e, h*D + d].
  int64_t headDim = resultType.getShape()[3];
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, s, d, e;
  bindDims(ctx, bb, h, s, d, e);
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {bb, s, e}, ctx),
      AffineMap::get(5, 0, {e, h * headDim + d}, ctx),
      AffineMap::get(5, 0, {bb, h, s, d}, ctx)};
  return buildContraction(b, loc, input, weight, maps,
                          {kPar, kPar, kPar, kPar, kRed}, resultType);
}

Value buildMerge(OpBuilder &b, Location loc, Value input, Value weight,
                 RankedTensorType resultType) {
  // Loops (b, s, e, h, dv): Y[b,s,e] += O[b,h,s,dv] * Wo[h*Dv + dv, e].
  int64_t valueDim = shapeOf(input)[3];
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, s, e, h, dv;
  bindDims(ctx, bb, s, e, h, dv);
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {bb, h, s, dv}, ctx),
      AffineMap::get(5, 0, {h * valueDim + dv, e}, ctx),
      AffineMap::get(5, 0, {bb, s, e}, ctx)};
  return buildContraction(b, loc, input, weight, maps,
                          {kPar, kPar, kPar, kRed, kRed}, resultType);
}

Value buildGatheredPages(OpBuilder &b, Location loc, Value pool, Value table) {
  ArrayRef<int64_t> p = shapeOf(pool), t = shapeOf(table);
  Type element = elementTypeOf(pool);
  int64_t rank = 4;
  return linalg::GenericOp::create(
             b, loc,
             TypeRange{RankedTensorType::get({t[0], p[1], t[1] * p[2], p[3]},
                                             element)},
             ValueRange{},
             ValueRange{
                 empty(b, loc, {t[0], p[1], t[1] * p[2], p[3]}, element)},
             SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)},
             SmallVector<IteratorType>(rank, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange) {
               SmallVector<Value> at;
               for (int64_t d = 0; d < rank; ++d)
                 at.push_back(linalg::IndexOp::create(nb, nl, d));
               auto cst = [&](int64_t v) {
                 return arith::ConstantIndexOp::create(nb, nl, v);
               };
               Value entry = tensor::ExtractOp::create(
                   nb, nl, table,
                   ValueRange{at[0], arith::DivUIOp::create(nb, nl, at[2],
                                                            cst(p[2]))});
               Value page =
                   arith::IndexCastOp::create(nb, nl, nb.getIndexType(), entry);
               page = arith::SelectOp::create(
                   nb, nl,
                   arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ult,
                                         page, cst(p[0])),
                   page, cst(0));
               Value x = tensor::ExtractOp::create(
                   nb, nl, pool,
                   ValueRange{page, at[1],
                              arith::RemUIOp::create(nb, nl, at[2], cst(p[2])),
                              at[3]});
               linalg::YieldOp::create(nb, nl, x);
             })
      .getResult(0);
}

Value buildAppend(OpBuilder &b, Location loc, Value rows, Value cache,
                  Value lengths, Value table) {
  ArrayRef<int64_t> r = shapeOf(rows), c = shapeOf(cache);
  int64_t capacity = table ? shapeOf(table)[1] * c[2] : c[2];
  auto cst = [&](OpBuilder &nb, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(nb, loc, v);
  };
  auto indexOf = [&](OpBuilder &nb, Value tensor, ValueRange at) -> Value {
    Value x = tensor::ExtractOp::create(nb, loc, tensor, at);
    return arith::IndexCastOp::create(nb, loc, nb.getIndexType(), x);
  };
  // dst[at] <- src[from], slices of [1, Hkv, n, D].
  auto copyRows = [&](OpBuilder &nb, Value dst, ArrayRef<OpFoldResult> at,
                      ArrayRef<OpFoldResult> from, OpFoldResult n) -> Value {
    SmallVector<OpFoldResult> sizes = {
        nb.getIndexAttr(1), nb.getIndexAttr(r[1]), n, nb.getIndexAttr(r[3])};
    SmallVector<OpFoldResult> ones(4, nb.getIndexAttr(1));
    Value src =
        tensor::ExtractSliceOp::create(nb, loc, rows, from, sizes, ones);
    Value slot = tensor::ExtractSliceOp::create(nb, loc, dst, at, sizes, ones);
    Value copied = linalg::CopyOp::create(nb, loc, src, slot).getResult(0);
    return tensor::InsertSliceOp::create(nb, loc, copied, dst, at, sizes, ones);
  };
  auto batches = scf::ForOp::create(
      b, loc, cst(b, 0), cst(b, r[0]), cst(b, 1), ValueRange{cache},
      [&](OpBuilder &nb, Location, Value bi, ValueRange acc) {
        // (Clamped where nothing is written either way: no overflow.)
        Value len = indexOf(nb, lengths, bi);
        len = arith::MinSIOp::create(
            nb, loc, arith::MaxSIOp::create(nb, loc, len, cst(nb, -r[2])),
            cst(nb, capacity + r[2]));
        // Rows [t0, t1) land at positions start + t in [0, capacity).
        Value start = arith::SubIOp::create(nb, loc, len, cst(nb, r[2]));
        Value t0 = arith::MaxSIOp::create(
            nb, loc, cst(nb, 0),
            arith::SubIOp::create(nb, loc, cst(nb, 0), start));
        Value t1 = arith::MinSIOp::create(
            nb, loc, cst(nb, r[2]),
            arith::SubIOp::create(nb, loc, cst(nb, capacity), start));
        t1 = arith::MaxSIOp::create(nb, loc, t0, t1);
        OpFoldResult zero = nb.getIndexAttr(0);
        Value result;
        if (!table) {
          Value n = arith::SubIOp::create(nb, loc, t1, t0);
          Value p0 = arith::AddIOp::create(nb, loc, start, t0);
          result = copyRows(nb, acc[0], {bi, zero, p0, zero},
                            {bi, zero, t0, zero}, n);
        } else {
          auto tokens = scf::ForOp::create(
              nb, loc, t0, t1, cst(nb, 1), ValueRange{acc[0]},
              [&](OpBuilder &tb, Location, Value t, ValueRange pool) {
                Value p = arith::AddIOp::create(tb, loc, start, t);
                Value page = indexOf(
                    tb, table,
                    {bi, arith::DivUIOp::create(tb, loc, p, cst(tb, c[2]))});
                page = arith::SelectOp::create(
                    tb, loc,
                    arith::CmpIOp::create(tb, loc, arith::CmpIPredicate::ult,
                                          page, cst(tb, c[0])),
                    page, cst(tb, 0));
                Value row = arith::RemUIOp::create(tb, loc, p, cst(tb, c[2]));
                scf::YieldOp::create(
                    tb, loc,
                    copyRows(tb, pool[0], {page, zero, row, zero},
                             {bi, zero, t, zero}, tb.getIndexAttr(1)));
              });
          result = tokens.getResult(0);
        }
        scf::YieldOp::create(nb, loc, result);
      });
  return batches.getResult(0);
}

Value buildScores(OpBuilder &b, Location loc, Value query, Value key) {
  // Loops (b, h, i, j, d): S[b,h,i,j] += Q[b,h,i,d] * K[b, h / G, j, d].
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  int64_t group = q[1] / k[1];
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, i, j, d;
  bindDims(ctx, bb, h, i, j, d);
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {bb, h, i, d}, ctx),
      AffineMap::get(5, 0, {bb, h.floorDiv(group), j, d}, ctx),
      AffineMap::get(5, 0, {bb, h, i, j}, ctx)};
  auto resultType =
      RankedTensorType::get({q[0], q[1], q[2], k[2]}, b.getF32Type());
  return buildContraction(b, loc, query, key, maps,
                          {kPar, kPar, kPar, kPar, kRed}, resultType);
}

Value buildScale(OpBuilder &b, Location loc, Value scores, double factor) {
  return mapScores(b, loc, scores,
                   [&](OpBuilder &nb, Location nl, Value s, ValueRange) {
                     Value c = arith::ConstantOp::create(
                         nb, nl, nb.getF32FloatAttr(factor));
                     return arith::MulFOp::create(nb, nl, s, c).getResult();
                   });
}

Value buildScoreMod(OpBuilder &b, Location loc, Value scores, Region &body,
                    ValueRange captures) {
  return mapScores(
      b, loc, scores,
      [&](OpBuilder &nb, Location, Value s, ValueRange bhij) {
        SmallVector<Value> leading = {s};
        llvm::append_range(leading, bhij);
        return inlineModRegion(nb, body, leading, captures);
      });
}

/// Whether key j is visible from query i under `mask`, as an i1 built at nb.
/// Scores are [B, H, Sq, Skv] (`sq`, `skv`).
static Value buildVisible(OpBuilder &nb, Location nl,
                          const MaskConditions &mask, ValueRange bhij,
                          int64_t sq, int64_t skv) {
  Value bIdx = bhij[0], i = bhij[2], j = bhij[3];
  Value visible = arith::ConstantOp::create(nb, nl, nb.getBoolAttr(true));
  auto conjoin = [&](Value c) {
    visible = arith::AndIOp::create(nb, nl, visible, c);
  };
  // The batch's lengths entry, read where first needed, once.
  Value count;
  auto keyCount = [&]() -> Value {
    if (!count)
      count = arith::IndexCastOp::create(
          nb, nl, nb.getIndexType(),
          tensor::ExtractOp::create(nb, nl, mask.lengths, bIdx));
    return count;
  };
  // A cache's row i sits at n_b - Sq + i (n_b: the batch's keys, clamped
  // to [0, Skv]); it may be negative, so the comparisons are signed.
  auto cmpPred = arith::CmpIPredicate::ule;
  if (mask.cache && (mask.causal || mask.window)) {
    Value n = arith::ConstantIndexOp::create(nb, nl, skv);
    if (mask.lengths)
      n = arith::MinSIOp::create(
          nb, nl, n,
          arith::MaxSIOp::create(nb, nl, keyCount(),
                                 arith::ConstantIndexOp::create(nb, nl, 0)));
    i = arith::AddIOp::create(
        nb, nl, i,
        arith::SubIOp::create(nb, nl, n,
                              arith::ConstantIndexOp::create(nb, nl, sq)));
    cmpPred = arith::CmpIPredicate::sle;
  }
  if (mask.causal || mask.window)
    conjoin(arith::CmpIOp::create(nb, nl, cmpPred, j, i));
  if (mask.window) {
    // i - j < W; only evaluated where j <= i, so the difference is >= 0.
    Value diff = arith::SubIOp::create(nb, nl, i, j);
    Value w = arith::ConstantIndexOp::create(nb, nl, *mask.window);
    conjoin(arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, diff, w));
  }
  if (mask.lengths)
    conjoin(
        arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, j, keyCount()));
  if (mask.varlen) {
    // j lies in row i's packed sequence (varlen excludes cache: i is the
    // row itself).
    MaskTiles::Sequence seq = MaskTiles::sequenceOf(
        nb, nl, bhij[2], shapeOf(mask.varlen)[0], [&](Value d) -> Value {
          return arith::IndexCastOp::create(
              nb, nl, nb.getIndexType(),
              tensor::ExtractOp::create(nb, nl, mask.varlen, d));
        });
    ImplicitLocOpBuilder ib(nl, nb);
    conjoin(MaskTiles::inRange(ib, j, seq.start, seq.end));
  }
  if (mask.maskMod)
    conjoin(inlineModRegion(nb, *mask.maskMod, bhij, mask.captures));
  return visible;
}

Value buildMask(OpBuilder &b, Location loc, Value scores,
                const MaskConditions &mask) {
  if (!mask.any())
    return scores;
  return mapScores(
      b, loc, scores, [&](OpBuilder &nb, Location nl, Value s, ValueRange bhij) {
        Value visible = buildVisible(nb, nl, mask, bhij, shapeOf(scores)[2],
                                     shapeOf(scores)[3]);
        Value fill = arith::ConstantOp::create(
            nb, nl,
            nb.getF32FloatAttr(mask.zeroFill
                                   ? 0.0f
                                   : -std::numeric_limits<float>::infinity()));
        return arith::SelectOp::create(nb, nl, visible, s, fill).getResult();
      });
}

std::pair<Value, Value> buildSoftmax(OpBuilder &b, Location loc,
                                     Value scores) {
  ArrayRef<int64_t> shape = shapeOf(scores);
  SmallVector<int64_t> rowShape(shape.take_front(3));
  Type f32 = b.getF32Type();
  MLIRContext *ctx = b.getContext();
  AffineMap full = b.getMultiDimIdentityMap(4);
  AffineMap row = rowMap(ctx);
  AffineMap rowId = b.getMultiDimIdentityMap(3);
  SmallVector<IteratorType> reduceIters = {kPar, kPar, kPar, kRed};
  const float inf = std::numeric_limits<float>::infinity();

  // m_i = max_j S_ij.
  Value max =
      linalg::GenericOp::create(
          b, loc, TypeRange{RankedTensorType::get(rowShape, f32)},
          ValueRange{scores}, ValueRange{filled(b, loc, rowShape, f32, -inf)},
          ArrayRef<AffineMap>{full, row}, reduceIters,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            linalg::YieldOp::create(
                nb, nl,
                arith::MaximumFOp::create(nb, nl, args[0], args[1])
                    .getResult());
          })
          .getResult(0);

  // A fully masked row has m = -inf; subtracting 0 instead keeps exp(-inf)
  // = 0 rather than exp(NaN).
  auto safeMax = [&](OpBuilder &nb, Location nl, Value m) {
    Value negInf =
        arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(-inf));
    Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
    Value isNegInf = arith::CmpFOp::create(
        nb, nl, arith::CmpFPredicate::OEQ, m, negInf);
    return arith::SelectOp::create(nb, nl, isNegInf, zero, m).getResult();
  };

  // l_i = sum_j exp(S_ij - m_i).
  Value sum =
      linalg::GenericOp::create(
          b, loc, TypeRange{RankedTensorType::get(rowShape, f32)},
          ValueRange{scores, max},
          ValueRange{filled(b, loc, rowShape, f32, 0.0)},
          ArrayRef<AffineMap>{full, row, row}, reduceIters,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value diff = arith::SubFOp::create(nb, nl, args[0],
                                               safeMax(nb, nl, args[1]));
            Value e = math::ExpOp::create(nb, nl, diff);
            linalg::YieldOp::create(
                nb, nl, arith::AddFOp::create(nb, nl, args[2], e).getResult());
          })
          .getResult(0);

  // P_ij = exp(S_ij - m_i) / l_i, and 0 where l_i = 0 (fully masked).
  Value probs =
      linalg::GenericOp::create(
          b, loc, TypeRange{scores.getType()}, ValueRange{scores, max, sum},
          ValueRange{empty(b, loc, shape, f32)},
          ArrayRef<AffineMap>{full, row, row, full},
          SmallVector<IteratorType>(4, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value diff = arith::SubFOp::create(nb, nl, args[0],
                                               safeMax(nb, nl, args[1]));
            Value e = math::ExpOp::create(nb, nl, diff);
            Value zero =
                arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
            Value isEmpty = arith::CmpFOp::create(
                nb, nl, arith::CmpFPredicate::OEQ, args[2], zero);
            Value p = arith::DivFOp::create(nb, nl, e, args[2]);
            linalg::YieldOp::create(
                nb, nl,
                arith::SelectOp::create(nb, nl, isEmpty, zero, p).getResult());
          })
          .getResult(0);

  // LSE_i = m_i + log l_i (-inf for a fully masked row, since log 0 = -inf).
  Value lse =
      linalg::GenericOp::create(
          b, loc, TypeRange{RankedTensorType::get(rowShape, f32)},
          ValueRange{max, sum}, ValueRange{empty(b, loc, rowShape, f32)},
          ArrayRef<AffineMap>{rowId, rowId, rowId},
          SmallVector<IteratorType>(3, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value logSum = math::LogOp::create(nb, nl, args[1]);
            linalg::YieldOp::create(
                nb, nl,
                arith::AddFOp::create(nb, nl, safeMax(nb, nl, args[0]), logSum)
                    .getResult());
          })
          .getResult(0);
  return {probs, lse};
}

Value buildApply(OpBuilder &b, Location loc, Value probs, Value value,
                 RankedTensorType resultType) {
  // Loops (b, h, i, dv, j): O[b,h,i,dv] += P[b,h,i,j] * V[b, h / G, j, dv].
  int64_t group = shapeOf(probs)[1] / shapeOf(value)[1];
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, i, dv, j;
  bindDims(ctx, bb, h, i, dv, j);
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {bb, h, i, j}, ctx),
      AffineMap::get(5, 0, {bb, h.floorDiv(group), j, dv}, ctx),
      AffineMap::get(5, 0, {bb, h, i, dv}, ctx)};
  return buildContraction(b, loc, probs, value, maps,
                          {kPar, kPar, kPar, kPar, kRed}, resultType);
}

Value buildTransposedApply(OpBuilder &b, Location loc, Value lhs, Value rhs,
                           RankedTensorType resultType) {
  // Split the query heads into (KV head g, member hh) so that every loop
  // is a plain dimension: loops (b, g, j, d, hh, i),
  // R[b,g,j,d] += X[b,g,hh,i,j] * Y[b,g,hh,i,d].
  int64_t kvHeads = resultType.getShape()[1];
  int64_t group = shapeOf(lhs)[1] / kvHeads;
  auto splitHeads = [&](Value v) {
    ArrayRef<int64_t> s = shapeOf(v);
    auto type = RankedTensorType::get({s[0], kvHeads, group, s[2], s[3]},
                                      elementTypeOf(v));
    return tensor::ExpandShapeOp::create(
               b, loc, type, v,
               SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}, {4}})
        .getResult();
  };
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, g, j, d, hh, i;
  bindDims(ctx, bb, g, j, d, hh, i);
  SmallVector<AffineMap> maps = {AffineMap::get(6, 0, {bb, g, hh, i, j}, ctx),
                                 AffineMap::get(6, 0, {bb, g, hh, i, d}, ctx),
                                 AffineMap::get(6, 0, {bb, g, j, d}, ctx)};
  return buildContraction(b, loc, splitHeads(lhs), splitHeads(rhs), maps,
                          {kPar, kPar, kPar, kPar, kRed, kRed}, resultType);
}

/// Collapses [A, B, C] into [A, B*C] (or [A*B, C] when `leading`).
static Value collapse(OpBuilder &b, Location loc, Value source,
                      bool leading) {
  SmallVector<ReassociationIndices> groups =
      leading ? SmallVector<ReassociationIndices>{{0, 1}, {2}}
              : SmallVector<ReassociationIndices>{{0}, {1, 2}};
  return tensor::CollapseShapeOp::create(b, loc, source, groups);
}

std::pair<Value, Value> buildProjectionGrad(OpBuilder &b, Location loc,
                                            Value input, Value weight,
                                            Value grad) {
  ArrayRef<int64_t> x = shapeOf(input), g = shapeOf(grad);
  int64_t heads = g[1], headDim = g[3];
  MLIRContext *ctx = b.getContext();
  Type elementType = elementTypeOf(input);
  // dX: loops (b, s, e, h, d): dX[b,s,e] += dY[b,h,s,d] * W[e, h*D + d].
  AffineExpr bb, s, e, h, d;
  bindDims(ctx, bb, s, e, h, d);
  Value dInput = buildContraction(
      b, loc, grad, weight,
      {AffineMap::get(5, 0, {bb, h, s, d}, ctx),
       AffineMap::get(5, 0, {e, h * headDim + d}, ctx),
       AffineMap::get(5, 0, {bb, s, e}, ctx)},
      {kPar, kPar, kPar, kRed, kRed},
      cast<RankedTensorType>(input.getType()));
  // dW as [E, H, D]: loops (e, h, d, b, s): += X[b,s,e] * dY[b,h,s,d].
  AffineExpr e2, h2, d2, b2, s2;
  bindDims(ctx, e2, h2, d2, b2, s2);
  Value dWeight3 = buildContraction(
      b, loc, input, grad,
      {AffineMap::get(5, 0, {b2, s2, e2}, ctx),
       AffineMap::get(5, 0, {b2, h2, s2, d2}, ctx),
       AffineMap::get(5, 0, {e2, h2, d2}, ctx)},
      {kPar, kPar, kPar, kRed, kRed},
      RankedTensorType::get({x[2], heads, headDim}, elementType));
  return {dInput, collapse(b, loc, dWeight3, /*leading=*/false)};
}

std::pair<Value, Value> buildMergeGrad(OpBuilder &b, Location loc,
                                       Value input, Value weight, Value grad) {
  ArrayRef<int64_t> o = shapeOf(input), g = shapeOf(grad);
  int64_t valueDim = o[3];
  MLIRContext *ctx = b.getContext();
  Type elementType = elementTypeOf(input);
  // dO: loops (b, h, s, dv, e): dO[b,h,s,dv] += dY[b,s,e] * Wo[h*Dv + dv, e].
  AffineExpr bb, h, s, dv, e;
  bindDims(ctx, bb, h, s, dv, e);
  Value dInput = buildContraction(
      b, loc, grad, weight,
      {AffineMap::get(5, 0, {bb, s, e}, ctx),
       AffineMap::get(5, 0, {h * valueDim + dv, e}, ctx),
       AffineMap::get(5, 0, {bb, h, s, dv}, ctx)},
      {kPar, kPar, kPar, kPar, kRed},
      cast<RankedTensorType>(input.getType()));
  // dWo as [H, Dv, E]: loops (h, dv, e, b, s): += O[b,h,s,dv] * dY[b,s,e].
  AffineExpr h2, dv2, e2, b2, s2;
  bindDims(ctx, h2, dv2, e2, b2, s2);
  Value dWeight3 = buildContraction(
      b, loc, input, grad,
      {AffineMap::get(5, 0, {b2, h2, s2, dv2}, ctx),
       AffineMap::get(5, 0, {b2, s2, e2}, ctx),
       AffineMap::get(5, 0, {h2, dv2, e2}, ctx)},
      {kPar, kPar, kPar, kRed, kRed},
      RankedTensorType::get({o[1], valueDim, g[2]}, elementType));
  return {dInput, collapse(b, loc, dWeight3, /*leading=*/true)};
}

/// rowsum_j(A[b,h,i,j] * C[b,h,i,j]) in f32, as [B,H,Sq].
static Value buildRowDot(OpBuilder &b, Location loc, Value a, Value c) {
  ArrayRef<int64_t> shape = shapeOf(a);
  SmallVector<int64_t> rowShape(shape.take_front(3));
  Type f32 = b.getF32Type();
  MLIRContext *ctx = b.getContext();
  AffineMap full = b.getMultiDimIdentityMap(4);
  AffineMap row = rowMap(ctx);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(rowShape, f32)},
             ValueRange{a, c}, ValueRange{filled(b, loc, rowShape, f32, 0.0)},
             ArrayRef<AffineMap>{full, full, row},
             SmallVector<IteratorType>{kPar, kPar, kPar, kRed},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value x = convertFloat(nb, nl, args[0], f32);
               Value y = convertFloat(nb, nl, args[1], f32);
               Value prod = arith::MulFOp::create(nb, nl, x, y);
               linalg::YieldOp::create(
                   nb, nl,
                   arith::AddFOp::create(nb, nl, args[2], prod).getResult());
             })
      .getResult(0);
}

/// P * (dP - delta [+ dLSE]) elementwise, with delta and dLSE per row.
static Value buildScoresGrad(OpBuilder &b, Location loc, Value probs,
                             Value probsGrad, Value delta, Value lseGrad) {
  ArrayRef<int64_t> shape = shapeOf(probs);
  MLIRContext *ctx = b.getContext();
  AffineMap full = b.getMultiDimIdentityMap(4);
  AffineMap row = rowMap(ctx);
  SmallVector<Value> inputs = {probs, probsGrad, delta};
  SmallVector<AffineMap> maps = {full, full, row};
  if (lseGrad) {
    inputs.push_back(lseGrad);
    maps.push_back(row);
  }
  maps.push_back(full);
  return linalg::GenericOp::create(
             b, loc, TypeRange{probs.getType()}, inputs,
             ValueRange{empty(b, loc, shape, b.getF32Type())}, maps,
             SmallVector<IteratorType>(4, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value centered =
                   arith::SubFOp::create(nb, nl, args[1], args[2]);
               if (lseGrad)
                 centered = arith::AddFOp::create(nb, nl, centered, args[3]);
               linalg::YieldOp::create(
                   nb, nl,
                   arith::MulFOp::create(nb, nl, args[0], centered)
                       .getResult());
             })
      .getResult(0);
}

Value buildSoftmaxGrad(OpBuilder &b, Location loc, Value probs, Value grad) {
  Value delta = buildRowDot(b, loc, probs, grad);
  return buildScoresGrad(b, loc, probs, grad, delta, Value());
}

std::pair<Value, SmallVector<Value>>
buildScoreModGrad(OpBuilder &b, Location loc, Value scores, Value grad,
                  Region &body, ValueRange captures) {
  ArrayRef<int64_t> shape = shapeOf(scores);
  AffineMap id = b.getMultiDimIdentityMap(4);
  // dS = dS' * df/ds, elementwise.
  Value scoresGrad =
      linalg::GenericOp::create(
          b, loc, TypeRange{scores.getType()}, ValueRange{scores, grad},
          ValueRange{empty(b, loc, shape, b.getF32Type())},
          ArrayRef<AffineMap>{id, id, id}, SmallVector<IteratorType>(4, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            SmallVector<Value> arguments = {args[0]};
            llvm::append_range(arguments, loopIndices(nb, nl));
            llvm::append_range(arguments, captures);
            linalg::YieldOp::create(
                nb, nl,
                buildScoreModAdjoints(nb, nl, body, arguments, args[1])
                    .scoreAdjoint);
          })
          .getResult(0);

  // Capture gradients scatter into the captured tensors: a sequential loop
  // nest over (b, h, i, j) keeps the accumulation order fixed. The sums are
  // f32 (the adjoints are), converted to the captures' types at the end.
  SmallVector<Value> captureGrads;
  SmallVector<unsigned> floatCaptures;
  Type f32 = b.getF32Type();
  for (auto [k, capture] : llvm::enumerate(captures)) {
    auto type = cast<RankedTensorType>(capture.getType());
    if (isa<FloatType>(type.getElementType())) {
      floatCaptures.push_back(k);
      captureGrads.push_back(filled(b, loc, type.getShape(), f32, 0.0));
    } else {
      captureGrads.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              type, b.getIntegerAttr(type.getElementType(), 0))));
    }
  }
  if (floatCaptures.empty())
    return {scoresGrad, captureGrads};

  SmallVector<Value> lower(4, arith::ConstantIndexOp::create(b, loc, 0));
  SmallVector<Value> step(4, arith::ConstantIndexOp::create(b, loc, 1));
  SmallVector<Value> upper;
  for (int64_t dim : shape)
    upper.push_back(arith::ConstantIndexOp::create(b, loc, dim));
  SmallVector<Value> init;
  for (unsigned k : floatCaptures)
    init.push_back(captureGrads[k]);
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lower, upper, step, init,
      [&](OpBuilder &nb, Location nl, ValueRange ivs,
          ValueRange accumulators) -> scf::ValueVector {
        Value s = tensor::ExtractOp::create(nb, nl, scores, ivs);
        Value g = tensor::ExtractOp::create(nb, nl, grad, ivs);
        SmallVector<Value> arguments = {s};
        llvm::append_range(arguments, ivs);
        llvm::append_range(arguments, captures);
        ScoreModAdjoints adjoints =
            buildScoreModAdjoints(nb, nl, body, arguments, g);
        scf::ValueVector updated(accumulators.begin(), accumulators.end());
        for (const CaptureAdjoint &read : adjoints.captures) {
          auto slot = llvm::find(floatCaptures, read.capture);
          Value &acc = updated[slot - floatCaptures.begin()];
          Value current = tensor::ExtractOp::create(nb, nl, acc, read.indices);
          Value sum = arith::AddFOp::create(nb, nl, current, read.adjoint);
          acc = tensor::InsertOp::create(nb, nl, sum, acc, read.indices);
        }
        return updated;
      });
  for (auto [slot, k] : llvm::enumerate(floatCaptures))
    captureGrads[k] =
        convertTensor(b, loc, nest.results[slot], elementTypeOf(captures[k]));
  return {scoresGrad, captureGrads};
}

/// S (scaled) and S' = mask(score_mod(S)) of `in`.
static std::pair<Value, Value> buildMaskedScores(OpBuilder &b, Location loc,
                                                 const ScoreInputs &in) {
  Value scores = buildScale(b, loc, buildScores(b, loc, in.query, in.key),
                            in.scale);
  Value modified = in.scoreMod ? buildScoreMod(b, loc, scores, *in.scoreMod,
                                               in.scoreCaptures)
                               : scores;
  return {scores, buildMask(b, loc, modified, in.mask)};
}

/// P = exp(S' - LSE), recomputed from the row's LSE; 0 in a fully masked
/// row (LSE = -inf).
static Value buildRecomputedProbs(OpBuilder &b, Location loc, Value masked,
                                  Value lse) {
  AffineMap full = b.getMultiDimIdentityMap(4);
  AffineMap row = rowMap(b.getContext());
  const float inf = std::numeric_limits<float>::infinity();
  return linalg::GenericOp::create(
             b, loc, TypeRange{masked.getType()}, ValueRange{masked, lse},
             ValueRange{empty(b, loc, shapeOf(masked), b.getF32Type())},
             ArrayRef<AffineMap>{full, row, full},
             SmallVector<IteratorType>(4, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value negInf =
                   arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(-inf));
               Value zero =
                   arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0f));
               Value empty = arith::CmpFOp::create(
                   nb, nl, arith::CmpFPredicate::OEQ, args[1], negInf);
               Value e = math::ExpOp::create(
                   nb, nl, arith::SubFOp::create(nb, nl, args[0], args[1]));
               linalg::YieldOp::create(
                   nb, nl,
                   arith::SelectOp::create(nb, nl, empty, zero, e).getResult());
             })
      .getResult(0);
}

/// dS = scale dS', then dQ = dS K and dK = dS^T Q (GQA: dK summed over
/// each KV head's query heads), in the types of Q and K.
static std::pair<Value, Value> buildQueryKeyGrads(OpBuilder &b, Location loc,
                                                  Value modifiedGrad,
                                                  const ScoreInputs &in) {
  Value scoresGrad = buildScale(b, loc, modifiedGrad, in.scale);
  return {buildApply(b, loc, scoresGrad, in.key,
                     cast<RankedTensorType>(in.query.getType())),
          buildTransposedApply(b, loc, scoresGrad, in.query,
                               cast<RankedTensorType>(in.key.getType()))};
}

/// The gradients that dS' = d loss / dS' of scores S' = score_mod(scale Q
/// K^T) gives: through the score_mod's adjoint (and its captures'), then
/// buildQueryKeyGrads.
static AttentionGrads buildScoreGrads(OpBuilder &b, Location loc, Value scores,
                                      Value modifiedGrad,
                                      const ScoreInputs &in) {
  AttentionGrads grads;
  Value scoresGrad = modifiedGrad;
  if (in.scoreMod) {
    auto [ds, captureGrads] = buildScoreModGrad(b, loc, scores, modifiedGrad,
                                                *in.scoreMod, in.scoreCaptures);
    scoresGrad = ds;
    grads.scoreCaptures = captureGrads;
  }
  std::tie(grads.query, grads.key) = buildQueryKeyGrads(b, loc, scoresGrad, in);
  return grads;
}

AttentionGrads buildAttentionGrad(OpBuilder &b, Location loc,
                                  const AttentionGradInputs &in) {
  // Recompute S' and P = exp(S' - LSE); never stored by the forward.
  auto [scores, masked] = buildMaskedScores(b, loc, in);
  Value probs = buildRecomputedProbs(b, loc, masked, in.lse);

  Value probsGrad = buildScores(b, loc, in.outputGrad, in.value);
  // delta = rowsum(dO * O) = rowsum(P * dP): from P and dP, which are f32
  // here, rather than from O in the output's type (a bf16 O's rounding
  // made an ALiBi slope's gradient, a sum of many cancelling terms, read
  // 4.13 for 1.92).
  Value delta = buildRowDot(b, loc, probs, probsGrad);
  Value modifiedGrad =
      buildScoresGrad(b, loc, probs, probsGrad, delta, in.lseGrad);
  AttentionGrads grads = buildScoreGrads(b, loc, scores, modifiedGrad, in);
  grads.value = buildTransposedApply(
      b, loc, probs, in.outputGrad, cast<RankedTensorType>(in.value.getType()));
  return grads;
}

//===----------------------------------------------------------------------===//
// Combine
//===----------------------------------------------------------------------===//

namespace {

/// In a linalg body: the LSE of a row's union, m + log sum_k exp(l_k - m)
/// with m = max_k l_k, and -inf when every l_k is.
Value combinedLse(OpBuilder &b, Location loc, ValueRange lses) {
  const float inf = std::numeric_limits<float>::infinity();
  Value m = lses[0];
  for (Value l : lses.drop_front())
    m = arith::MaximumFOp::create(b, loc, m, l);
  Value negInf = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-inf));
  Value none =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf);
  Value safe = arith::SelectOp::create(
      b, loc, none, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)),
      m);
  Value sum;
  for (Value l : lses) {
    Value e =
        math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, l, safe));
    sum = sum ? arith::AddFOp::create(b, loc, sum, e).getResult() : e;
  }
  Value lse =
      arith::AddFOp::create(b, loc, safe, math::LogOp::create(b, loc, sum));
  return arith::SelectOp::create(b, loc, none, negInf, lse);
}

/// In a linalg body: a part's weight exp(l - lse), 0 where no part saw
/// the row (lse = -inf).
Value partWeight(OpBuilder &b, Location loc, Value l, Value lse) {
  const float inf = std::numeric_limits<float>::infinity();
  Value none = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OEQ, lse,
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-inf)));
  Value e = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, l, lse));
  return arith::SelectOp::create(
      b, loc, none, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)),
      e);
}

/// The union's LSE and each part's weight exp(LSE_k - LSE), [B, H, Sq] f32
/// each, in one pass over the rows: the weights are computed once a row,
/// not once an element of O.
struct CombineWeights {
  Value lse;
  SmallVector<Value> weights;
};
CombineWeights buildCombineWeights(OpBuilder &b, Location loc,
                                   ValueRange lses) {
  size_t n = lses.size();
  ArrayRef<int64_t> rowShape = shapeOf(lses[0]);
  SmallVector<Value> inits;
  for (size_t k = 0; k <= n; ++k)
    inits.push_back(empty(b, loc, rowShape, b.getF32Type()));
  ValueRange rows =
      linalg::GenericOp::create(
          b, loc, SmallVector<Type>(n + 1, lses[0].getType()), lses, inits,
          SmallVector<AffineMap>(2 * n + 1, b.getMultiDimIdentityMap(3)),
          SmallVector<IteratorType>(3, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            ValueRange parts = args.take_front(n);
            SmallVector<Value> yields = {combinedLse(nb, nl, parts)};
            for (Value l : parts)
              yields.push_back(partWeight(nb, nl, l, yields.front()));
            linalg::YieldOp::create(nb, nl, yields);
          })
          .getResults();
  return {rows.front(), llvm::to_vector(rows.drop_front())};
}

/// O = sum_k w_k O_k in `elementType` (accumulated in f32).
Value buildCombinedOutput(OpBuilder &b, Location loc, ValueRange outputs,
                          ValueRange weights, Type elementType) {
  size_t n = outputs.size();
  ArrayRef<int64_t> shape = shapeOf(outputs[0]);
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(b.getContext());
  SmallVector<Value> inputs(outputs);
  llvm::append_range(inputs, weights);
  SmallVector<AffineMap> maps(n, full);
  maps.append(n, row);
  maps.push_back(full);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(shape, elementType)},
             inputs, ValueRange{empty(b, loc, shape, elementType)}, maps,
             SmallVector<IteratorType>(4, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value sum;
               for (size_t k = 0; k < n; ++k) {
                 Value term = arith::MulFOp::create(
                     nb, nl, args[n + k],
                     convertFloat(nb, nl, args[k], nb.getF32Type()));
                 sum =
                     sum ? arith::AddFOp::create(nb, nl, sum, term).getResult()
                         : term;
               }
               linalg::YieldOp::create(nb, nl,
                                       convertFloat(nb, nl, sum, elementType));
             })
      .getResult(0);
}

} // namespace

std::pair<Value, Value> buildCombine(OpBuilder &b, Location loc,
                                     ValueRange outputs, ValueRange lses) {
  CombineWeights w = buildCombineWeights(b, loc, lses);
  return {buildCombinedOutput(b, loc, outputs, w.weights,
                              elementTypeOf(outputs[0])),
          w.lse};
}

SmallVector<Value> buildCombineGrad(OpBuilder &b, Location loc,
                                    ValueRange outputs, ValueRange lses,
                                    Value outputGrad, Value lseGrad) {
  size_t n = outputs.size();
  Type f32 = b.getF32Type(), elementType = elementTypeOf(outputs[0]);
  ArrayRef<int64_t> shape = shapeOf(outputs[0]);
  SmallVector<int64_t> rowShape(shape.take_front(3));
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(b.getContext()),
            rowId = b.getMultiDimIdentityMap(3);
  CombineWeights w = buildCombineWeights(b, loc, lses);
  Value output = buildCombinedOutput(b, loc, outputs, w.weights, f32);

  // rowsum(dO * (O_k - O)) for every k, in one pass over dO and O.
  SmallVector<Value> inputs(outputs);
  inputs.append({output, outputGrad});
  SmallVector<Value> inits;
  SmallVector<Type> rowTypes;
  for (size_t k = 0; k < n; ++k) {
    inits.push_back(filled(b, loc, rowShape, f32, 0.0));
    rowTypes.push_back(inits.back().getType());
  }
  SmallVector<AffineMap> maps(n + 2, full);
  maps.append(n, row);
  ValueRange dots =
      linalg::GenericOp::create(
          b, loc, rowTypes, inputs, inits, maps,
          SmallVector<IteratorType>{kPar, kPar, kPar, kRed},
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value g = convertFloat(nb, nl, args[n + 1], f32);
            SmallVector<Value> sums;
            for (size_t k = 0; k < n; ++k) {
              Value diff = arith::SubFOp::create(
                  nb, nl, convertFloat(nb, nl, args[k], f32), args[n]);
              sums.push_back(arith::AddFOp::create(
                  nb, nl, args[n + 2 + k],
                  arith::MulFOp::create(nb, nl, g, diff)));
            }
            linalg::YieldOp::create(nb, nl, sums);
          })
          .getResults();

  SmallVector<Value> outputGrads, lseGrads;
  for (size_t k = 0; k < n; ++k) {
    // dO_k = a_k dO.
    outputGrads.push_back(
        linalg::GenericOp::create(
            b, loc, TypeRange{outputs[k].getType()},
            ValueRange{outputGrad, w.weights[k]},
            ValueRange{empty(b, loc, shape, elementType)},
            SmallVector<AffineMap>{full, row, full},
            SmallVector<IteratorType>(4, kPar),
            [&](OpBuilder &nb, Location nl, ValueRange args) {
              Value grad = arith::MulFOp::create(
                  nb, nl, args[1], convertFloat(nb, nl, args[0], f32));
              linalg::YieldOp::create(nb, nl,
                                      convertFloat(nb, nl, grad, elementType));
            })
            .getResult(0));
    // dLSE_k = a_k (dLSE + rowsum(dO * (O_k - O))).
    SmallVector<Value> rowInputs = {w.weights[k], dots[k]};
    if (lseGrad)
      rowInputs.push_back(lseGrad);
    lseGrads.push_back(
        linalg::GenericOp::create(
            b, loc, TypeRange{lses[k].getType()}, rowInputs,
            ValueRange{empty(b, loc, rowShape, f32)},
            SmallVector<AffineMap>(rowInputs.size() + 1, rowId),
            SmallVector<IteratorType>(3, kPar),
            [&](OpBuilder &nb, Location nl, ValueRange args) {
              Value inner = args[1];
              if (lseGrad)
                inner = arith::AddFOp::create(nb, nl, inner, args[2]);
              linalg::YieldOp::create(
                  nb, nl,
                  arith::MulFOp::create(nb, nl, args[0], inner).getResult());
            })
            .getResult(0));
  }
  llvm::append_range(outputGrads, lseGrads);
  return outputGrads;
}

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

namespace {

Value f32Constant(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

/// sum / count elementwise (tensors of one shape), 0 where count is 0: a
/// mean over the rows that see a key.
Value buildMeanOf(OpBuilder &b, Location loc, Value sum, Value count) {
  ArrayRef<int64_t> shape = shapeOf(sum);
  AffineMap id = b.getMultiDimIdentityMap(shape.size());
  return linalg::GenericOp::create(
             b, loc, TypeRange{sum.getType()}, ValueRange{sum, count},
             ValueRange{empty(b, loc, shape, b.getF32Type())},
             ArrayRef<AffineMap>{id, id, id},
             SmallVector<IteratorType>(shape.size(), kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value none =
                   arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                         args[1], f32Constant(nb, nl, 0.0f));
               linalg::YieldOp::create(
                   nb, nl,
                   arith::SelectOp::create(
                       nb, nl, none, f32Constant(nb, nl, 0.0f),
                       arith::DivFOp::create(nb, nl, args[0], args[1]))
                       .getResult());
             })
      .getResult(0);
}

/// In a linalg body: x where p is not 0 (or is NaN), else 0: a masked
/// entry (p = 0, S' = -inf) adds nothing, never 0 * inf.
Value whereProbable(OpBuilder &b, Location loc, Value p, Value x) {
  Value take = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, p,
                                     f32Constant(b, loc, 0.0f));
  return arith::SelectOp::create(b, loc, take, x, f32Constant(b, loc, 0.0f));
}

/// In a linalg body: whether a row saw a key (LSE != -inf; NaN too).
Value rowSeesKey(OpBuilder &b, Location loc, Value lse) {
  return arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::UNE, lse,
      f32Constant(b, loc, -std::numeric_limits<float>::infinity()));
}

/// sum_j f(S'_ij, P_ij) over each row's keys where P_ij != 0, [B, H, Sq].
Value buildRowSum(
    OpBuilder &b, Location loc, Value masked, Value probs,
    function_ref<Value(OpBuilder &, Location, Value, Value, Value)> term,
    Value rowInput) {
  ArrayRef<int64_t> shape = shapeOf(masked);
  SmallVector<int64_t> rowShape(shape.take_front(3));
  Type f32 = b.getF32Type();
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(b.getContext());
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(rowShape, f32)},
             ValueRange{masked, probs, rowInput},
             ValueRange{filled(b, loc, rowShape, f32, 0.0)},
             ArrayRef<AffineMap>{full, full, row, row},
             SmallVector<IteratorType>{kPar, kPar, kPar, kRed},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value x = whereProbable(nb, nl, args[1],
                                       term(nb, nl, args[0], args[1], args[2]));
               linalg::YieldOp::create(
                   nb, nl,
                   arith::AddFOp::create(nb, nl, args[3], x).getResult());
             })
      .getResult(0);
}

/// The rows that see a key per (b, h), as f32 [B, H].
Value buildSeenRows(OpBuilder &b, Location loc, Value lse) {
  ArrayRef<int64_t> shape = shapeOf(lse);
  Type f32 = b.getF32Type();
  MLIRContext *ctx = b.getContext();
  AffineMap head = AffineMap::get(
      3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx)}, ctx);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(shape.take_front(2), f32)},
             ValueRange{lse},
             ValueRange{filled(b, loc, shape.take_front(2), f32, 0.0)},
             ArrayRef<AffineMap>{b.getMultiDimIdentityMap(3), head},
             SmallVector<IteratorType>{kPar, kPar, kRed},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value one = arith::SelectOp::create(
                   nb, nl, rowSeesKey(nb, nl, args[0]),
                   f32Constant(nb, nl, 1.0f), f32Constant(nb, nl, 0.0f));
               linalg::YieldOp::create(
                   nb, nl,
                   arith::AddFOp::create(nb, nl, args[1], one).getResult());
             })
      .getResult(0);
}

/// [n, cells] (or its transpose): 1 / |cell| where element e of n lies in
/// the cell, cell c holding [floor(c n / cells), floor((c + 1) n / cells)),
/// else 0: P times it averages P over the cells.
Value buildCellWeights(OpBuilder &b, Location loc, int64_t n, int64_t cells,
                       bool transposed) {
  SmallVector<int64_t> shape = {n, cells};
  if (transposed)
    std::swap(shape[0], shape[1]);
  AffineMap id = b.getMultiDimIdentityMap(2);
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get(shape, b.getF32Type())},
             ValueRange{}, ValueRange{empty(b, loc, shape, b.getF32Type())},
             ArrayRef<AffineMap>{id}, SmallVector<IteratorType>(2, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange) {
               Value e = linalg::IndexOp::create(nb, nl, transposed ? 1 : 0);
               Value c = linalg::IndexOp::create(nb, nl, transposed ? 0 : 1);
               auto cst = [&](int64_t v) {
                 return arith::ConstantIndexOp::create(nb, nl, v);
               };
               auto mul = [&](Value x, int64_t y) {
                 return arith::MulIOp::create(nb, nl, x, cst(y));
               };
               auto div = [&](Value x, int64_t y) {
                 return arith::DivUIOp::create(nb, nl, x, cst(y));
               };
               Value one = cst(1);
               // e's cell: floor(((e + 1) cells - 1) / n).
               Value cell = div(
                   arith::SubIOp::create(
                       nb, nl,
                       mul(arith::AddIOp::create(nb, nl, e, one), cells), one),
                   n);
               Value size = arith::SubIOp::create(
                   nb, nl,
                   div(mul(arith::AddIOp::create(nb, nl, c, one), n), cells),
                   div(mul(c, n), cells));
               Value sizeF = arith::UIToFPOp::create(
                   nb, nl, nb.getF32Type(),
                   arith::IndexCastUIOp::create(nb, nl, nb.getI64Type(), size));
               Value inCell = arith::CmpIOp::create(
                   nb, nl, arith::CmpIPredicate::eq, cell, c);
               linalg::YieldOp::create(
                   nb, nl,
                   arith::SelectOp::create(
                       nb, nl, inCell,
                       arith::DivFOp::create(nb, nl, f32Constant(nb, nl, 1.0f),
                                             sizeF),
                       f32Constant(nb, nl, 0.0f))
                       .getResult());
             })
      .getResult(0);
}

AffineMap dims(MLIRContext *ctx, unsigned count, ArrayRef<unsigned> results) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : results)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(count, 0, exprs, ctx);
}

/// P averaged over the cells of `type`'s [B, H, Gq, Gk] grid: R P C with
/// R [Gq, Sq] and C [Skv, Gk] the cells' weights.
Value buildPooled(OpBuilder &b, Location loc, Value probs,
                  RankedTensorType type) {
  ArrayRef<int64_t> p = shapeOf(probs), grid = type.getShape();
  MLIRContext *ctx = b.getContext();
  Value keyCells = buildCellWeights(b, loc, p[3], grid[3], false);
  Value rowCells = buildCellWeights(b, loc, p[2], grid[2], true);
  // (b, h, i, c, j): PC[b, h, i, c] = sum_j P[b, h, i, j] C[j, c].
  Value keysPooled = buildContraction(
      b, loc, probs, keyCells,
      {dims(ctx, 5, {0, 1, 2, 4}), dims(ctx, 5, {4, 3}),
       dims(ctx, 5, {0, 1, 2, 3})},
      {kPar, kPar, kPar, kPar, kRed},
      RankedTensorType::get({p[0], p[1], p[2], grid[3]}, b.getF32Type()));
  // (b, h, r, c, i): pooled[b, h, r, c] = sum_i R[r, i] PC[b, h, i, c].
  return buildContraction(b, loc, rowCells, keysPooled,
                          {dims(ctx, 5, {2, 4}), dims(ctx, 5, {0, 1, 4, 3}),
                           dims(ctx, 5, {0, 1, 2, 3})},
                          {kPar, kPar, kPar, kPar, kRed}, type);
}

/// cos(P_h, P_g) = <P_h, P_g> / (|P_h| |P_g|), 0 where a norm is 0.
Value buildSimilarity(OpBuilder &b, Location loc, Value probs) {
  ArrayRef<int64_t> p = shapeOf(probs);
  MLIRContext *ctx = b.getContext();
  auto type = RankedTensorType::get({p[0], p[1], p[1]}, b.getF32Type());
  // (b, h, g, i, j): dot[b, h, g] = sum_ij P[b, h, i, j] P[b, g, i, j].
  Value dot =
      buildContraction(b, loc, probs, probs,
                       {dims(ctx, 5, {0, 1, 3, 4}), dims(ctx, 5, {0, 2, 3, 4}),
                        dims(ctx, 5, {0, 1, 2})},
                       {kPar, kPar, kPar, kRed, kRed}, type);
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{dot, dot, dot},
             ValueRange{empty(b, loc, type.getShape(), b.getF32Type())},
             ArrayRef<AffineMap>{
                 b.getMultiDimIdentityMap(3), dims(ctx, 3, {0, 1, 1}),
                 dims(ctx, 3, {0, 2, 2}), b.getMultiDimIdentityMap(3)},
             SmallVector<IteratorType>(3, kPar),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value norms = arith::MulFOp::create(
                   nb, nl, math::SqrtOp::create(nb, nl, args[1]),
                   math::SqrtOp::create(nb, nl, args[2]));
               Value none =
                   arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                         norms, f32Constant(nb, nl, 0.0f));
               linalg::YieldOp::create(
                   nb, nl,
                   arith::SelectOp::create(
                       nb, nl, none, f32Constant(nb, nl, 0.0f),
                       arith::DivFOp::create(nb, nl, args[0], norms))
                       .getResult());
             })
      .getResult(0);
}

} // namespace

AttentionStats buildAttentionStats(OpBuilder &b, Location loc,
                                   const ScoreInputs &in, Value lse,
                                   bool entropy, bool meanEntropy,
                                   RankedTensorType pooledType,
                                   bool similarity) {
  Value masked = buildMaskedScores(b, loc, in).second;
  Value probs = buildRecomputedProbs(b, loc, masked, lse);
  AttentionStats stats;
  if (entropy || meanEntropy)
    // -sum_j p log p = sum_j p (LSE - S').
    stats.entropy = buildRowSum(
        b, loc, masked, probs,
        [](OpBuilder &nb, Location nl, Value s, Value p, Value l) -> Value {
          return arith::MulFOp::create(nb, nl, p,
                                       arith::SubFOp::create(nb, nl, l, s));
        },
        lse);
  if (meanEntropy) {
    ArrayRef<int64_t> rows = shapeOf(lse);
    Type f32 = b.getF32Type();
    MLIRContext *ctx = b.getContext();
    AffineMap head = dims(ctx, 3, {0, 1});
    Value sum =
        linalg::GenericOp::create(
            b, loc, TypeRange{RankedTensorType::get(rows.take_front(2), f32)},
            ValueRange{stats.entropy, lse},
            ValueRange{filled(b, loc, rows.take_front(2), f32, 0.0)},
            ArrayRef<AffineMap>{b.getMultiDimIdentityMap(3),
                                b.getMultiDimIdentityMap(3), head},
            SmallVector<IteratorType>{kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nl, ValueRange args) {
              Value x =
                  arith::SelectOp::create(nb, nl, rowSeesKey(nb, nl, args[1]),
                                          args[0], f32Constant(nb, nl, 0));
              linalg::YieldOp::create(
                  nb, nl,
                  arith::AddFOp::create(nb, nl, args[2], x).getResult());
            })
            .getResult(0);
    Value seen = buildSeenRows(b, loc, lse);
    stats.meanEntropy = buildMeanOf(b, loc, sum, seen);
  }
  if (!entropy)
    stats.entropy = Value();
  if (pooledType)
    stats.pooled = buildPooled(b, loc, probs, pooledType);
  if (similarity)
    stats.similarity = buildSimilarity(b, loc, probs);
  return stats;
}

AttentionStatsGrads buildAttentionStatsGrad(OpBuilder &b, Location loc,
                                            const ScoreInputs &in, Value lse,
                                            Value entropyGrad,
                                            Value meanEntropyGrad) {
  auto [scores, masked] = buildMaskedScores(b, loc, in);
  Value probs = buildRecomputedProbs(b, loc, masked, lse);
  ArrayRef<int64_t> rows = shapeOf(lse);
  Type f32 = b.getF32Type();
  MLIRContext *ctx = b.getContext();
  AffineMap rowId = b.getMultiDimIdentityMap(3), head = dims(ctx, 3, {0, 1});
  // g_i: the entropy's cotangent plus the mean's share, for the rows that
  // see a key.
  SmallVector<Value> inputs = {lse};
  SmallVector<AffineMap> maps = {rowId};
  if (entropyGrad) {
    inputs.push_back(entropyGrad);
    maps.push_back(rowId);
  }
  if (meanEntropyGrad) {
    inputs.append({meanEntropyGrad, buildSeenRows(b, loc, lse)});
    maps.append({head, head});
  }
  maps.push_back(rowId);
  Value g =
      linalg::GenericOp::create(
          b, loc, TypeRange{lse.getType()}, inputs,
          ValueRange{empty(b, loc, rows, f32)}, maps,
          SmallVector<IteratorType>(3, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value sum = f32Constant(nb, nl, 0.0f);
            unsigned next = 1;
            if (entropyGrad)
              sum = args[next++];
            if (meanEntropyGrad) {
              Value share = arith::DivFOp::create(
                  nb, nl, args[next],
                  arith::MaximumFOp::create(nb, nl, args[next + 1],
                                            f32Constant(nb, nl, 1.0f)));
              sum = arith::AddFOp::create(nb, nl, sum, share);
            }
            linalg::YieldOp::create(
                nb, nl,
                arith::SelectOp::create(nb, nl, rowSeesKey(nb, nl, args[0]),
                                        sum, f32Constant(nb, nl, 0.0f))
                    .getResult());
          })
          .getResult(0);
  // The partial derivatives of H_i = sum_j P_ij (LSE_i - S'_ij), P_ij =
  // exp(S'_ij - LSE_i), for the LSE operand as given (any value, as the
  // forward computes H for any):
  //   dLSE_i = g_i sum_j P_ij (1 + S'_ij - LSE_i),
  //   dS'_ij = g_i P_ij (LSE_i - S'_ij - 1).
  AttentionStatsGrads grads;
  Value sums = buildRowSum(
      b, loc, masked, probs,
      [](OpBuilder &nb, Location nl, Value s, Value p, Value l) -> Value {
        Value t = arith::SubFOp::create(
            nb, nl, arith::AddFOp::create(nb, nl, f32Constant(nb, nl, 1.0f), s),
            l);
        return arith::MulFOp::create(nb, nl, p, t);
      },
      lse);
  grads.lse =
      linalg::GenericOp::create(
          b, loc, TypeRange{lse.getType()}, ValueRange{g, sums},
          ValueRange{empty(b, loc, rows, f32)},
          ArrayRef<AffineMap>{rowId, rowId, rowId},
          SmallVector<IteratorType>(3, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            linalg::YieldOp::create(
                nb, nl,
                arith::MulFOp::create(nb, nl, args[0], args[1]).getResult());
          })
          .getResult(0);
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(ctx);
  Value modifiedGrad =
      linalg::GenericOp::create(
          b, loc, TypeRange{probs.getType()}, ValueRange{masked, probs, g, lse},
          ValueRange{empty(b, loc, shapeOf(probs), f32)},
          ArrayRef<AffineMap>{full, full, row, row, full},
          SmallVector<IteratorType>(4, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value shifted = arith::SubFOp::create(
                nb, nl, arith::SubFOp::create(nb, nl, args[3], args[0]),
                f32Constant(nb, nl, 1.0f));
            Value x = arith::MulFOp::create(
                nb, nl, args[2],
                arith::MulFOp::create(nb, nl, args[1], shifted));
            linalg::YieldOp::create(nb, nl, whereProbable(nb, nl, args[1], x));
          })
          .getResult(0);
  AttentionGrads scoreGrads = buildScoreGrads(b, loc, scores, modifiedGrad, in);
  grads.query = scoreGrads.query;
  grads.key = scoreGrads.key;
  grads.scoreCaptures = scoreGrads.scoreCaptures;
  return grads;
}

//===----------------------------------------------------------------------===//
// Distillation
//===----------------------------------------------------------------------===//

namespace {

/// P_t and r = (S_t - LSE_t) - (S_s - LSE_s) of attn.distill, [B, H, Sq,
/// Skv]. r is NaN (-inf - -inf) where a key is masked: every use takes it
/// through whereProbable, where P_t = 0.
struct DistillTerms {
  Value probs, ratio;
};

DistillTerms buildDistillTerms(OpBuilder &b, Location loc,
                               const DistillInputs &in) {
  Value student = buildMaskedScores(b, loc, in.student).second;
  Value teacher = buildMaskedScores(b, loc, in.teacher).second;
  DistillTerms terms;
  terms.probs = buildRecomputedProbs(b, loc, teacher, in.teacherLse);
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(b.getContext());
  terms.ratio =
      linalg::GenericOp::create(
          b, loc, TypeRange{teacher.getType()},
          ValueRange{teacher, in.teacherLse, student, in.lse},
          ValueRange{empty(b, loc, shapeOf(teacher), b.getF32Type())},
          ArrayRef<AffineMap>{full, row, full, row, full},
          SmallVector<IteratorType>(4, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value logPt = arith::SubFOp::create(nb, nl, args[0], args[1]);
            Value logPs = arith::SubFOp::create(nb, nl, args[2], args[3]);
            linalg::YieldOp::create(
                nb, nl,
                arith::SubFOp::create(nb, nl, logPt, logPs).getResult());
          })
          .getResult(0);
  return terms;
}

/// sum over all of [B, H, Sq] of f(x_bhi, LSE_bhi), into an f32 tensor<1>:
/// the loops (u, b, h, i) keep a parallel one of size 1, which the GPU
/// targets map to a thread (a generic without one would stay on the host).
Value buildTotal(OpBuilder &b, Location loc, Value x, Value lse,
                 function_ref<Value(OpBuilder &, Location, Value, Value)> f) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  return linalg::GenericOp::create(
             b, loc, TypeRange{RankedTensorType::get({1}, f32)},
             ValueRange{x, lse}, ValueRange{filled(b, loc, {1}, f32, 0.0)},
             ArrayRef<AffineMap>{dims(ctx, 4, {1, 2, 3}),
                                 dims(ctx, 4, {1, 2, 3}), dims(ctx, 4, {0})},
             SmallVector<IteratorType>{kPar, kRed, kRed, kRed},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl,
                   arith::AddFOp::create(nb, nl, args[2],
                                         f(nb, nl, args[0], args[1]))
                       .getResult());
             })
      .getResult(0);
}

/// The rows that see a key (LSE != -inf) over all of [B, H, Sq], as an f32
/// tensor<1>.
Value buildSeenRowCount(OpBuilder &b, Location loc, Value lse) {
  return buildTotal(b, loc, lse, lse,
                    [](OpBuilder &nb, Location nl, Value, Value l) -> Value {
                      return arith::SelectOp::create(
                          nb, nl, rowSeesKey(nb, nl, l),
                          f32Constant(nb, nl, 1.0f), f32Constant(nb, nl, 0.0f));
                    });
}

} // namespace

Value buildDistill(OpBuilder &b, Location loc, const DistillInputs &in,
                   bool mean) {
  DistillTerms terms = buildDistillTerms(b, loc, in);
  // KL_i = sum_j P_t,ij r_ij over the keys where P_t != 0.
  Value kl = buildRowSum(
      b, loc, terms.ratio, terms.probs,
      [](OpBuilder &nb, Location nl, Value r, Value p, Value) -> Value {
        return arith::MulFOp::create(nb, nl, p, r);
      },
      in.teacherLse);
  if (!mean)
    return kl;
  // The mean over the rows that see a key (the others' KL is 0).
  Value sum = buildTotal(
      b, loc, kl, in.teacherLse,
      [](OpBuilder &, Location, Value x, Value) -> Value { return x; });
  Value seen = buildSeenRowCount(b, loc, in.teacherLse);
  Type f32 = b.getF32Type();
  Value mean1 = buildMeanOf(b, loc, sum, seen);
  return tensor::CollapseShapeOp::create(b, loc, RankedTensorType::get({}, f32),
                                         mean1,
                                         ArrayRef<ReassociationIndices>{});
}

DistillGrads buildDistillGrad(OpBuilder &b, Location loc,
                              const DistillInputs &in, Value klGrad) {
  DistillTerms terms = buildDistillTerms(b, loc, in);
  ArrayRef<int64_t> rows = shapeOf(in.teacherLse);
  Type f32 = b.getF32Type();
  MLIRContext *ctx = b.getContext();
  AffineMap rowId = b.getMultiDimIdentityMap(3),
            scalarMap = AffineMap::get(3, 0, {}, ctx),
            countMap =
                AffineMap::get(3, 0, {getAffineConstantExpr(0, ctx)}, ctx);
  // g_i: the row's cotangent, or the mean's shared among the rows that see
  // a key; 0 on the rows that see none.
  bool mean = shapeOf(klGrad).empty();
  SmallVector<Value> inputs = {in.teacherLse, klGrad};
  SmallVector<AffineMap> maps = {rowId, mean ? scalarMap : rowId};
  if (mean) {
    inputs.push_back(buildSeenRowCount(b, loc, in.teacherLse));
    maps.push_back(countMap);
  }
  maps.push_back(rowId);
  Value g =
      linalg::GenericOp::create(
          b, loc, TypeRange{in.teacherLse.getType()}, inputs,
          ValueRange{empty(b, loc, rows, f32)}, maps,
          SmallVector<IteratorType>(3, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value share = args[1];
            if (mean)
              share = arith::DivFOp::create(
                  nb, nl, share,
                  arith::MaximumFOp::create(nb, nl, args[2],
                                            f32Constant(nb, nl, 1.0f)));
            linalg::YieldOp::create(
                nb, nl,
                arith::SelectOp::create(nb, nl, rowSeesKey(nb, nl, args[0]),
                                        share, f32Constant(nb, nl, 0.0f))
                    .getResult());
          })
          .getResult(0);

  DistillGrads grads;
  // dLSE_s,i = g_i sum_j P_t,ij; dLSE_t,i = -g_i sum_j P_t,ij (r_ij + 1).
  grads.lse = buildRowSum(
      b, loc, terms.ratio, terms.probs,
      [](OpBuilder &nb, Location nl, Value, Value p, Value gi) -> Value {
        return arith::MulFOp::create(nb, nl, gi, p);
      },
      g);
  auto shifted = [](OpBuilder &nb, Location nl, Value r) -> Value {
    return arith::AddFOp::create(nb, nl, r, f32Constant(nb, nl, 1.0f));
  };
  grads.teacherLse = buildRowSum(
      b, loc, terms.ratio, terms.probs,
      [&](OpBuilder &nb, Location nl, Value r, Value p, Value gi) -> Value {
        return arith::NegFOp::create(
            nb, nl,
            arith::MulFOp::create(
                nb, nl, gi,
                arith::MulFOp::create(nb, nl, p, shifted(nb, nl, r))));
      },
      g);

  // dS_s,ij = -g_i P_t,ij; dS_t,ij = g_i P_t,ij (r_ij + 1); 0 where
  // P_t = 0 (a masked key's r is NaN).
  AffineMap full = b.getMultiDimIdentityMap(4), row = rowMap(ctx);
  auto scoresType = cast<RankedTensorType>(terms.probs.getType());
  auto modifiedGrads =
      linalg::GenericOp::create(
          b, loc, TypeRange{scoresType, scoresType},
          ValueRange{terms.ratio, terms.probs, g},
          ValueRange{empty(b, loc, scoresType.getShape(), f32),
                     empty(b, loc, scoresType.getShape(), f32)},
          ArrayRef<AffineMap>{full, full, row, full, full},
          SmallVector<IteratorType>(4, kPar),
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value gp = arith::MulFOp::create(nb, nl, args[2], args[1]);
            Value student = arith::NegFOp::create(nb, nl, gp);
            Value teacher =
                arith::MulFOp::create(nb, nl, gp, shifted(nb, nl, args[0]));
            linalg::YieldOp::create(
                nb, nl,
                ValueRange{whereProbable(nb, nl, args[1], student),
                           whereProbable(nb, nl, args[1], teacher)});
          })
          .getResults();
  std::tie(grads.query, grads.key) =
      buildQueryKeyGrads(b, loc, modifiedGrads[0], in.student);
  std::tie(grads.teacherQuery, grads.teacherKey) =
      buildQueryKeyGrads(b, loc, modifiedGrads[1], in.teacher);
  return grads;
}

} // namespace attnc
