// The attn dialect class.
#ifndef ATTNC_DIALECT_ATTNDIALECT_H
#define ATTNC_DIALECT_ATTNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "dialect/AttnDialect.h.inc"

#endif // ATTNC_DIALECT_ATTNDIALECT_H
