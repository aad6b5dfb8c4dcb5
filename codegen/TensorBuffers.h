// How the flash kernels of every target (built before bufferization) read
// their operands and hand back their results: through read-only
// bufferization.to_buffer and restrict, writable to_tensor.
#ifndef ATTNC_CODEGEN_TENSORBUFFERS_H
#define ATTNC_CODEGEN_TENSORBUFFERS_H

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc {

/// The identity-layout buffer of `tensor`, read only (null for null).
inline mlir::Value bufferOf(mlir::ImplicitLocOpBuilder &b, mlir::Value tensor) {
  if (!tensor)
    return nullptr;
  auto type = mlir::cast<mlir::RankedTensorType>(tensor.getType());
  return mlir::bufferization::ToBufferOp::create(
      b, mlir::MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*read_only=*/true);
}

/// The tensor of type `type` a kernel wrote into `memref`.
inline mlir::Value tensorOf(mlir::ImplicitLocOpBuilder &b, mlir::Value memref,
                            mlir::Type type) {
  return mlir::bufferization::ToTensorOp::create(
      b, type, memref, b.getUnitAttr(), b.getUnitAttr());
}

} // namespace attnc

#endif // ATTNC_CODEGEN_TENSORBUFFERS_H
