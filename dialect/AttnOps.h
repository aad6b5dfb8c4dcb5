// Operations of the attn dialect.
#ifndef ATTNC_DIALECT_ATTNOPS_H
#define ATTNC_DIALECT_ATTNOPS_H

#include "dialect/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/AttnOps.h.inc"

#endif // ATTNC_DIALECT_ATTNOPS_H
