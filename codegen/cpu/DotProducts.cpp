// AVX-512 BF16 dot products (vdpbf16ps through x86vector.avx512.dot) and the
// bf16 pair layouts they read, shared by the forward (FlashForwardDot.cpp),
// the backward (FlashBackwardDot.cpp) and, for the layouts, the AMX
// products (FlashForwardAmx.cpp): each instruction adds two products into
// each of 16 f32 lanes, twice the FMA path's products per instruction from
// half its bytes.
#include "codegen/cpu/FlashCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace attnc {

Value FlashCommon::broadcastPair(Value buffer, ValueRange indices) {
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  Value pair =
      vector::LoadOp::create(b, VectorType::get({2}, bf16), buffer, indices);
  Value word = vector::ExtractOp::create(
      b, vector::BitCastOp::create(b, VectorType::get({1}, i32), pair),
      ArrayRef<int64_t>{0});
  return vector::BitCastOp::create(
      b, VectorType::get({2 * kLanes}, bf16),
      vector::BroadcastOp::create(b, VectorType::get({kLanes}, i32), word));
}

SmallVector<Value>
FlashCommon::dotBlock(Value lo, Value hi, ValueRange init, int64_t as,
                      int64_t xs, function_ref<Value(Value, int64_t)> a,
                      function_ref<Value(Value, int64_t)> x) {
  auto loop =
      scf::ForOp::create(b, lo, hi, idx(1), init,
                         [&](OpBuilder &, Location, Value p, ValueRange acc) {
                           SmallVector<Value> xv;
                           for (int64_t w = 0; w < xs; ++w)
                             xv.push_back(x(p, w));
                           SmallVector<Value> next;
                           for (int64_t i = 0; i < as; ++i) {
                             Value ai = a(p, i);
                             for (int64_t w = 0; w < xs; ++w)
                               next.push_back(x86vector::DotBF16Op::create(
                                   b, acc[i * xs + w], ai, xv[w]));
                           }
                           scf::YieldOp::create(b, next);
                         });
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> FlashCommon::dotRowsTimesColumnPairs(
    Value a, function_ref<SmallVector<Value>(int64_t)> rowAt, Value pairs,
    ValueRange prefix, Value t) {
  int64_t width = shapeOf(a).back();
  auto pairType = VectorType::get({2 * kLanes}, b.getBF16Type());
  SmallVector<SmallVector<Value>> rowsAt;
  for (int64_t r = 0; r < rows; ++r)
    rowsAt.push_back(rowAt(r));
  Value t16 = arith::MulIOp::create(b, t, idx(2));
  return dotBlock(
      idx(0), idx(width / 2), SmallVector<Value>(2 * rows, splat(f(0.0f))),
      rows, 2,
      [&](Value p, int64_t r) {
        SmallVector<Value> at(rowsAt[r]);
        at.push_back(arith::MulIOp::create(b, p, idx(2)));
        return broadcastPair(a, at);
      },
      [&](Value p, int64_t w) {
        SmallVector<Value> at(prefix);
        at.append({arith::AddIOp::create(b, t16, idx(w)), p, idx(0)});
        return vector::LoadOp::create(b, pairType, pairs, at);
      });
}

SmallVector<Value>
FlashCommon::dotOverKeyTiles(Value tiles, ValueRange init, int64_t xs,
                             function_ref<Value(Value, Value, int64_t)> a,
                             function_ref<Value(Value, Value, int64_t)> x) {
  auto loop = scf::ForOp::create(
      b, idx(0), tiles, idx(1), init,
      [&](OpBuilder &, Location, Value kt, ValueRange acc) {
        scf::YieldOp::create(
            b, dotBlock(
                   idx(0), idx(kLanes), acc, rows, xs,
                   [&](Value jp, int64_t r) { return a(kt, jp, r); },
                   [&](Value jp, int64_t w) { return x(kt, jp, w); }));
      });
  return SmallVector<Value>(loop.getResults());
}

/// Where the `count` keys from `first` lie in src (each clamped to its
/// last key) and whether each exists (src.exists).
static void keyRows(ImplicitLocOpBuilder &b, const KeySource &src, Value bi,
                    Value g, Value first, int64_t count,
                    SmallVectorImpl<SmallVector<Value>> &rows,
                    SmallVectorImpl<Value> &exists) {
  for (int64_t l = 0; l < count; ++l) {
    Value key =
        arith::AddIOp::create(b, first, arith::ConstantIndexOp::create(b, l));
    rows.push_back(src.rowAt(
        b, bi, g,
        arith::MinUIOp::create(
            b, key, arith::ConstantIndexOp::create(b, src.keys() - 1))));
    exists.push_back(src.exists(b, key));
  }
}

void FlashCommon::pairColumns(const KeySource &src, Value dst, ValueRange at,
                              Value bi, Value g, Value j0, int64_t tiles16,
                              int64_t prefetchAhead) {
  // A pair of columns is one 32-bit word: per 16 keys, 16 x 16 blocks of
  // words loaded as they lie and transposed in registers (transpose16);
  // scalar copies took 6% of a bf16 forward (S = 2048, D = 64, causal).
  int64_t width = shapeOf(src.memref)[3], words = width / 2;
  assert(width % kLanes == 0 && "pairs of a multiple of 16 columns");
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  auto wordsType = VectorType::get({kLanes}, i32);
  Value zeros = arith::ConstantOp::create(b, b.getZeroAttr(wordsType));
  loop(0, tiles16, [&](Value t) {
    SmallVector<SmallVector<Value>> rowAt;
    SmallVector<Value> exists;
    Value first =
        arith::AddIOp::create(b, j0, arith::MulIOp::create(b, t, idx(kLanes)));
    keyRows(b, src, bi, g, first, kLanes, rowAt, exists);
    if (prefetchAhead)
      prefetchKeyRows(src, bi, g,
                      arith::AddIOp::create(b, first, idx(prefetchAhead)),
                      kLanes);
    // Words [w0, w0 + n) of the 16 rows, n = 16 or (a tail) 8.
    auto block = [&](Value w0, int64_t n) {
      SmallVector<Value> rows;
      for (int64_t l = 0; l < kLanes; ++l) {
        Value x = vector::BitCastOp::create(
            b, VectorType::get({n}, i32),
            vector::LoadOp::create(
                b, VectorType::get({2 * n}, bf16), src.memref,
                ValueRange{rowAt[l][0], rowAt[l][1], rowAt[l][2],
                           arith::MulIOp::create(b, w0, idx(2))}));
        if (n < kLanes) {
          SmallVector<int64_t> widen;
          for (int64_t e = 0; e < kLanes; ++e)
            widen.push_back(e < n ? e : n);
          x = vector::ShuffleOp::create(
              b, x,
              arith::ConstantOp::create(
                  b, b.getZeroAttr(VectorType::get({n}, i32))),
              widen);
        }
        rows.push_back(arith::SelectOp::create(b, exists[l], x, zeros));
      }
      SmallVector<Value> columns = transpose16(rows);
      for (int64_t c = 0; c < n; ++c) {
        SmallVector<Value> to(at);
        to.append({t, arith::AddIOp::create(b, w0, idx(c)), idx(0)});
        vector::StoreOp::create(
            b,
            vector::BitCastOp::create(b, VectorType::get({2 * kLanes}, bf16),
                                      columns[c]),
            dst, to);
      }
    };
    int64_t whole = words / kLanes * kLanes;
    if (whole)
      loop(idx(0), idx(whole), kLanes, [&](Value w0) { block(w0, kLanes); });
    if (words % kLanes)
      block(idx(whole), words % kLanes);
  });
}

void FlashCommon::pairKeys(const KeySource &src, Value dst, ValueRange at,
                           Value bi, Value g, Value j0, int64_t tiles32,
                           int64_t prefetchAhead) {
  // Two key rows interleaved, 16 columns at a time.
  int64_t width = shapeOf(src.memref)[3];
  assert(width % kLanes == 0 && "pairs of keys of a multiple of 16 columns");
  auto half = VectorType::get({kLanes}, b.getBF16Type());
  Value zeros = arith::ConstantOp::create(b, b.getZeroAttr(half));
  loop(0, tiles32 * kLanes, [&](Value n) {
    Value t = arith::DivUIOp::create(b, n, idx(kLanes));
    Value jp = arith::RemUIOp::create(b, n, idx(kLanes));
    SmallVector<SmallVector<Value>> rowAt;
    SmallVector<Value> exists;
    Value first =
        arith::AddIOp::create(b, j0, arith::MulIOp::create(b, n, idx(2)));
    keyRows(b, src, bi, g, first, 2, rowAt, exists);
    if (prefetchAhead)
      prefetchKeyRows(src, bi, g,
                      arith::AddIOp::create(b, first, idx(prefetchAhead)), 2);
    loop(idx(0), idx(width), kLanes, [&](Value c) {
      Value pair[2];
      for (int64_t e = 0; e < 2; ++e)
        pair[e] = arith::SelectOp::create(
            b, exists[e],
            vector::LoadOp::create(
                b, half, src.memref,
                ValueRange{rowAt[e][0], rowAt[e][1], rowAt[e][2], c}),
            zeros);
      SmallVector<Value> to(at);
      to.append({t, jp, arith::MulIOp::create(b, c, idx(2))});
      vector::StoreOp::create(
          b, vector::InterleaveOp::create(b, pair[0], pair[1]), dst, to);
    });
  });
}

} // namespace attnc
