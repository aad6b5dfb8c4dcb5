// Attributes of the attn dialect: the typed tile plans (AttnAttrs.td).
#ifndef ATTNC_DIALECT_ATTNATTRS_H
#define ATTNC_DIALECT_ATTNATTRS_H

#include "dialect/AttnDialect.h"

#include "mlir/IR/DialectImplementation.h"

#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.h.inc"

namespace attnc::attn {

/// The plan attn-plan-tiles recorded on `op` (null: none).
TilePlanAttrInterface getTilePlan(mlir::Operation *op);
void setTilePlan(mlir::Operation *op, TilePlanAttrInterface plan);

} // namespace attnc::attn

#endif // ATTNC_DIALECT_ATTNATTRS_H
