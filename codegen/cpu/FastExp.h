// exp on 16 f32 lanes with AVX-512's vscalefps (see FastExp.cpp).
#ifndef ATTNC_CODEGEN_CPU_FASTEXP_H
#define ATTNC_CODEGEN_CPU_FASTEXP_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc {

/// exp(x) for a vector<16xf32> in 12 instructions, for AVX-512 targets:
/// 0 below ln FLT_MIN (x = -inf too: no denormal results), NaN for NaN,
/// within 1.5 ulp elsewhere.
mlir::Value buildExpScalef(mlir::ImplicitLocOpBuilder &b, mlir::Value x);

/// 2^t for a vector<16xf32> in 8 instructions, within 4e-6 relative: for
/// probabilities rounded to bf16 (8 bits) for their products. 0 below
/// 2^-126 (t = -inf too), NaN for NaN.
mlir::Value buildExp2ScalefForBf16(mlir::ImplicitLocOpBuilder &b,
                                   mlir::Value t);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FASTEXP_H
