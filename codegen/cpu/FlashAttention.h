// The flash-attention CPU kernel of attn.attention: online softmax over key
// tiles, never an Sq x Skv buffer, AVX-512-width vector microkernels.
#ifndef ATTNC_CODEGEN_CPU_FLASHATTENTION_H
#define ATTNC_CODEGEN_CPU_FLASHATTENTION_H

#include "dialect/AttnOps.h"

#include "mlir/IR/Builders.h"

namespace attnc {

struct FlashTileOptions {
  /// Query rows per task (register blocking of the microkernels).
  int64_t rows = 8;
};

/// Whether the flash kernel covers `op`: f32, named masks only (no
/// score_mod or mask_mod region yet), a value head dimension that is a
/// multiple of 16. Other ops keep the unfused lowering.
bool canLowerToFlashCpu(attn::AttentionOp op);

/// Builds the kernel at `b` (before bufferization: inputs go through
/// bufferization.to_buffer, results come back through to_tensor) and
/// returns (O, LSE).
std::pair<mlir::Value, mlir::Value>
buildFlashAttentionCpu(mlir::OpBuilder &b, attn::AttentionOp op,
                       const FlashTileOptions &options);

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_FLASHATTENTION_H
