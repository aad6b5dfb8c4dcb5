// Building blocks of the flash-attention CPU kernels (see KernelBuilder.h).
#include "codegen/cpu/KernelBuilder.h"

#include "codegen/TensorBuffers.h"
#include "dialect/ShapeUtils.h"

#include "dialect/AttnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace attnc {

KernelBuilder::KernelBuilder(ImplicitLocOpBuilder &b, int64_t rows)
    : b(b), rows(rows), f32(b.getF32Type()),
      vec(VectorType::get({kLanes}, b.getF32Type())) {}

Value KernelBuilder::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value KernelBuilder::bufferOf(Value tensor) {
  return attnc::bufferOf(b, tensor);
}

Value KernelBuilder::tensorOf(Value memref, Type type) {
  return attnc::tensorOf(b, memref, type);
}

Value KernelBuilder::alloc(ArrayRef<int64_t> shape, Type element) {
  return memref::AllocOp::create(
      b, MemRefType::get(shape, element ? element : f32),
      b.getI64IntegerAttr(64));
}

Value KernelBuilder::scratchBuffer(ArrayRef<int64_t> shape, Type element) {
  return memref::AllocOp::create(
      b, MemRefType::get(shape, element ? element : f32),
      b.getI64IntegerAttr(64));
}

Value KernelBuilder::f(float v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value KernelBuilder::splat(Value scalar) {
  return vector::BroadcastOp::create(
      b, VectorType::get({kLanes}, scalar.getType()), scalar);
}

// select(a > c, a, c) rather than arith.maxnumf or a maxnumf reduction:
// LLVM lowers this pattern to one vmaxps/vmaxss (x86 max returns c when
// either is NaN, and a NaN score still reaches the sum through exp), while
// maxnum needs a NaN fix-up per step and llvm.vector.reduce.fmax without
// nnan a serial chain of 15 scalar steps (about 45 instructions per row,
// seen in the forward kernel's assembly).
Value KernelBuilder::maxOf(Value a, Value c) {
  return arith::SelectOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, a, c), a, c);
}

Value KernelBuilder::maxOfLanes(Value v) {
  // Halves down to one lane: 512 -> 256 -> 128-bit extracts, then shuffles.
  for (int64_t n = cast<VectorType>(v.getType()).getNumElements(); n > 1;
       n /= 2) {
    Value lo = vector::ExtractStridedSliceOp::create(b, v, {0}, {n / 2}, {1});
    Value hi =
        vector::ExtractStridedSliceOp::create(b, v, {n / 2}, {n / 2}, {1});
    v = maxOf(lo, hi);
  }
  return vector::ExtractOp::create(b, v, 0);
}

Value KernelBuilder::loadF32(Value memref, ValueRange indices) {
  Value x = memref::LoadOp::create(b, memref, indices);
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, f32, x);
}

Value KernelBuilder::loadVectorF32(Value memref, ValueRange indices) {
  Type element = elementTypeOf(memref);
  Value x = vector::LoadOp::create(b, VectorType::get({kLanes}, element),
                                   memref, indices);
  if (element.isF32())
    return x;
  return arith::ExtFOp::create(b, vec, x);
}

void KernelBuilder::storeVector(Value value, Value memref,
                                ValueRange indices) {
  Type element = elementTypeOf(memref);
  if (!element.isF32())
    value = arith::TruncFOp::create(b, VectorType::get({kLanes}, element),
                                    value);
  vector::StoreOp::create(b, value, memref, indices);
}

void KernelBuilder::storeScalar(Value value, Value memref,
                                ValueRange indices) {
  Type element = elementTypeOf(memref);
  if (!element.isF32())
    value = arith::TruncFOp::create(b, element, value);
  memref::StoreOp::create(b, value, memref, indices);
}

void KernelBuilder::loop(int64_t lo, int64_t hi,
                         function_ref<void(Value)> body) {
  loop(idx(lo), idx(hi), 1, body);
}

void KernelBuilder::ifThen(Value cond, function_ref<void()> body) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  body();
}

scf::ForOp KernelBuilder::loop(Value lo, Value hi, int64_t step,
                               function_ref<void(Value)> body) {
  auto forOp = scf::ForOp::create(b, lo, hi, idx(step));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forOp.getBody());
  body(forOp.getInductionVar());
  return forOp;
}

void KernelBuilder::copyLoop(int64_t lo, int64_t hi,
                             function_ref<void(Value)> body) {
  scf::ForOp forOp = loop(idx(lo), idx(hi), 1, body);
  // SCF-to-CF puts LLVM-dialect attributes of the loop on its latch branch,
  // where `loop_annotation` becomes the llvm.br's loop metadata.
  MLIRContext *context = b.getContext();
  auto noVectorize = LLVM::LoopVectorizeAttr::get(context, b.getBoolAttr(true),
                                                  {}, {}, {}, {}, {}, {});
  forOp->setAttr("loop_annotation",
                 LLVM::LoopAnnotationAttr::get(context, {}, noVectorize, {}, {},
                                               {}, {}, {}, {}, {}, {}, {}, {},
                                               {}, {}, {}));
}

SmallVector<Value> KernelBuilder::unroll(scf::ForOp loop, unsigned factor) {
  // Unrolling may replace the loop (a single iteration is promoted, a
  // remainder goes to an epilogue): hold the results through a placeholder
  // whose operands follow the replacements.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(loop);
  auto hold = UnrealizedConversionCastOp::create(
      b, loop.getResultTypes(), loop.getResults());
  (void)loopUnrollByFactor(loop, factor);
  SmallVector<Value> results(hold.getOperands());
  hold.erase();
  return results;
}

void KernelBuilder::packPanels(Value dst, ValueRange prefix, int64_t length,
                               function_ref<Value(Value, Value)> load,
                               Value panel) {
  ArrayRef<int64_t> d = shapeOf(dst);
  int64_t width = d[d.size() - 2], padded = d[d.size() - 3] * kCols;
  Value first = idx(0), end = idx(padded);
  if (panel) {
    first = arith::MulIOp::create(b, panel, idx(kCols));
    end = arith::AddIOp::create(b, first, idx(kCols));
  }
  loop(first, end, 1, [&](Value n) {
    Value inside =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, n, idx(length));
    Value nc = arith::MinUIOp::create(b, n, idx(length - 1));
    SmallVector<Value> at(prefix);
    at.push_back(arith::DivUIOp::create(b, n, idx(kCols)));
    Value lane = arith::RemUIOp::create(b, n, idx(kCols));
    copyLoop(0, width, [&](Value k) {
      Value x = load(k, nc);
      if (!x.getType().isF32())
        x = arith::ExtFOp::create(b, f32, x);
      SmallVector<Value> indices(at);
      indices.append({k, lane});
      memref::StoreOp::create(b, arith::SelectOp::create(b, inside, x, f(0.0f)),
                              dst, indices);
    });
  });
}

SmallVector<Value> KernelBuilder::transpose16(ArrayRef<Value> rows) {
  // Written out because MLIR 22's vector.transpose of 16 x 16 met the
  // canonicalizer's extract folding before any shuffle lowering and
  // became 256 element moves. Block-recursive: at stride k, rows i and
  // i + k (i & k == 0) swap their off-diagonal k x k blocks, which makes
  // 4 stages of 16 two-source shuffles (unpack-style, one instruction
  // each on AVX-512).
  SmallVector<Value> r(rows);
  for (int64_t k = kLanes / 2; k >= 1; k /= 2) {
    SmallVector<int64_t> lo, hi;
    for (int64_t e = 0; e < kLanes; ++e) {
      lo.push_back(e & k ? kLanes + e - k : e);
      hi.push_back(e & k ? kLanes + e : e + k);
    }
    for (int64_t i = 0; i < kLanes; ++i) {
      if (i & k)
        continue;
      Value a = r[i], c = r[i + k];
      r[i] = vector::ShuffleOp::create(b, a, c, lo);
      r[i + k] = vector::ShuffleOp::create(b, a, c, hi);
    }
  }
  return r;
}

Value KernelBuilder::laneSums16(ArrayRef<Value> vs) {
  assert(vs.size() == size_t(kLanes) && "16 vectors");
  // At stage k the vectors hold groups of 2k lanes, each a part of one
  // input's sum; a pair (a, c) becomes groups of k lanes, a's then c's:
  // the first halves of their groups plus the second halves.
  SmallVector<Value> v(vs);
  for (int64_t k = kLanes / 2; k >= 1; k /= 2) {
    SmallVector<int64_t> lo, hi;
    int64_t perSource = kLanes / (2 * k);
    for (int64_t group = 0; group < kLanes / k; ++group) {
      int64_t from = group < perSource ? 0 : kLanes,
              source = (group % perSource) * 2 * k;
      for (int64_t t = 0; t < k; ++t) {
        lo.push_back(from + source + t);
        hi.push_back(from + source + k + t);
      }
    }
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2)
      next.push_back(arith::AddFOp::create(
          b, vector::ShuffleOp::create(b, v[i], v[i + 1], lo),
          vector::ShuffleOp::create(b, v[i], v[i + 1], hi)));
    v = next;
  }
  return v.front();
}

int64_t KeySource::keys() const {
  ArrayRef<int64_t> s = shapeOf(memref);
  return table ? shapeOf(table)[1] * s[2] : s[2];
}

SmallVector<Value> KeySource::rowAt(ImplicitLocOpBuilder &b, Value bi, Value g,
                                    Value key) const {
  if (!table)
    return {bi, g, key};
  ArrayRef<int64_t> s = shapeOf(memref);
  auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value entry = memref::LoadOp::create(
      b, table, ValueRange{bi, arith::DivUIOp::create(b, key, idx(s[2]))});
  Value page = arith::IndexCastOp::create(b, b.getIndexType(), entry);
  page = arith::SelectOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, page, idx(s[0])),
      page, idx(0));
  return {page, g, arith::RemUIOp::create(b, key, idx(s[2]))};
}

Value KeySource::exists(ImplicitLocOpBuilder &b, Value key) const {
  Value inside =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, key,
                            arith::ConstantIndexOp::create(b, keys()));
  if (!limit)
    return inside;
  return arith::AndIOp::create(
      b, inside,
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, key, limit));
}

Value KeySource::offsetOf(ImplicitLocOpBuilder &b, Value bi, Value g,
                          Value key) const {
  ArrayRef<int64_t> s = shapeOf(memref);
  SmallVector<Value> at = rowAt(b, bi, g, key);
  auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value row = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b,
          arith::AddIOp::create(b, arith::MulIOp::create(b, at[0], idx(s[1])),
                                at[1]),
          idx(s[2])),
      at[2]);
  return arith::MulIOp::create(b, row, idx(s[3]));
}

void KernelBuilder::transposeTiles(const KeySource &src, Value dst, Value bi,
                                   Value g, Value tile) {
  // Each 16-key half of a tile's row d is one vector store rather than 16
  // scalar ones 128 bytes apart (with scalar copies the transposes took
  // 3.8% of a causal forward, S = 2048, D = 64, perf, ~6 cycles per
  // element): 16 x 16 blocks of 16 key rows loaded as they lie and
  // transposed in registers (transpose16; gathers, which read 16 cache
  // lines per vector, ran a bf16 decode step 1.8x slower), the columns
  // past the last whole block gathered from the 16 rows. Rows past the
  // last key read it again, and are zeroed.
  int64_t length = src.keys(), width = shapeOf(src.memref)[3],
          chunks = width / kLanes;
  Value flat = memref::CollapseShapeOp::create(
      b, src.memref, ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
  SmallVector<Value> prefix = {bi, g};
  if (tile)
    prefix.assign(2, idx(0));
  Type element = cast<MemRefType>(src.memref.getType()).getElementType();
  auto elements = VectorType::get({kLanes}, element);
  auto store = [&](Value x, Value p, Value c, int64_t w) {
    if (!element.isF32())
      x = arith::ExtFOp::create(b, vec, x);
    SmallVector<Value> at(prefix);
    at.append({p, c, idx(w * kLanes)});
    vector::StoreOp::create(b, x, dst, at);
  };
  // The 16 keys from j: row l's offset in `flat` and whether it exists.
  auto keyRows = [&](Value j, SmallVectorImpl<Value> &base,
                     SmallVectorImpl<Value> &exists) {
    for (int64_t l = 0; l < kLanes; ++l) {
      Value key = arith::AddIOp::create(b, j, idx(l));
      base.push_back(src.offsetOf(
          b, bi, g, arith::MinSIOp::create(b, key, idx(length - 1))));
      exists.push_back(src.exists(b, key));
    }
  };
  // The tail's gathers: lane l reads row min(j + l, length - 1), at
  // offsets from row j's (a paged cache's rows: each lane's own, `base`).
  auto gatherTail = [&](Value j, ArrayRef<Value> base, Value p, int64_t w) {
    Type i32 = b.getI32Type();
    auto lanesI32 = VectorType::get({kLanes}, i32);
    SmallVector<int32_t> rowNumbers;
    for (int32_t l = 0; l < kLanes; ++l)
      rowNumbers.push_back(l);
    Value laneRows = arith::ConstantOp::create(
        b, DenseElementsAttr::get(lanesI32, ArrayRef<int32_t>(rowNumbers)));
    auto splatI32 = [&](Value index) {
      return vector::BroadcastOp::create(
          b, lanesI32, arith::IndexCastOp::create(b, i32, index));
    };
    Value zeros = arith::ConstantOp::create(b, b.getZeroAttr(elements));
    Value r0 = arith::MinSIOp::create(b, j, idx(length - 1));
    Value end =
        src.limit
            ? arith::MinSIOp::create(b, src.limit, idx(length)).getResult()
            : idx(length);
    Value inside =
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, laneRows,
                              splatI32(arith::SubIOp::create(b, end, j)));
    Value keys = arith::MinSIOp::create(
        b, laneRows, splatI32(arith::SubIOp::create(b, idx(length - 1), r0)));
    Value offsets, start;
    if (src.table) {
      offsets = vector::FromElementsOp::create(
          b, VectorType::get({kLanes}, b.getIndexType()), base);
      start = idx(0);
    } else {
      offsets = arith::MulIOp::create(
          b, keys,
          arith::ConstantOp::create(
              b, DenseElementsAttr::get(lanesI32, int32_t(width))));
      start = src.offsetOf(b, bi, g, r0);
    }
    Value allLanes = arith::ConstantOp::create(
        b,
        DenseElementsAttr::get(VectorType::get({kLanes}, b.getI1Type()), true));
    loop(chunks * kLanes, width, [&](Value c) {
      Value x = vector::GatherOp::create(
          b, elements, flat, ValueRange{arith::AddIOp::create(b, start, c)},
          offsets, allLanes, zeros);
      store(arith::SelectOp::create(b, inside, x, zeros), p, c, w);
    });
  };
  int64_t panels = shapeOf(dst)[2];
  loop(0, panels, [&](Value p) {
    Value panel = tile ? arith::AddIOp::create(b, tile, p).getResult() : p;
    for (int64_t w = 0; w < 2; ++w) {
      Value j = arith::AddIOp::create(
          b, arith::MulIOp::create(b, panel, idx(kCols)), idx(w * kLanes));
      SmallVector<Value> base, exists;
      if (chunks || src.table)
        keyRows(j, base, exists);
      if (chunks) {
        Value zeroRow = arith::ConstantOp::create(b, b.getZeroAttr(elements));
        loop(0, chunks, [&](Value chunk) {
          Value c0 = arith::MulIOp::create(b, chunk, idx(kLanes));
          SmallVector<Value> rows;
          for (int64_t l = 0; l < kLanes; ++l) {
            Value x = vector::LoadOp::create(
                b, elements, flat,
                ValueRange{arith::AddIOp::create(b, base[l], c0)});
            x = arith::SelectOp::create(b, exists[l], x, zeroRow);
            rows.push_back(element.isF32()
                               ? x
                               : arith::ExtFOp::create(b, vec, x).getResult());
          }
          SmallVector<Value> columns = transpose16(rows);
          for (int64_t c = 0; c < kLanes; ++c) {
            SmallVector<Value> at(prefix);
            at.append(
                {p, arith::AddIOp::create(b, c0, idx(c)), idx(w * kLanes)});
            vector::StoreOp::create(b, columns[c], dst, at);
          }
        });
      }
      if (width % kLanes)
        gatherTail(j, base, p, w);
    }
  });
}

void KernelBuilder::packRows(Value a, Value bi, Value h, Value i0,
                             int64_t lastRow, Value packed,
                             std::optional<float> scale) {
  int64_t width = shapeOf(a)[3];
  // A loop per row: one address stream per loop (LLVM's loop strength
  // reduction slows down sharply with many).
  loop(0, rows, [&](Value r) {
    Value row = arith::MinUIOp::create(b, arith::AddIOp::create(b, i0, r),
                                       idx(lastRow));
    copyLoop(0, width, [&](Value d) {
      Value x = loadF32(a, ValueRange{bi, h, row, d});
      if (scale)
        x = arith::MulFOp::create(b, x, f(*scale));
      storeScalar(x, packed, ValueRange{d, r});
    });
  });
}

void KernelBuilder::packTiles(Value a, Value dst, Value bi, Value h,
                              std::optional<float> scale) {
  auto type = cast<MemRefType>(dst.getType());
  ArrayRef<int64_t> d = type.getShape();
  int64_t lastRow = shapeOf(a)[2] - 1;
  loop(0, d[2], [&](Value t) {
    // dst[bi, h, t] as a [D, rows] memref, for packRows.
    SmallVector<OpFoldResult> offsets = {bi, h, t, b.getIndexAttr(0),
                                         b.getIndexAttr(0)},
                              sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                       b.getIndexAttr(1), b.getIndexAttr(d[3]),
                                       b.getIndexAttr(d[4])},
                              strides(5, b.getIndexAttr(1));
    auto tileType = memref::SubViewOp::inferRankReducedResultType(
        {d[3], d[4]}, type, offsets, sizes, strides);
    Value tile = memref::SubViewOp::create(b, cast<MemRefType>(tileType), dst,
                                           offsets, sizes, strides);
    packRows(a, bi, h, arith::MulIOp::create(b, t, idx(rows)), lastRow, tile,
             scale);
  });
}

void KernelBuilder::accumulateTransposed(Value zt, Value c, Value packed,
                                         ValueRange prefix, Value tile0,
                                         Value tiles, Value block, Value row0) {
  // Summed over a whole chunk of tiles rather than tile by tile: with one
  // tile's 8 rows per pass, every d loaded and stored its two sums per 16
  // FMAs, and the backward's two transposed products took 39% of its time
  // against 16% for each tile product of the same FMA count (perf, S=2048,
  // D=64, 1 thread). Summed over 8 tiles, the backward ran 12-15% faster
  // (D=64, D=128 and causal; interleaved A/B). The order of the FMAs into
  // each sum is the same, so are the results.
  int64_t width = shapeOf(zt)[1];
  // The indices of zt's and c's row i, vector w.
  auto rowVector = [&](Value i, int64_t w) {
    return SmallVector<Value, 3>{block, i, idx(w * kLanes)};
  };
  auto dBlock = [&](Value d0, int64_t count) {
    SmallVector<Value> sums;
    for (int64_t i = 0; i < count; ++i)
      for (int64_t w = 0; w < 2; ++w)
        sums.push_back(vector::LoadOp::create(
            b, vec, zt, rowVector(arith::AddIOp::create(b, d0, idx(i)), w)));
    auto tLoop = scf::ForOp::create(b, idx(0), tiles, idx(1), sums);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(tLoop.getBody());
      Value t = tLoop.getInductionVar();
      Value tile = arith::AddIOp::create(b, tile0, t);
      Value base = arith::AddIOp::create(
          b, row0, arith::MulIOp::create(b, t, idx(rows)));
      // The tile's rows as a loop, unrolled by 2 as tileProduct's (1.5%
      // faster than by 1, by 8 no faster). One loop over all the rows
      // (tile and row by division) cost the JIT less work, but the
      // backward ran 8% slower.
      auto rLoop = scf::ForOp::create(b, idx(0), idx(rows), idx(1),
                                      tLoop.getRegionIterArgs());
      {
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPointToStart(rLoop.getBody());
        Value r = rLoop.getInductionVar();
        Value row = arith::AddIOp::create(b, base, r);
        Value cs[2];
        for (int64_t w = 0; w < 2; ++w)
          cs[w] = vector::LoadOp::create(b, vec, c, rowVector(row, w));
        SmallVector<Value> acc(rLoop.getRegionIterArgs());
        for (int64_t i = 0; i < count; ++i) {
          SmallVector<Value> at(prefix);
          at.append({tile, arith::AddIOp::create(b, d0, idx(i)), r});
          Value x = splat(memref::LoadOp::create(b, packed, at));
          for (int64_t w = 0; w < 2; ++w)
            acc[2 * i + w] = vector::FMAOp::create(b, x, cs[w], acc[2 * i + w]);
        }
        scf::YieldOp::create(b, acc);
      }
      scf::YieldOp::create(b, unroll(rLoop, 2));
    }
    for (int64_t i = 0; i < count; ++i)
      for (int64_t w = 0; w < 2; ++w)
        vector::StoreOp::create(
            b, tLoop.getResult(2 * i + w), zt,
            rowVector(arith::AddIOp::create(b, d0, idx(i)), w));
  };
  int64_t whole = width / rows * rows;
  if (whole)
    loop(idx(0), idx(whole), rows, [&](Value d0) { dBlock(d0, rows); });
  if (width % rows)
    dBlock(idx(whole), width % rows);
}

void KernelBuilder::prefetchVectors(Value memref, ValueRange at,
                                    int64_t vectors) {
  for (int64_t w = 0; w < vectors; ++w) {
    SmallVector<Value> indices(at);
    indices.push_back(idx(w * kLanes));
    memref::PrefetchOp::create(b, memref, indices, /*isWrite=*/false,
                               /*localityHint=*/3, /*isDataCache=*/true);
  }
}

void KernelBuilder::prefetchKeyRows(const KeySource &src, Value bi, Value g,
                                    Value first, int64_t count) {
  auto type = cast<MemRefType>(src.memref.getType());
  int64_t width = type.getShape()[3];
  int64_t perLine = 64 * 8 / type.getElementTypeBitWidth();
  for (int64_t l = 0; l < count; ++l) {
    Value key = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, first, idx(l)), idx(src.keys() - 1));
    SmallVector<Value> at = src.rowAt(b, bi, g, key);
    for (int64_t c = 0; c < width; c += perLine) {
      SmallVector<Value> indices(at);
      indices.push_back(idx(c));
      memref::PrefetchOp::create(b, src.memref, indices, /*isWrite=*/false,
                                 /*localityHint=*/3, /*isDataCache=*/true);
    }
  }
}

SmallVector<Value> KernelBuilder::tileProduct(Value packed, ValueRange prefix,
                                              Value xt, Value bi, Value g,
                                              Value tile,
                                              int64_t prefetchAhead) {
  auto shape = shapeOf(packed);
  int64_t width = shape[shape.size() - 2];
  // Xt's tiles' rows one after another, [B, G, tiles * width, 32], for the
  // prefetches.
  Value rowsOfXt, firstAhead;
  if (prefetchAhead) {
    rowsOfXt = memref::CollapseShapeOp::create(
        b, xt, ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}, {4}});
    firstAhead = arith::AddIOp::create(
        b, arith::MulIOp::create(b, tile, idx(width)), idx(prefetchAhead));
  }
  SmallVector<Value> zeros(2 * rows, splat(f(0.0f)));
  auto dLoop = scf::ForOp::create(b, idx(0), idx(width), idx(1), zeros);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(dLoop.getBody());
  Value d = dLoop.getInductionVar();
  Value x0 = vector::LoadOp::create(b, vec, xt, ValueRange{bi, g, tile, d, idx(0)});
  Value x1 =
      vector::LoadOp::create(b, vec, xt, ValueRange{bi, g, tile, d, idx(kLanes)});
  if (prefetchAhead)
    prefetchVectors(rowsOfXt, {bi, g, arith::AddIOp::create(b, firstAhead, d)},
                    2);
  SmallVector<Value> acc(dLoop.getRegionIterArgs());
  for (int64_t r = 0; r < rows; ++r) {
    SmallVector<Value> at(prefix);
    at.append({d, idx(r)});
    Value q = splat(memref::LoadOp::create(b, packed, at));
    acc[2 * r] = vector::FMAOp::create(b, q, x0, acc[2 * r]);
    acc[2 * r + 1] = vector::FMAOp::create(b, q, x1, acc[2 * r + 1]);
  }
  scf::YieldOp::create(b, acc);
  b.setInsertionPointAfter(dLoop);
  // By 2: by 1 ran 1.4% slower, by 4 or 8 no faster (interleaved A/B).
  return unroll(dLoop, 2);
}

func::FuncOp KernelBuilder::outline(func::FuncOp parent, StringRef name,
                                   TypeRange types,
                                   function_ref<void(ArrayRef<Value>)> body) {
  OpBuilder::InsertionGuard guard(b);
  // Made detached, then inserted (before `parent`) by the symbol table,
  // which renames it on a clash. Made in place, it was already in the
  // module when the table was built: where it came before the function of
  // its name, the table took it for that one and left two of one name.
  auto fn = func::FuncOp::create(b.getLoc(), name,
                                 FunctionType::get(b.getContext(), types, {}));
  SymbolTable(parent->getParentOp()).insert(fn, Block::iterator(parent));
  fn.setPrivate();
  Block *block = fn.addEntryBlock();
  b.setInsertionPointToStart(block);
  body(SmallVector<Value>(block->getArguments()));
  func::ReturnOp::create(b);
  return fn;
}

void KernelBuilder::parallelTasks(func::FuncOp parent, StringRef name,
                                  ArrayRef<Value> captured, int64_t tasks,
                                  ScratchFn scratch, TaskFn body) {
  callTasks(outlineTasks(parent, name, ValueRange(captured).getTypes(),
                         scratch, body),
            captured, tasks);
}

void KernelBuilder::sharedParallelTasks(func::FuncOp parent, StringRef name,
                                        ArrayRef<Value> captured, int64_t tasks,
                                        ScratchFn scratch, TaskFn body) {
  auto fn =
      parent->getParentOfType<ModuleOp>().lookupSymbol<func::FuncOp>(name);
  if (!fn)
    fn = outlineTasks(parent, name, ValueRange(captured).getTypes(), scratch,
                      body);
  callTasks(fn, captured, tasks);
}

func::FuncOp KernelBuilder::outlineTasks(func::FuncOp parent, StringRef name,
                                         TypeRange captured, ScratchFn scratch,
                                         TaskFn body) {
  SmallVector<Type> types(captured);
  types.push_back(b.getIndexType());
  types.push_back(b.getIndexType());
  func::FuncOp fn = outline(parent, name, types, [&](ArrayRef<Value> all) {
    ArrayRef<Value> args = all.drop_back(2);
    Value begin = all[all.size() - 2], end = all.back();
    // Scratch belongs in the function, outside the task loop, and on the
    // heap: up to about 0.5 MB (the backward's key blocks), more than a
    // caller's thread may have spare on its stack. Buffer deallocation
    // frees it when the function returns.
    SmallVector<Value> buffers = scratch(args);
    auto forOp = scf::ForOp::create(b, begin, end, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(args, buffers, forOp.getInductionVar());
  });
  fn->setAttr(attn::AttnDialect::ParallelTasksAttrHelper::getNameStr(),
              b.getUnitAttr());
  return fn;
}

void KernelBuilder::callTasks(func::FuncOp fn, ArrayRef<Value> captured,
                              int64_t tasks) {
  SmallVector<Value> operands(captured);
  operands.push_back(idx(0));
  operands.push_back(idx(tasks));
  func::CallOp::create(b, fn, operands);
}

} // namespace attnc
