// exp as 2^k * p(r) with the scaling by 2^k done by vscalefps.
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

Value buildExpScalef(ImplicitLocOpBuilder &b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto splat = [&](float v) {
    return arith::ConstantOp::create(b, DenseElementsAttr::get(type, v))
        .getResult();
  };
  auto fma = [&](Value a, Value c, Value d) {
    return vector::FMAOp::create(b, a, c, d).getResult();
  };
  // k = round(x log2 e); r = x - k ln 2 in two steps (Cody-Waite).
  Value k = math::RoundEvenOp::create(
      b, arith::MulFOp::create(b, x, splat(1.44269504088896341f)));
  Value r = fma(k, splat(-0.693359375f), x);
  r = fma(k, splat(2.12194440e-4f), r);
  // e^r on [-ln2/2, ln2/2]: a degree-6 polynomial fitted for relative error
  // (2e-9 in exact arithmetic), by Horner's rule in 6 FMAs. Cephes' expf
  // form 1 + r + r^2 P(r) took 8 instructions for the same 1.4-1.5 ulp in
  // f32 (measured against double over [-87, 3]).
  Value er = splat(1.3843596439e-3f);
  for (float c : {8.3741627677e-3f, 4.1668003492e-2f, 1.6666431174e-1f,
                  4.9999994201e-1f, 1.0000000322f, 1.0f})
    er = fma(er, r, splat(c));
  // er * 2^k. MLIR 22 passes the op's operands to
  // llvm.x86.avx512.mask.scalef.ps.512(a, b, src, mask, rounding) in their
  // order, so the one named `src` is the scaled value and `a` the
  // exponent (the tests catch a swap: er * 2^er is far off).
  Value allLanes = arith::ConstantOp::create(
      b, b.getIntegerAttr(b.getIntegerType(type.getNumElements()), -1));
  Value rounding = arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
  Value scaled = x86vector::MaskScaleFOp::create(b, type, er, k, er, allLanes,
                                                 rounding);
  // 0 below ln FLT_MIN: LLVM folds the select into vscalefps' zeroing mask.
  Value tiny = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, x,
                                     splat(-87.3365447f));
  return arith::SelectOp::create(b, tiny, splat(0.0f), scaled);
}

} // namespace attnc
