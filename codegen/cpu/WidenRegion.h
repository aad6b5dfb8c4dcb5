// Evaluating the scalar code of a score_mod or mask_mod region for 16 keys
// at once, inside the flash kernels.
#ifndef ATTNC_CODEGEN_CPU_WIDENREGION_H
#define ATTNC_CODEGEN_CPU_WIDENREGION_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

namespace attnc {

/// Whether widenBlock can evaluate `region` (empty regions qualify): every
/// op is elementwise (arith, math) or a tensor.extract of a captured
/// tensor, with scalar operands and results.
bool canWidenRegion(mlir::Region &region);

/// Whether `region` has a math op that the lowering expands into a
/// polynomial approximation (exp, log, tanh, erf, sin, ...: every math op
/// but fma, the absolute values, copysign, sqrt and the roundings, which
/// are single instructions).
bool hasExpandedMath(mlir::Region &region);

/// Emits the ops of `block` (up to its terminator) at `b` for 16 lanes and
/// returns the terminator's operands. `arguments` binds each block
/// argument: a scalar stands for the same value in every lane (batch, head,
/// query row), a vector<16xT> for one value per lane (score, key index), a
/// memref for a captured tensor. An op whose operands are all scalars stays
/// scalar; any other becomes the same op on vectors (scalars broadcast). A
/// tensor.extract with per-lane indices becomes a gather from the
/// flattened memref, masked by `lanes` (vector<16xi1>: lanes whose key
/// exists) so that padding lanes never read.
llvm::SmallVector<mlir::Value> widenBlock(mlir::OpBuilder &b,
                                          mlir::Location loc,
                                          mlir::Block &block,
                                          mlir::ArrayRef<mlir::Value> arguments,
                                          mlir::Value lanes);

/// The scalar s when `lanes` (a vector<16xindex> from widenBlock) is
/// s + (0, 1, ..., 15): the key index, plus or minus values the same in
/// every lane; else null (building nothing).
mlir::Value consecutiveBase(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value lanes);

/// The offset of indices[0..] in a row-major tensor of `shape` when the
/// last index is consecutive (consecutiveBase) and the others are the same
/// in every lane: then the 16 lanes are the 16 elements from it. Null
/// otherwise.
mlir::Value consecutiveOffset(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::ArrayRef<mlir::Value> indices,
                              llvm::ArrayRef<int64_t> shape);

/// inBounds() where the 16 elements from `linear` lie in [0, size), else
/// otherwise(): the value of `type` either gives (or nothing, for a null
/// type and bodies that return null).
mlir::Value ifConsecutiveInBounds(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value linear, int64_t size,
                                  mlir::Type type,
                                  llvm::function_ref<mlir::Value()> inBounds,
                                  llvm::function_ref<mlir::Value()> otherwise);

/// The 16-lane vector of `value` (a broadcast when it is a scalar).
mlir::Value broadcastToLanes(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value value);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_WIDENREGION_H
