// Operations of the attn dialect.
#ifndef ATTNC_DIALECT_ATTNOPS_H
#define ATTNC_DIALECT_ATTNOPS_H

#include "dialect/AttnDialect.h"
#include "dialect/ShapeUtils.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"

#include <utility>

#define GET_OP_CLASSES
#include "dialect/AttnOps.h.inc"

namespace attnc::attn {

template <typename OpTy>
using CacheGetter = decltype(std::declval<OpTy &>().getCache());
template <typename OpTy>
using PagesGetter = decltype(std::declval<OpTy &>().getPages());
template <typename OpTy>
using VarlenGetter = decltype(std::declval<OpTy &>().getVarlen());

/// Clones each region of `from` into the same region of `to`: the
/// score_mod and mask_mod regions of ops with attention's options (an op
/// and its gradient op, or a companion made from it), which have the same
/// regions in the same order.
void cloneRegions(mlir::Operation *from, mlir::Operation *to);

/// Whether an op with mask options has `cache` (attn.attention,
/// attn.attention_grad and attn.mask take it; for the others, the causal
/// and window masks always start at key 0).
template <typename OpTy> bool isCache(OpTy op) {
  if constexpr (llvm::is_detected<CacheGetter, OpTy>::value)
    return op.getCache();
  return false;
}

/// The block table of a paged KV cache ([B, M] page numbers: attn.attention
/// with `pages`), null for any other op.
template <typename OpTy> mlir::Value pageTableOf(OpTy op) {
  if constexpr (llvm::is_detected<PagesGetter, OpTy>::value)
    return op.getPages();
  return {};
}

/// The cumulative sequence offsets of packed variable-length sequences
/// (`varlen`: attn.mask, attn.attention, attn.attention_grad), null for
/// any other op.
template <typename OpTy> mlir::Value varlenOf(OpTy op) {
  if constexpr (llvm::is_detected<VarlenGetter, OpTy>::value)
    return op.getVarlen();
  return {};
}

/// The keys an op's scores span (Skv for its masks and regions): K's third
/// dimension, or a paged cache's capacity, M pages of P tokens.
template <typename OpTy> int64_t keyCountOf(OpTy op) {
  int64_t skv = shapeOf(op.getKey())[2];
  if (mlir::Value table = pageTableOf(op))
    return shapeOf(table)[1] * skv;
  return skv;
}

} // namespace attnc::attn

#endif // ATTNC_DIALECT_ATTNOPS_H
