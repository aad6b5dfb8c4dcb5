// The cells of attn.attention_stats' pooled grid, on every target: cell c
// of `cells` over n elements holds [floor(c n / cells), floor((c + 1) n /
// cells)), so that every cell is non-empty when cells <= n (the verifier's
// rule) and the sizes differ by at most one.
#ifndef ATTNC_CODEGEN_POOLEDCELLS_H
#define ATTNC_CODEGEN_POOLEDCELLS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc {

/// The cell element e (an index) lies in: floor(((e + 1) cells - 1) / n),
/// the last cell whose start is <= e.
inline mlir::Value pooledCellOf(mlir::ImplicitLocOpBuilder &b, mlir::Value e,
                                int64_t n, int64_t cells) {
  using namespace mlir;
  auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value scaled =
      arith::MulIOp::create(b, arith::AddIOp::create(b, e, idx(1)), idx(cells));
  return arith::DivUIOp::create(b, arith::SubIOp::create(b, scaled, idx(1)),
                                idx(n));
}

/// Where cell c (an index) starts: floor(c n / cells).
inline mlir::Value pooledCellStart(mlir::ImplicitLocOpBuilder &b, mlir::Value c,
                                   int64_t n, int64_t cells) {
  using namespace mlir;
  auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  return arith::DivUIOp::create(b, arith::MulIOp::create(b, c, idx(n)),
                                idx(cells));
}

} // namespace attnc

#endif // ATTNC_CODEGEN_POOLEDCELLS_H
