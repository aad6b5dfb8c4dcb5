// The flash-attention CPU kernels (see FlashAttention.h).
//
// Written with scf/vector/memref builders rather than linalg tiling because
// the online softmax couples the two matmuls through per-row state (running
// max, sum, rescaling) that upstream tiling does not express. Every matmul
// is a broadcast-FMA register block over a tile of 32 keys (A^T: the
// query tile's rows packed side by side):
//   S[r, 0:32]    += A^T[d, r] * Xt[d, 0:32]    (Q K^T, dO V^T)
//   Y[r, c:c+32]  += C[r, j] * X[j, c:c+32]     (P V, dS K)
//   Z^T[d, 0:32]  += A^T[d, r] * C[r, 0:32]     (dO^T P, Q^T dS)
#include "codegen/cpu/FlashAttention.h"

#include "codegen/cpu/FastExp.h"
#include "codegen/cpu/KernelBuilder.h"
#include "codegen/cpu/WidenRegion.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;

namespace attnc {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
/// The rows and keys of an AMX tile of f32 scores.
constexpr int64_t kAmxRows = attn::CpuPlanAttr::kAmxRows;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

/// f32, f16 and bf16 inputs all compute in f32 (the verifier makes Q, K,
/// V and O share one element type); float captures have gradients.
bool isFloatTensor(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

/// What the forward and backward kernels share: shapes, masks, buffers in
/// and out of bufferization, and the tile computations.
class FlashCommon : public KernelBuilder {
public:
  template <typename OpTy>
  FlashCommon(ImplicitLocOpBuilder &b, OpTy op, int64_t rows,
              int64_t vectorBits)
      : KernelBuilder(b, rows), scalefExp(vectorBits >= 512),
        causal(op.getCausal()), window(op.getWindow()),
        scale(float(op.getEffectiveScale())),
        parent(op->template getParentOfType<func::FuncOp>()),
        scoreMod(op.getScoreMod()), maskMod(op.getMaskMod()),
        numScoreCaptures(op.getScoreCaptures().size()) {
    for (Value capture : op.getScoreCaptures())
      captures.push_back(capture);
    for (Value capture : op.getMaskCaptures())
      captures.push_back(capture);
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
                      v = shapeOf(op.getValue());
    B = q[0], H = q[1], Sq = q[2], D = q[3], Hkv = k[1], Skv = k[2],
    Dv = v[3];
    tiles = (Skv + kCols - 1) / kCols;
  }

protected:
  /// Runs body(args, bi, head) for every (batch, head) of `heads` heads on
  /// the thread pool: the per-call data preparation (transposes, packing,
  /// row sums) is parallel too.
  /// With `shared`, the body depends on nothing but what `name` says
  /// (sharedParallelTasks).
  void forEachHead(StringRef name, ArrayRef<Value> captured, int64_t heads,
                   function_ref<void(ArrayRef<Value>, Value, Value)> body,
                   bool shared = false) {
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

  /// `memref`'s shape as "1x8x2048x64", for the names of functions shared
  /// by every call site of the same operand shapes.
  static std::string shapeName(Value memref) {
    std::string name;
    llvm::raw_string_ostream os(name);
    llvm::interleave(shapeOf(memref), os, "x");
    return name;
  }

  /// K or V transposed into key tiles [B, Hkv, tiles, width, 32], the
  /// tile count rounded up to a multiple of `tileMultiple` (zero padding),
  /// plus `spareTiles` of zeros.
  Value transposed(Value memref, int64_t tileMultiple = 1,
                   int64_t spareTiles = 0) {
    int64_t count =
        (tiles + tileMultiple - 1) / tileMultiple * tileMultiple + spareTiles;
    Value t = alloc({B, Hkv, count, shapeOf(memref)[3], kCols});
    // Transposes of one shape share one function (the backward's K and V
    // when D = Dv): the body depends on nothing but the two types.
    std::string name;
    llvm::raw_string_ostream(name)
        << "__attnc_flash_transpose_" << shapeName(memref) << "x"
        << elementOf(memref) << "_" << count;
    forEachHead(
        name, {memref, t}, Hkv,
        [&](ArrayRef<Value> args, Value bi, Value g) {
          transposeTiles(args[0], args[1], bi, g);
        },
        /*shared=*/true);
    return t;
  }

  /// V (f32) in column chunks of 2 vectors, [B, Hkv, chunks, Skv +
  /// spareKeys, 32] (the last chunk half used when Dv is an odd number of
  /// vectors; the spare keys for prefetches are left as they are): the
  /// forward's P V then reads each chunk's keys as one sequential stream
  /// rather than 128 bytes of every V row, 512 bytes apart at Dv = 128,
  /// where its loads waited on L2 (perf). The forward ran 8% faster at
  /// S = 2048, D = 128 and 5% at D = 64, causal or not (interleaved A/B,
  /// 1 and 2 threads), for one copy of V per call.
  Value chunkedValues(Value v, int64_t spareKeys) {
    Value t =
        alloc({B, Hkv, (Dv / kLanes + 1) / 2, Skv + spareKeys, 2 * kLanes});
    std::string name;
    llvm::raw_string_ostream(name)
        << "__attnc_flash_chunk_" << shapeName(v) << "x" << elementOf(v);
    forEachHead(
        name, {v, t}, Hkv,
        [&](ArrayRef<Value> args, Value bi, Value g) {
          copyColumnChunks(args[0], bi, g, Value(), idx(Skv), args[1], {bi, g});
        },
        /*shared=*/true);
    return t;
  }

  /// dst[at..., w / 2, j, 16 (w % 2) : +16] = src[bi, g, j0 + j, 16 w : +16]
  /// (f32) for j < count: src's rows in column chunks of 32, each chunk's
  /// rows one after another (rowsTimesKeys' chunked x); a null j0 means 0.
  void copyColumnChunks(Value src, Value bi, Value g, Value j0, Value count,
                        Value dst, ValueRange at) {
    int64_t vectors = shapeOf(src)[3] / kLanes;
    loop(idx(0), count, 1, [&](Value j) {
      Value key = j0 ? arith::AddIOp::create(b, j0, j).getResult() : j;
      for (int64_t w = 0; w < vectors; ++w) {
        SmallVector<Value> to(at);
        to.append({idx(w / 2), j, idx(w % 2 * kLanes)});
        vector::StoreOp::create(
            b, loadVectorF32(src, ValueRange{bi, g, key, idx(w * kLanes)}), dst,
            to);
      }
    });
  }

  /// The keys batch `bi` has: Skv, or its entry of the key lengths.
  Value keyLimit(Value lengths, Value bi) {
    Value limit = idx(Skv);
    if (!lengths)
      return limit;
    Value len = memref::LoadOp::create(b, lengths, bi);
    Value n = arith::IndexCastOp::create(b, b.getIndexType(), len);
    return arith::MinSIOp::create(b, limit,
                                  arith::MaxSIOp::create(b, n, idx(0)));
  }

  /// Query row i clamped to Sq - 1 (rows past Sq repeat the last one) and
  /// the key range [lo, hi) it sees; `existsOnly` empties rows past Sq.
  struct RowRange {
    Value row, lo, hi;
  };
  RowRange rowRange(Value limit, Value i, bool existsOnly) {
    RowRange range;
    range.row = arith::MinUIOp::create(b, i, idx(Sq - 1));
    range.hi = limit;
    if (causal || window)
      range.hi = arith::MinSIOp::create(
          b, range.hi, arith::AddIOp::create(b, range.row, idx(1)));
    if (existsOnly)
      range.hi = arith::SelectOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          range.hi, idx(0));
    range.lo = idx(0);
    if (window)
      range.lo = arith::MaxSIOp::create(
          b, range.lo, arith::SubIOp::create(b, range.row, idx(*window - 1)));
    return range;
  }

  /// The rows of query tile `ib` of head h (and its KV head g), the key
  /// limit of the batch, and the keys some row sees: [lo of the first row
  /// rounded down to a multiple of `block`, hi of the last row).
  struct QueryTile {
    Value g, i0, limit, jStart, jEnd;
  };
  QueryTile queryTile(Value lengths, Value bi, Value h, Value ib,
                      int64_t block = kCols) {
    QueryTile t;
    t.g = arith::DivUIOp::create(b, h, idx(H / Hkv));
    t.i0 = arith::MulIOp::create(b, ib, idx(rows));
    t.limit = keyLimit(lengths, bi);
    Value first = rowRange(t.limit, t.i0, false).lo;
    Value last =
        rowRange(t.limit, arith::AddIOp::create(b, t.i0, idx(rows - 1)), false)
            .hi;
    t.jStart = arith::MulIOp::create(
        b, arith::DivUIOp::create(b, first, idx(block)), idx(block));
    t.jEnd = arith::MaxSIOp::create(b, last, t.jStart);
    return t;
  }

  /// Runs body(r, i = i0 + r) for the rows of a tile as a loop, one row
  /// per iteration: the per-row softmax code is long, the loop keeps the
  /// kernel small (JIT compile time). (Measured with interleaved A/B calls:
  /// with 32-key tiles the forward's rows unrolled by 2 ran 3.5% faster;
  /// with 128-key steps 0.7-1.3%, while the copy cost 16-27% of the JIT's
  /// instructions for the examples; the backward's gained nothing.)
  void forRows(Value i0, function_ref<void(Value, Value)> body) {
    loop(0, rows, [&](Value r) { body(r, arith::AddIOp::create(b, i0, r)); });
  }

  /// Whether every row of the query tile from i0 sees all `width` keys
  /// from j0 under the named masks (lo grows with the row, hi too until
  /// rows past Sq, which see none when `existsOnly`).
  Value tileIsWhole(Value limit, Value i0, Value j0, bool existsOnly,
                    int64_t width = kCols) {
    RowRange first = rowRange(limit, i0, existsOnly);
    RowRange last = rowRange(
        limit, arith::AddIOp::create(b, i0, idx(rows - 1)), existsOnly);
    Value minHi = arith::MinSIOp::create(b, first.hi, last.hi);
    return arith::AndIOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j0, last.lo),
        arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                              arith::AddIOp::create(b, j0, idx(width)),
                              minHi));
  }

  /// keyMask, skipped (all lanes kept) in tiles the named masks leave whole:
  /// only boundary tiles evaluate it.
  SmallVector<Value> keyMaskUnlessWhole(Value whole, Value j0, Value lo,
                                        Value hi, int64_t width = kCols) {
    auto maskType = VectorType::get({kLanes}, b.getI1Type());
    SmallVector<Type> types(width / kLanes, maskType);
    auto ifOp = scf::IfOp::create(b, types, whole, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value all = arith::ConstantOp::create(
        b, DenseElementsAttr::get(maskType, true));
    scf::YieldOp::create(b, SmallVector<Value>(types.size(), all));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, keyMask(j0, lo, hi, width));
    return SmallVector<Value>(ifOp.getResults());
  }

  /// Whether each key of the `width` from j0 lies in [lo, hi), per 16-lane
  /// vector.
  SmallVector<Value> keyMask(Value j0, Value lo, Value hi,
                             int64_t width = kCols) {
    auto i32Vec = VectorType::get({kLanes}, b.getI32Type());
    auto toI32 = [&](Value index) {
      return arith::IndexCastOp::create(b, b.getI32Type(), index).getResult();
    };
    Value l = splat(toI32(lo)), h = splat(toI32(hi));
    SmallVector<Value> masks;
    for (int64_t w = 0; w < width / kLanes; ++w) {
      SmallVector<int32_t> lanes(kLanes);
      for (int32_t lane = 0; lane < kLanes; ++lane)
        lanes[lane] = int32_t(w * kLanes) + lane;
      Value jv = arith::AddIOp::create(
          b,
          arith::ConstantOp::create(
              b, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(lanes))),
          splat(toI32(j0)));
      masks.push_back(arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, jv, l),
          arith::CmpIOp::create(b, arith::CmpIPredicate::slt, jv, h)));
    }
    return masks;
  }

  /// y[r, :] = alpha[r] * y[r, :] + sum_{j < valid} c[r, j] * x[bi, g, j0 + j,
  /// :] (x's width a multiple of 16); a null `alpha` (a memref of rows scalars)
  /// means 1.
  void rowsTimesKeys(Value y, Value c, Value x, Value bi, Value g, Value j0,
                     Value valid, Value alpha, int64_t prefetchAhead = 0) {
    forColumns(shapeOf(y).back(), [&](Value col, int64_t n) {
      rowsTimesKeysColumns(y, c, x, bi, g, j0, valid, alpha, col, n,
                           prefetchAhead);
    });
  }

  /// body(col, n) for the columns of a row `width` wide (a multiple of 16),
  /// n vectors from col: 32 at a time through a loop, then a 16-wide tail.
  void forColumns(int64_t width, function_ref<void(Value, int64_t)> body) {
    int64_t pairs = width / (2 * kLanes);
    if (pairs)
      loop(idx(0), idx(pairs * 2 * kLanes), 2 * kLanes,
           [&](Value col) { body(col, 2); });
    if (width % (2 * kLanes))
      body(idx(pairs * 2 * kLanes), 1);
  }

  /// rowsTimesKeys for the n vectors of columns from `col`. c may also be
  /// in key tiles, [tiles, rows, 32]: c[r, j] is then c[j / 32, r, j % 32].
  /// With `prefetchAhead`, a chunked x's row that many keys ahead is
  /// prefetched at each key (x then has that many keys past Skv).
  void rowsTimesKeysColumns(Value y, Value c, Value x, Value bi, Value g,
                            Value j0, Value valid, Value alpha, Value col,
                            int64_t n, int64_t prefetchAhead = 0) {
    SmallVector<Value> cols;
    for (int64_t w = 0; w < n; ++w)
      cols.push_back(arith::AddIOp::create(b, col, idx(w * kLanes)));
    // x chunked ([B, Hkv, chunks, S, 32], chunkedValues) or as given.
    bool chunked = shapeOf(x).size() == 5;
    Value chunk =
        chunked ? arith::DivUIOp::create(b, col, idx(2 * kLanes)) : Value();
    SmallVector<Value> acc;
    for (int64_t r = 0; r < rows; ++r) {
      Value scaleRow;
      if (alpha)
        scaleRow = splat(memref::LoadOp::create(b, alpha, idx(r)));
      for (int64_t w = 0; w < n; ++w) {
        Value v =
            vector::LoadOp::create(b, vec, y, ValueRange{idx(r), cols[w]});
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
            x,
            {bi, g, chunk, arith::AddIOp::create(b, key, idx(prefetchAhead))},
            n);
      SmallVector<Value> xs;
      for (int64_t w = 0; w < n; ++w)
        xs.push_back(chunked
                         ? loadVectorF32(x, ValueRange{bi, g, chunk, key,
                                                       idx(w * kLanes)})
                         : loadVectorF32(x, ValueRange{bi, g, key, cols[w]}));
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
      Value count = arith::MinUIOp::create(
          b, idx(kCols), arith::SubIOp::create(b, valid, base));
      scf::YieldOp::create(b, keyLoop(tLoop.getRegionIterArgs(),
                                      arith::AddIOp::create(b, j0, base), count,
                                      t));
      sums.assign(tLoop.getResults().begin(), tLoop.getResults().end());
    } else {
      sums = keyLoop(acc, j0, valid, Value());
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t w = 0; w < n; ++w)
        vector::StoreOp::create(b, sums[r * n + w], y,
                                ValueRange{idx(r), cols[w]});
  }

  /// Appends the region captures' buffers (score_mod's, then mask_mod's) to
  /// a task's captured values and notes where they start in its arguments.
  void appendCaptures(SmallVectorImpl<Value> &captured) {
    captureBase = captured.size();
    for (Value capture : captures)
      captured.push_back(bufferOf(capture));
  }

  /// The key indices j0 + 16 w + lane as a vector of index.
  Value keyIndices(Value j0, int64_t w) {
    auto type = VectorType::get({kLanes}, b.getIndexType());
    Value iota = arith::ConstantOp::create(
        b, DenseElementsAttr::get(
               type, ArrayRef<int64_t>(llvm::to_vector(llvm::seq<int64_t>(
                         0, kLanes)))));
    return arith::AddIOp::create(
        b, iota,
        vector::BroadcastOp::create(
            b, type, arith::AddIOp::create(b, j0, idx(w * kLanes))));
  }

  /// One 16-key half w of a score row: the scaled scores (x = scale S, or
  /// s itself when `prescaled`), the score_mod of them (S', x without a
  /// region) and the lanes the masks keep (`inRange`, the named masks, and
  /// the mask_mod region); with a region, also the key indices it saw.
  struct Scores {
    Value scaled, modified, keep, keys;
  };
  Scores scoresOf(ArrayRef<Value> caps, Value s, Value inRange, Value bi,
                  Value h, Value row, Value j0, int64_t w, bool prescaled) {
    Scores out;
    out.scaled = prescaled
                     ? s
                     : arith::MulFOp::create(b, s, splat(f(scale))).getResult();
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

  /// Stores the 2 * rows vectors of a tile product into columns [col,
  /// col + 32) of a rows x n buffer.
  void storeTile(ArrayRef<Value> tile, Value buffer, Value col = Value()) {
    if (!col)
      col = idx(0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t w = 0; w < 2; ++w)
        vector::StoreOp::create(
            b, tile[2 * r + w], buffer,
            ValueRange{idx(r), arith::AddIOp::create(b, col, idx(w * kLanes))});
  }

  /// Zeros a 2-d or 3-d f32 buffer whose rows are a multiple of 16 wide.
  void zero(Value buffer) {
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

  /// buffer[leading..., from : from + count, ...] (the whole next dimension
  /// without `from`) as a memref of the remaining dimensions.
  Value view(Value buffer, ValueRange leading, Value from = Value(),
             int64_t count = 0) {
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

  /// exp of 16 lanes (vscalefps on AVX-512, upstream's polynomial else),
  /// 0 below the smallest normal float: denormal probabilities made the
  /// P V products take microcode assists (a forward with large logits,
  /// a projected-Q MHA layer, ran 4x slower), and a masked -inf gives
  /// exactly 0.
  Value expVector(Value x) {
    return scalefExp ? buildExpScalef(b, x)
                     : flushTiny(x, math::ExpOp::create(b, x));
  }

  /// values[0] op values[1] op ... as a tree (depth log2 n, not a chain of
  /// n - 1 dependent ops; the forward's 8 vectors a row: 1.9% faster at
  /// D=64, interleaved A/B).
  Value tree(ArrayRef<Value> values,
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

  /// e = exp(x) (a scalar or 16 lanes), 0 where x < ln FLT_MIN.
  Value flushTiny(Value x, Value e) {
    auto constant = [&](float v) {
      return isa<VectorType>(x.getType()) ? splat(f(v)) : f(v);
    };
    Value tiny = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x,
                                       constant(-87.3365447f));
    return arith::SelectOp::create(b, tiny, constant(0.0f), e);
  }

  bool scalefExp;
  bool causal;
  std::optional<int64_t> window;
  float scale;
  func::FuncOp parent;
  Region &scoreMod, &maskMod;
  size_t numScoreCaptures;
  SmallVector<Value> captures; // score_mod's, then mask_mod's (tensors)
  size_t captureBase = 0;      // where their buffers start in task args
  int64_t B, H, Sq, D, Hkv, Skv, Dv, tiles;
};

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

class FlashForward : public FlashCommon {
public:
  FlashForward(ImplicitLocOpBuilder &b, attn::AttentionOp op,
               attn::CpuPlanAttr plan, int64_t vectorBits)
      : FlashCommon(b, op, plan.getRows(), vectorBits), op(op),
        amx(plan.getAmx()), bf16(b.getBF16Type()),
        blockTiles(plan.getKeyBlock() / kCols), qTiles((Sq + rows - 1) / rows),
        groupTiles(std::min(qTiles, plan.getQueryBlock() / rows)) {}

  std::pair<Value, Value> build() {
    Value q = bufferOf(op.getQuery()), k = bufferOf(op.getKey()),
          v = bufferOf(op.getValue());
    Value lengths = op.getLengths() ? bufferOf(op.getLengths()) : Value();
    Value o = alloc({B, H, Sq, Dv}, elementOf(op.getOutput())),
          l = alloc({B, H, Sq});
    // K and V as the products' B operands: K^T in key tiles, or on AMX K
    // and V in bf16 pairs (VNNI).
    SmallVector<Value> captured = {q, Value(), v, o, l};
    if (amx)
      std::tie(captured[1], captured[2]) = pairedKeysAndValues(k, v);
    else
      std::tie(captured[1], captured[2]) =
          std::pair(transposed(k, blockTiles, (kPrefetchRows + D - 1) / D),
                    chunkedValues(v, kPrefetchRows));
    if (lengths)
      captured.push_back(lengths);
    appendCaptures(captured);
    int64_t groups = (qTiles + groupTiles - 1) / groupTiles;
    parallelTasks(
        parent, "__attnc_flash_forward", captured, B * H * groups,
        [&](ArrayRef<Value>) {
          // Per query tile of the group: O, the running max and sum, and
          // the packed rows of Q, times the scale (the products give scaled
          // scores: no multiply per score); per step: P and the rescaling
          // factors.
          // On AMX: Q's rows in bf16, and per step P in bf16 and P V.
          SmallVector<Value> buffers = {
              scratchBuffer({groupTiles, rows, Dv}),
              scratchBuffer({rows, blockTiles * kCols}),
              scratchBuffer({groupTiles, rows}),
              scratchBuffer({groupTiles, rows}), scratchBuffer({rows})};
          if (!amx)
            buffers.push_back(scratchBuffer({groupTiles, D, rows}));
          else
            buffers.append({scratchBuffer({groupTiles, rows, D}, bf16),
                            scratchBuffer({rows, blockTiles * kCols}, bf16),
                            scratchBuffer({rows, Dv})});
          return buffers;
        },
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value group = arith::RemUIOp::create(b, t, idx(groups));
          Value bh = arith::DivUIOp::create(b, t, idx(groups));
          task(args, scratch, arith::DivUIOp::create(b, bh, idx(H)),
               arith::RemUIOp::create(b, bh, idx(H)), group);
        });
    return {tensorOf(o, op.getOutput().getType()),
            tensorOf(l, op.getLse().getType())};
  }

private:
  /// The state of one query tile: views of the group's scratch buffers.
  struct TileState {
    Value t, oBuf, maxBuf, sumBuf, qPacked;
  };
  TileState stateOf(ArrayRef<Value> scratch, Value t) {
    return {t, view(scratch[0], t), view(scratch[2], t), view(scratch[3], t),
            view(scratch[5], t)};
  }

  /// The query tiles [first, first + count) of group `group` of (bi, h):
  /// the key blocks some tile sees are visited once, each by every tile
  /// that sees it, so that a block read from L2 serves the whole group.
  void task(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi, Value h,
            Value group) {
    Value q = args[0], o = args[3], l = args[4];
    Value lengths = captureBase > 5 ? args[5] : Value();
    int64_t width = blockTiles * kCols;
    Value first = arith::MulIOp::create(b, group, idx(groupTiles));
    Value count = arith::MinUIOp::create(
        b, idx(groupTiles), arith::SubIOp::create(b, idx(qTiles), first));
    auto tileOf = [&](Value t) {
      return queryTile(lengths, bi, h, arith::AddIOp::create(b, first, t),
                       width);
    };
    loop(idx(0), count, 1, [&](Value t) {
      TileState st = stateOf(scratch, t);
      zero(st.oBuf);
      if (amx)
        copyRows(q, bi, h, tileOf(t).i0, st.qPacked);
      else
        packRows(q, bi, h, tileOf(t).i0, Sq - 1, st.qPacked, scale);
      loop(0, rows, [&](Value r) {
        memref::StoreOp::create(b, f(kNegInf), st.maxBuf, r);
        memref::StoreOp::create(b, f(0.0f), st.sumBuf, r);
      });
    });
    // Tiles' key ranges grow with their rows: the first tile's start and
    // the last one's end bound the group's.
    Value jStart = tileOf(idx(0)).jStart;
    Value jEnd = tileOf(arith::SubIOp::create(b, count, idx(1))).jEnd;
    loop(jStart, jEnd, width, [&](Value j0) {
      loop(idx(0), count, 1, [&](Value t) {
        QueryTile qt = tileOf(t);
        Value sees = arith::AndIOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::sge, j0, qt.jStart),
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt, j0, qt.jEnd));
        auto ifOp = scf::IfOp::create(b, sees, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        keyBlock(args, scratch, stateOf(scratch, t), qt, bi, h, j0);
      });
    });
    // O = oBuf / l and LSE = m + log l for the rows that exist; a row that
    // saw no key gets O = 0 and LSE = -inf.
    loop(idx(0), count, 1, [&](Value t) {
      TileState st = stateOf(scratch, t);
      Value oBuf = st.oBuf, maxBuf = st.maxBuf, sumBuf = st.sumBuf;
      Value i0 = tileOf(t).i0;
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
        Value lse = arith::AddFOp::create(b, m, math::LogOp::create(b, sum));
        memref::StoreOp::create(b, arith::SelectOp::create(b, empty, f(kNegInf), lse),
                                l, ValueRange{bi, h, i});
      });
    });
  }

  /// One step of the online softmax: query tile `qt` (state `st`) over the
  /// keys [j0, j0 + width).
  void keyBlock(ArrayRef<Value> args, ArrayRef<Value> scratch,
                const TileState &st, const QueryTile &qt, Value bi, Value h,
                Value j0) {
    Value kt = args[1], v = args[2];
    Value pBuf = scratch[1], alphaBuf = scratch[4];
    Value oBuf = st.oBuf, maxBuf = st.maxBuf, sumBuf = st.sumBuf,
          qPacked = st.qPacked;
    Value g = qt.g, i0 = qt.i0;
    int64_t width = blockTiles * kCols, n = width / kLanes;
    // The block's scores, tile by tile; a tile no row sees (past jEnd,
    // on the causal diagonal) is skipped: the masks drop its lanes.
    Value tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
    if (amx)
      amxScores(scratch[5], st.t, kt, bi, g, tile0, pBuf);
    else
      loop(0, blockTiles, [&](Value t) {
        // A loop, not blockTiles copies of the product (JIT compile time).
        Value col = arith::MulIOp::create(b, t, idx(kCols));
        auto ifOp = scf::IfOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                  arith::AddIOp::create(b, j0, col), qt.jEnd),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        storeTile(tileProduct(qPacked, {}, kt, bi, g,
                              arith::AddIOp::create(b, tile0, t),
                              kPrefetchRows),
                  pBuf, col);
      });
    Value whole =
        tileIsWhole(qt.limit, i0, j0, /*existsOnly=*/false, width);
    forRows(i0, [&](Value r, Value i) {
      RowRange range = rowRange(qt.limit, i, /*existsOnly=*/false);
      SmallVector<Value> in =
          keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
      Value negInf = splat(f(kNegInf));
      SmallVector<Value> s;
      for (int64_t w = 0; w < n; ++w) {
        Value x = vector::LoadOp::create(b, vec, pBuf,
                                         ValueRange{r, idx(w * kLanes)});
        Scores sc = scoresOf(args.slice(captureBase, captures.size()), x, in[w],
                             bi, h, range.row, j0, w, /*prescaled=*/!amx);
        s.push_back(
            arith::SelectOp::create(b, sc.keep, sc.modified, negInf));
      }
      Value blockMax = tree(s, [&](Value x, Value y) { return maxOf(x, y); });
      Value mOld = memref::LoadOp::create(b, maxBuf, r);
      Value m = maxOf(mOld, maxOfLanes(blockMax));
      // While a row has seen no key, m = -inf: subtract 0 instead so that
      // exp gives 0, never NaN.
      Value safe = arith::SelectOp::create(
          b, arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, m, f(kNegInf)),
          f(0.0f), m);
      // Flushed too: a denormal alpha would make O's rescale denormal.
      Value shift = arith::SubFOp::create(b, mOld, safe);
      Value alpha = flushTiny(shift, math::ExpOp::create(b, shift));
      // P for the step's P V: f32 for the FMA product, bf16 straight into
      // the A tile's rows on AMX.
      SmallVector<Value> p;
      for (int64_t w = 0; w < n; ++w) {
        p.push_back(expVector(arith::SubFOp::create(b, s[w], splat(safe))));
        storeVector(p.back(), amx ? scratch[6] : pBuf,
                    ValueRange{r, idx(w * kLanes)});
      }
      Value pSum = tree(p, [&](Value x, Value y) {
        return arith::AddFOp::create(b, x, y).getResult();
      });
      // reassoc: a tree reduction instead of 16 dependent adds.
      Value blockSum = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD, pSum, Value(),
          arith::FastMathFlags::reassoc);
      Value sum = arith::AddFOp::create(
          b, arith::MulFOp::create(b, memref::LoadOp::create(b, sumBuf, r),
                                   alpha),
          blockSum);
      memref::StoreOp::create(b, m, maxBuf, r);
      memref::StoreOp::create(b, sum, sumBuf, r);
      memref::StoreOp::create(b, alpha, alphaBuf, r);
    });
    if (amx) {
      amxUpdate(scratch, oBuf, v, bi, g, tile0);
      return;
    }
    // Keys past jEnd have p = 0: no row sees them.
    Value valid = arith::MinUIOp::create(
        b, idx(width), arith::SubIOp::create(b, qt.jEnd, j0));
    rowsTimesKeys(oBuf, pBuf, v, bi, g, j0, valid, alphaBuf, kPrefetchRows);
  }

  //===--------------------------------------------------------------------===//
  // AMX: the products on 16 x 16 f32 tiles, bf16 operands with pairs of
  // the reduction dimension side by side (tdpbf16ps's VNNI layout); the
  // softmax stays on AVX-512.
  //===--------------------------------------------------------------------===//

  /// K as [B, Hkv, 16-key tile, D / 2, 32] with (d, d + 1) pairs of a key
  /// side by side, V as [B, Hkv, 32-key tile, 16, 2 Dv] with (j, j + 1)
  /// pairs side by side; zeros past Skv.
  std::pair<Value, Value> pairedKeysAndValues(Value k, Value v) {
    // Whole steps of blockTiles tiles (zeros past Skv).
    int64_t padded = (tiles + blockTiles - 1) / blockTiles * blockTiles;
    Value kp = alloc({B, Hkv, 2 * padded, D / 2, 2 * kAmxRows}, bf16),
          vp = alloc({B, Hkv, padded, kAmxRows, 2 * Dv}, bf16);
    forEachHead(
        "__attnc_flash_pairs", {k, v, kp, vp}, Hkv,
        [&](ArrayRef<Value> args, Value bi, Value g) {
          Value zero = arith::ConstantOp::create(b, b.getZeroAttr(bf16));
          auto keyAt = [&](Value key, Value src, Value c) {
            Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                 key, idx(Skv));
            Value clamped = arith::MinUIOp::create(b, key, idx(Skv - 1));
            Value x =
                memref::LoadOp::create(b, src, ValueRange{bi, g, clamped, c});
            return arith::SelectOp::create(b, inside, x, zero).getResult();
          };
          loop(0, 2 * padded * kAmxRows, [&](Value key) {
            Value t = arith::DivUIOp::create(b, key, idx(kAmxRows));
            Value j = arith::RemUIOp::create(b, key, idx(kAmxRows));
            loop(0, D, [&](Value d) {
              Value lane = arith::AddIOp::create(
                  b, arith::MulIOp::create(b, j, idx(2)),
                  arith::RemUIOp::create(b, d, idx(2)));
              memref::StoreOp::create(
                  b, keyAt(key, args[0], d), args[2],
                  ValueRange{bi, g, t, arith::DivUIOp::create(b, d, idx(2)),
                             lane});
            });
          });
          loop(0, padded * kCols, [&](Value key) {
            Value t = arith::DivUIOp::create(b, key, idx(kCols));
            Value jp = arith::DivUIOp::create(
                b, arith::RemUIOp::create(b, key, idx(kCols)), idx(2));
            Value e = arith::RemUIOp::create(b, key, idx(2));
            loop(0, Dv, [&](Value c) {
              Value lane = arith::AddIOp::create(
                  b, arith::MulIOp::create(b, c, idx(2)), e);
              memref::StoreOp::create(b, keyAt(key, args[1], c), args[3],
                                      ValueRange{bi, g, t, jp, lane});
            });
          });
        });
    return {kp, vp};
  }

  /// rows[r, :] = q[bi, h, min(i0 + r, Sq - 1), :] (bf16, a tile's A).
  void copyRows(Value q, Value bi, Value h, Value i0, Value rowsBuf) {
    loop(0, rows, [&](Value r) {
      Value row = arith::MinUIOp::create(b, arith::AddIOp::create(b, i0, r),
                                         idx(Sq - 1));
      loop(idx(0), idx(D), kLanes, [&](Value c) {
        vector::StoreOp::create(
            b,
            vector::LoadOp::create(b, VectorType::get({kLanes}, bf16), q,
                                   ValueRange{bi, h, row, c}),
            rowsBuf, ValueRange{r, c});
      });
    });
  }

  /// pBuf[16, 32 blockTiles] = the query tile's rows (bf16, [G, 16, D])
  /// times the keys of the step from 32-key tile `tile`: 2 blockTiles
  /// 16 x 16 tiles, 4 at a time (with A and B: AMX has 8 tile registers),
  /// D / 32 products each.
  void amxScores(Value qRows, Value t, Value kp, Value bi, Value g,
                 Value tile, Value pBuf) {
    auto aType = amx::TileType::get({kAmxRows, 2 * kAmxRows}, bf16);
    auto cType = amx::TileType::get({kAmxRows, kAmxRows}, f32);
    // Up to 4 C tiles at a time (64 keys), in sub-steps over the step.
    for (int64_t first = 0; first < 2 * blockTiles; first += 4) {
      int64_t n = std::min<int64_t>(4, 2 * blockTiles - first);
      SmallVector<Value> c;
      for (int64_t w = 0; w < n; ++w)
        c.push_back(amx::TileZeroOp::create(b, cType));
      Value t16 = arith::AddIOp::create(
          b, arith::MulIOp::create(b, tile, idx(2)), idx(first));
      for (int64_t dc = 0; dc < D / 32; ++dc) {
        Value a = amx::TileLoadOp::create(b, aType, qRows,
                                          ValueRange{t, idx(0), idx(32 * dc)});
        for (int64_t w = 0; w < n; ++w) {
          Value bTile = amx::TileLoadOp::create(
              b, aType, kp,
              ValueRange{bi, g, arith::AddIOp::create(b, t16, idx(w)),
                         idx(16 * dc), idx(0)});
          c[w] = amx::TileMulFOp::create(b, cType, a, bTile, c[w]);
        }
      }
      for (int64_t w = 0; w < n; ++w)
        amx::TileStoreOp::create(
            b, pBuf, ValueRange{idx(0), idx(16 * (first + w))}, c[w]);
    }
  }

  /// O = alpha O + P V for the step's P (bf16, written by the softmax)
  /// and V's 32-key tiles from `tile` (pairs): P V on tiles of 16 columns,
  /// the rescale on AVX-512.
  void amxUpdate(ArrayRef<Value> scratch, Value oBuf, Value vp, Value bi,
                 Value g, Value tile) {
    Value alphaBuf = scratch[4], pPairs = scratch[6], pv = scratch[7];
    auto aType = amx::TileType::get({kAmxRows, 2 * kAmxRows}, bf16);
    auto cType = amx::TileType::get({kAmxRows, kAmxRows}, f32);
    // P's tiles held in tile registers when they fit beside A and C (up
    // to 2), else loaded per column tile.
    bool hold = blockTiles <= 2;
    auto pTile = [&](int64_t t) {
      return amx::TileLoadOp::create(b, aType, pPairs,
                                     ValueRange{idx(0), idx(t * kCols)})
          .getResult();
    };
    SmallVector<Value> a;
    if (hold)
      for (int64_t t = 0; t < blockTiles; ++t)
        a.push_back(pTile(t));
    for (int64_t c = 0; c < Dv; c += kAmxRows) {
      Value prod = amx::TileZeroOp::create(b, cType);
      for (int64_t t = 0; t < blockTiles; ++t) {
        Value bTile = amx::TileLoadOp::create(
            b, aType, vp,
            ValueRange{bi, g, arith::AddIOp::create(b, tile, idx(t)), idx(0),
                       idx(2 * c)});
        prod = amx::TileMulFOp::create(b, cType, hold ? a[t] : pTile(t), bTile,
                                       prod);
      }
      amx::TileStoreOp::create(b, pv, ValueRange{idx(0), idx(c)}, prod);
    }
    loop(0, rows, [&](Value r) {
      Value alpha = splat(memref::LoadOp::create(b, alphaBuf, r));
      loop(idx(0), idx(Dv), kLanes, [&](Value c) {
        Value o = vector::LoadOp::create(b, vec, oBuf, ValueRange{r, c});
        Value x = vector::LoadOp::create(b, vec, pv, ValueRange{r, c});
        vector::StoreOp::create(b, vector::FMAOp::create(b, o, alpha, x),
                                oBuf, ValueRange{r, c});
      });
    });
  }

  attn::AttentionOp op;
  bool amx;           // the products on AMX tiles
  Type bf16;
  int64_t blockTiles; // 32-key tiles per online-softmax step
  int64_t qTiles;     // query tiles per (batch, head)
  int64_t groupTiles; // query tiles per task
  // The products stream K^T's and V's rows from L2, 128 bytes each per
  // step: prefetching the row 16 steps ahead ran the forward 2-2.5%
  // faster at S = 2048, D = 128 and 1-3% at D = 64 (interleaved A/B, 2
  // threads; 8, 32 and 64 rows ahead of V gained less). The backward's
  // operands are per-block copies and gained nothing from it.
  static constexpr int64_t kPrefetchRows = 16;
};

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
    Value dQ = alloc({B, H, Sq, D}, elementOf(op.getQuery())),
          dK = alloc({B, Hkv, Skv, D}, elementOf(op.getKey())),
          dV = alloc({B, Hkv, Skv, Dv}, elementOf(op.getValue()));

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
    bool narrowOutput = !elementOf(op.getOutput()).isF32();
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
    forEachHead("__attnc_flash_dq", {dqCopies, dQ}, H,
                [&](ArrayRef<Value> args, Value bi, Value h) {
                  loop(0, Sq, [&](Value i) {
                    loop(idx(0), idx(D), kLanes, [&](Value c) {
                      Value sum = vector::LoadOp::create(
                          b, vec, args[0], ValueRange{idx(0), bi, h, i, c});
                      for (int64_t p = 1; p < splits; ++p)
                        sum = arith::AddFOp::create(
                            b, sum,
                            vector::LoadOp::create(
                                b, vec, args[0],
                                ValueRange{idx(p), bi, h, i, c}));
                      sum = arith::MulFOp::create(b, sum, splat(f(scale)));
                      storeVector(sum, args[1], ValueRange{bi, h, i, c});
                    });
                  });
                });
    SmallVector<Value> results = {
        tensorOf(dQ, op.getQueryGrad().getType()),
        tensorOf(dK, op.getKeyGrad().getType()),
        tensorOf(dV, op.getValueGrad().getType())};
    // Integer captures have no gradient: zeros.
    for (auto [k, grad] : llvm::enumerate(op.getScoreCapturesGrad())) {
      if (!isFloatTensor(grad)) {
        results.push_back(arith::ConstantOp::create(
            b, cast<TypedAttr>(b.getZeroAttr(grad.getType()))));
        continue;
      }
      results.push_back(tensorOf(sumPartials(partials[partialIndex(k)],
                                             captures[k]),
                                 grad.getType()));
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
          loop(qt.jStart, qt.jEnd, kCols, [&](Value j0) {
            Value tile = arith::DivUIOp::create(b, j0, idx(kCols));
            storeTile(
                tileProduct(args[0], {bi, h, ib}, args[1], bi, qt.g, tile),
                sBuf);
            storeTile(
                tileProduct(args[3], {bi, h, ib}, args[2], bi, qt.g, tile),
                dpBuf);
            Value whole = tileIsWhole(qt.limit, qt.i0, j0, /*existsOnly=*/true);
            forRows(qt.i0, [&](Value r, Value i) {
              RowRange range = rowRange(qt.limit, i, /*existsOnly=*/true);
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
      Value sum = vector::ReductionOp::create(b, vector::CombiningKind::ADD,
                                              acc, Value(),
                                              arith::FastMathFlags::reassoc);
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
    Value whole = tileIsWhole(limit, i0, j0, /*existsOnly=*/true);
    forRows(i0, [&](Value r, Value i) {
      RowRange range = rowRange(limit, i, /*existsOnly=*/true);
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

  /// The query rows [first, end) that can see key tile t (keys from j0 on)
  /// under causal and window masks: i >= j0 (first a multiple of rows), and
  /// i < j0 + 32 + W - 1 with a window.
  std::pair<Value, Value> rowsSeeing(Value jt) {
    Value first = idx(0), end = idx(Sq);
    if (causal || window)
      first = arith::MulIOp::create(b, arith::DivUIOp::create(b, jt, idx(rows)),
                                    idx(rows));
    if (window)
      end = arith::MinUIOp::create(
          b, end, arith::AddIOp::create(b, jt, idx(kCols + *window - 1)));
    return {first, end};
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
    Value limit = keyLimit(lengths, bi);
    // Keys from `seen` on are seen by no row (their tiles are skipped).
    Value seen = arith::MinUIOp::create(b, idx(Skv),
                                        arith::MaxSIOp::create(b, limit, j0));
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
            if (causal)
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
        Value index = uniform ? indices[d] : broadcastToLanes(b, loc, indices[d]);
        Value step = uniform ? idx(stride) : broadcastToLanes(b, loc, idx(stride));
        linear = arith::AddIOp::create(
            b, linear, arith::MulIOp::create(b, index, step));
        stride *= shape[d];
      }
      Value partial = partials[partialIndex(read.capture)];
      auto add = [&](Value at, Value value) {
        Value old = memref::LoadOp::create(b, partial, ValueRange{task, at});
        memref::StoreOp::create(b, arith::AddFOp::create(b, old, value),
                                partial, ValueRange{task, at});
      };
      if (uniform) {
        add(linear, vector::ReductionOp::create(
                        b, vector::CombiningKind::ADD, adjoint, Value(),
                        arith::FastMathFlags::reassoc));
        continue;
      }
      // Lanes one at a time (several may hit one element); a masked lane
      // adds 0 at a clamped, in-bounds offset.
      Value last = broadcastToLanes(b, loc, idx(stride - 1));
      linear = arith::MinSIOp::create(
          b, arith::MaxSIOp::create(b, linear, broadcastToLanes(b, loc, idx(0))),
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
    ScoreModAdjoints adjoints = buildScoreModAdjoints(
        inner, b.getLoc(), scoreMod,
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

bool canLowerToFlashCpu(attn::AttentionOp op) {
  return isFloatTensor(op.getQuery()) && canWidenRegion(op.getScoreMod()) &&
         canWidenRegion(op.getMaskMod()) &&
         shapeOf(op.getValue())[3] % KernelBuilder::kLanes == 0;
}

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
         q[3] % KernelBuilder::kLanes == 0 &&
         shapeOf(op.getValue())[3] % KernelBuilder::kLanes == 0;
}

std::pair<Value, Value> buildFlashAttentionCpu(OpBuilder &builder,
                                               attn::AttentionOp op,
                                               attn::CpuPlanAttr plan,
                                               int64_t vectorBits) {
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  return FlashForward(b, op, plan, vectorBits).build();
}

SmallVector<Value> buildFlashAttentionGradCpu(OpBuilder &builder,
                                              attn::AttentionGradOp op,
                                              attn::CpuPlanAttr plan,
                                              int64_t vectorBits) {
  ImplicitLocOpBuilder b(op.getLoc(), builder);
  return FlashBackward(b, op, plan, vectorBits).build();
}

} // namespace attnc
