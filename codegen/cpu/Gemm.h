// attn.projection, attn.merge and their gradients as tiled GEMMs on the
// CPU (the microkernel of the flash kernels' Q K^T), not as scalar loops.
#ifndef ATTNC_CODEGEN_CPU_GEMM_H
#define ATTNC_CODEGEN_CPU_GEMM_H

#include "dialect/AttnAttrs.h"

#include "mlir/IR/PatternMatch.h"

namespace attnc {

/// Whether `op` is a projection, merge or their gradient op (f32, f16 or
/// bf16, computed in f32).
bool canLowerToGemmCpu(mlir::Operation *op);

/// Builds `op` in its place (before bufferization) and replaces it; returns
/// its results: every product runs as C[M, N] = A[M, K] B[K, N] over blocks
/// of plan.rows rows of A on the thread pool, with A's rows packed side by
/// side and B in 32-wide column panels; the operands are copied into these
/// layouts (O(MK + KN), against O(MNK) for the product) and C copied out
/// into the op's layout. Fails, changing nothing, when !canLowerToGemmCpu.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
lowerToGemmCpu(mlir::RewriterBase &rewriter, mlir::Operation *op,
               attn::CpuPlanAttr plan);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_GEMM_H
