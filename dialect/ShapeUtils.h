// Shapes and element types of ranked tensors and memrefs: the one home of
// the small helpers every layer of attnc reads shapes with.
#ifndef ATTNC_DIALECT_SHAPEUTILS_H
#define ATTNC_DIALECT_SHAPEUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace attnc {

/// The shape of a ranked tensor or memref (type or value).
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Type type) {
  return mlir::cast<mlir::ShapedType>(type).getShape();
}
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value value) {
  return shapeOf(value.getType());
}

/// The element type of a ranked tensor or memref.
inline mlir::Type elementTypeOf(mlir::Type type) {
  return mlir::cast<mlir::ShapedType>(type).getElementType();
}
inline mlir::Type elementTypeOf(mlir::Value value) {
  return elementTypeOf(value.getType());
}

/// Whether a tensor (or memref) holds floats: f32, f16 and bf16 tensors
/// have gradients, integer ones (lengths, ids) do not.
inline bool isFloatTensor(mlir::Type type) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(type);
  return shaped && mlir::isa<mlir::FloatType>(shaped.getElementType());
}
inline bool isFloatTensor(mlir::Value value) {
  return isFloatTensor(value.getType());
}

} // namespace attnc

#endif // ATTNC_DIALECT_SHAPEUTILS_H
