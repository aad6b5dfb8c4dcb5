// exp (and 2^t) as 2^k * p(r) with the scaling by 2^k done by vscalefps.
//
// Upstream's polynomial approximation (used on other targets) clamps x and
// k and builds 2^k from integer exponent bits: 22 instructions per vector,
// a quarter of the forward's softmax. vscalefps scales by 2^k for any k,
// so neither clamp nor the exponent arithmetic is needed, and the lanes
// below the smallest normal float (x = -inf included, where r = inf - inf
// is NaN) are zeroed by the same instruction's mask. No upstream lowering
// emits it, hence this file.
#include "codegen/cpu/FastExp.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace attnc {

namespace {

Value splatOf(ImplicitLocOpBuilder &b, VectorType type, float v) {
  return arith::ConstantOp::create(b, DenseElementsAttr::get(type, v));
}

Value fma(ImplicitLocOpBuilder &b, Value a, Value c, Value d) {
  return vector::FMAOp::create(b, a, c, d);
}

/// p * 2^k, 0 where x < `below` (x = -inf, where p is NaN, included).
Value scaleBy2ToThe(ImplicitLocOpBuilder &b, Value p, Value k, Value x,
                    float below) {
  auto type = cast<VectorType>(x.getType());
  // MLIR 22 passes the op's operands to
  // llvm.x86.avx512.mask.scalef.ps.512(a, b, src, mask, rounding) in their
  // order, so the one named `src` is the scaled value and `a` the
  // exponent (the tests catch a swap: p * 2^p is far off).
  Value allLanes = arith::ConstantOp::create(
      b, b.getIntegerAttr(b.getIntegerType(type.getNumElements()), -1));
  Value rounding = arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
  Value scaled =
      x86vector::MaskScaleFOp::create(b, type, p, k, p, allLanes, rounding);
  // LLVM folds the select into vscalefps' zeroing mask.
  Value tiny = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x,
                                     splatOf(b, type, below));
  return arith::SelectOp::create(b, tiny, splatOf(b, type, 0.0f), scaled);
}

} // namespace

Value buildExpScalef(ImplicitLocOpBuilder &b, Value x) {
  auto type = cast<VectorType>(x.getType());
  // k = round(x log2 e); r = x - k ln 2 in two steps (Cody-Waite).
  Value k = math::RoundEvenOp::create(
      b, arith::MulFOp::create(b, x, splatOf(b, type, 1.44269504088896341f)));
  Value r = fma(b, k, splatOf(b, type, -0.693359375f), x);
  r = fma(b, k, splatOf(b, type, 2.12194440e-4f), r);
  // e^r on [-ln2/2, ln2/2]: a degree-6 polynomial fitted for relative error
  // (2e-9 in exact arithmetic), by Horner's rule in 6 FMAs. Cephes' expf
  // form 1 + r + r^2 P(r) took 8 instructions for the same 1.4-1.5 ulp in
  // f32 (measured against double over [-87, 3]).
  Value er = splatOf(b, type, 1.3843596439e-3f);
  for (float c : {8.3741627677e-3f, 4.1668003492e-2f, 1.6666431174e-1f,
                  4.9999994201e-1f, 1.0000000322f, 1.0f})
    er = fma(b, er, r, splatOf(b, type, c));
  // er * 2^k, 0 below ln FLT_MIN.
  return scaleBy2ToThe(b, er, k, x, -87.3365447f);
}

Value buildExp2ScalefForBf16(ImplicitLocOpBuilder &b, Value t) {
  auto type = cast<VectorType>(t.getType());
  // k = round(t), r = t - k exactly: no Cody-Waite steps in base 2.
  Value k = math::RoundEvenOp::create(b, t);
  Value r = arith::SubFOp::create(b, t, k);
  // 2^r on [-1/2, 1/2]: degree 4, Chebyshev-fitted (3.5e-6 relative in f32
  // Horner against exact, where degree 3 gives 1e-4 and bf16's rounding
  // 2e-3).
  Value p = splatOf(b, type, 9.66636836528778e-3f);
  for (float c : {5.5921975523233414e-2f, 2.402234971523285e-1f,
                  6.931210160255432e-1f, 1.0f})
    p = fma(b, p, r, splatOf(b, type, c));
  return scaleBy2ToThe(b, p, k, t, -126.0f);
}

} // namespace attnc
