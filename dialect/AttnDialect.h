// The attn dialect class.
#ifndef ATTNC_DIALECT_ATTNDIALECT_H
#define ATTNC_DIALECT_ATTNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

// The discardable attribute helpers name the plan interface.
#include "dialect/AttnAttrInterfaces.h.inc"

#include "dialect/AttnDialect.h.inc"

#endif // ATTNC_DIALECT_ATTNDIALECT_H
