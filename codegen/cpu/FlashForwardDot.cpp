// The forward's products as AVX-512 BF16 dot products (vdpbf16ps through
// x86vector.avx512.dot), for CPUs that have them and no AMX (AMD Zen 4 and
// 5): the AMX path's bf16 pairs (K with (d, d + 1) side by side, V with
// (j, j + 1), Q's rows and P in bf16), each instruction adding two products
// into each of 16 f32 lanes, twice the FMA path's products per instruction
// and half its bytes of K and V.
#include "codegen/cpu/FlashForward.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace attnc {

namespace {

/// for (i = lo; i < hi; ++i) carrying `init` (upstream's body builder),
/// `body` giving the values to yield; the final values.
SmallVector<Value>
carry(ImplicitLocOpBuilder &b, Value lo, Value hi, ValueRange init,
      function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(
      b, lo, hi, arith::ConstantIndexOp::create(b, 1), init,
      [&](OpBuilder &, Location, Value i, ValueRange carried) {
        scf::YieldOp::create(b, body(i, carried));
      });
  return SmallVector<Value>(loop.getResults());
}

} // namespace

/// The pair of bf16 at buffer[indices...] (the last index even) in every
/// lane pair of a vector<32xbf16>: a dot product's broadcast operand.
static Value broadcastPair(ImplicitLocOpBuilder &b, Value buffer,
                           ValueRange indices) {
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  Value pair =
      vector::LoadOp::create(b, VectorType::get({2}, bf16), buffer, indices);
  Value word = vector::ExtractOp::create(
      b, vector::BitCastOp::create(b, VectorType::get({1}, i32), pair),
      ArrayRef<int64_t>{0});
  return vector::BitCastOp::create(
      b, VectorType::get({32}, bf16),
      vector::BroadcastOp::create(b, VectorType::get({16}, i32), word));
}

void FlashForward::dotScores(Value qRows, Value t, Value kp, Value bi, Value g,
                             Value tile, Value end, Value pBuf) {
  auto pairs = VectorType::get({2 * kLanes}, bf16);
  Value zeros = splat(f(0.0f));
  loop(0, blockTiles, [&](Value kt) {
    Value tile32 = arith::AddIOp::create(b, tile, kt);
    auto ifOp = scf::IfOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                              arith::MulIOp::create(b, tile32, idx(kCols)),
                              end),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    // The tile's two 16-key halves, rows x 2 accumulators.
    Value t16 = arith::MulIOp::create(b, tile32, idx(2));
    Value t16Next = arith::AddIOp::create(b, t16, idx(1));
    SmallVector<Value> acc = carry(
        b, idx(0), idx(D / 2), SmallVector<Value>(2 * rows, zeros),
        [&](Value dp, ValueRange s) {
          Value k0 = vector::LoadOp::create(b, pairs, kp,
                                            ValueRange{bi, g, t16, dp, idx(0)});
          Value k1 = vector::LoadOp::create(
              b, pairs, kp, ValueRange{bi, g, t16Next, dp, idx(0)});
          Value d = arith::MulIOp::create(b, dp, idx(2));
          SmallVector<Value> next;
          for (int64_t r = 0; r < rows; ++r) {
            Value a = broadcastPair(b, qRows, {t, idx(r), d});
            next.push_back(x86vector::DotBF16Op::create(b, s[2 * r], a, k0));
            next.push_back(
                x86vector::DotBF16Op::create(b, s[2 * r + 1], a, k1));
          }
          return next;
        });
    Value col = arith::MulIOp::create(b, kt, idx(kCols));
    for (int64_t r = 0; r < rows; ++r) {
      vector::StoreOp::create(b, acc[2 * r], pBuf, ValueRange{idx(r), col});
      vector::StoreOp::create(
          b, acc[2 * r + 1], pBuf,
          ValueRange{idx(r), arith::AddIOp::create(b, col, idx(kLanes))});
    }
  });
}

void FlashForward::dotUpdate(ArrayRef<Value> scratch, Value oBuf, Value vp,
                             Value bi, Value g, Value tile, Value end) {
  Value alphaBuf = scratch[4], pPairs = scratch[6];
  auto pairs = VectorType::get({2 * kLanes}, bf16);
  // The 32-key tiles some row sees (P is 0 past them).
  Value keys =
      arith::SubIOp::create(b, end, arith::MulIOp::create(b, tile, idx(kCols)));
  Value used = arith::MinUIOp::create(
      b, idx(blockTiles),
      arith::DivUIOp::create(b, arith::AddIOp::create(b, keys, idx(kCols - 1)),
                             idx(kCols)));
  // Columns 32 at a time (16 for an odd last vector): rows x 2
  // accumulators, O rescaled by alpha first.
  for (int64_t c0 = 0; c0 < Dv; c0 += 2 * kLanes) {
    int64_t vectors = std::min<int64_t>(2, (Dv - c0) / kLanes);
    SmallVector<Value> init;
    for (int64_t r = 0; r < rows; ++r) {
      Value alpha = splat(memref::LoadOp::create(b, alphaBuf, idx(r)));
      for (int64_t v = 0; v < vectors; ++v)
        init.push_back(arith::MulFOp::create(
            b,
            vector::LoadOp::create(b, vec, oBuf,
                                   ValueRange{idx(r), idx(c0 + v * kLanes)}),
            alpha));
    }
    SmallVector<Value> acc =
        carry(b, idx(0), used, init, [&](Value kt, ValueRange s) {
          Value tile32 = arith::AddIOp::create(b, tile, kt);
          Value key0 = arith::MulIOp::create(b, kt, idx(kCols));
          return carry(b, idx(0), idx(kCols / 2), s,
                       [&](Value jp, ValueRange s2) {
                         SmallVector<Value> v;
                         for (int64_t w = 0; w < vectors; ++w)
                           v.push_back(vector::LoadOp::create(
                               b, pairs, vp,
                               ValueRange{bi, g, tile32, jp,
                                          idx(2 * (c0 + w * kLanes))}));
                         Value j = arith::AddIOp::create(
                             b, key0, arith::MulIOp::create(b, jp, idx(2)));
                         SmallVector<Value> next;
                         for (int64_t r = 0; r < rows; ++r) {
                           Value a = broadcastPair(b, pPairs, {idx(r), j});
                           for (int64_t w = 0; w < vectors; ++w)
                             next.push_back(x86vector::DotBF16Op::create(
                                 b, s2[r * vectors + w], a, v[w]));
                         }
                         return next;
                       });
        });
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vectors; ++v)
        vector::StoreOp::create(b, acc[r * vectors + v], oBuf,
                                ValueRange{idx(r), idx(c0 + v * kLanes)});
  }
}

} // namespace attnc
