// exp as 2^k * p(r) with the scaling by 2^k done by vscalefps.
//
// Upstream's polynomial approximation (used on other targets) clamps x and
// k and builds 2^k from integer exponent bits: 22 instructions per vector,
// a quarter of the forward's softmax. vscalefps scales by 2^k for any k,
// underflowing to exactly 0, so neither clamp nor the exponent arithmetic
// is needed; x is only raised to -200 so that x = -inf (masked scores)
// gives k = -289 and 0 rather than inf - inf = NaN. No upstream lowering
// emits it, hence this file.
#include "codegen/cpu/FastExp.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace attnc {

Value buildExpScalef(ImplicitLocOpBuilder &b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto splat = [&](float v) {
    return arith::ConstantOp::create(b, DenseElementsAttr::get(type, v))
        .getResult();
  };
  auto fma = [&](Value a, Value c, Value d) {
    return vector::FMAOp::create(b, a, c, d).getResult();
  };
  // select(x < -200, -200, x): one vmaxps that keeps a NaN x.
  Value low = splat(-200.0f);
  x = arith::SelectOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x, low), low, x);
  // k = round(x log2 e); r = x - k ln 2 in two steps (Cody-Waite).
  Value k = math::RoundEvenOp::create(
      b, arith::MulFOp::create(b, x, splat(1.44269504088896341f)));
  Value r = fma(k, splat(-0.693359375f), x);
  r = fma(k, splat(2.12194440e-4f), r);
  // Cephes expf: e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2].
  Value p = splat(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                  1.6666665459e-1f, 5.0000001201e-1f})
    p = fma(p, r, splat(c));
  Value r2 = arith::MulFOp::create(b, r, r);
  Value er = arith::AddFOp::create(b, fma(p, r2, r), splat(1.0f));
  // er * 2^k. MLIR 22 passes the op's operands to
  // llvm.x86.avx512.mask.scalef.ps.512(a, b, src, mask, rounding) in their
  // order, so the one named `src` is the scaled value and `a` the
  // exponent (the tests catch a swap: er * 2^er is far off).
  Value allLanes = arith::ConstantOp::create(
      b, b.getIntegerAttr(b.getIntegerType(type.getNumElements()), -1));
  Value rounding = arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
  return x86vector::MaskScaleFOp::create(b, type, er, k, er, allLanes,
                                         rounding);
}

} // namespace attnc
