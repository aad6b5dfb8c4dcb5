// The CPU tile planner: how many query rows a register block holds, how
// many a task owns (they share each key block read), how many keys one
// online-softmax step covers, whether the forward multiplies on AMX tiles
// and how many dQ copies the backward splits its key blocks over.
// attn-plan-tiles records the decisions on each op as a typed
// #attn.cpu_plan (dialect/AttnAttrs.td); attn-lower-cpu reads every
// decision from it and never plans itself.
#ifndef ATTNC_PASSES_TILEPLAN_H
#define ATTNC_PASSES_TILEPLAN_H

#include "dialect/AttnAttrs.h"

#include "mlir/IR/Operation.h"

namespace attnc {

/// What a CPU plan depends on in the target.
struct CpuTarget {
  /// Width of the vector registers: 512 (AVX-512), 256 (AVX2), 128.
  int64_t vectorBits = 512;
  /// AMX tiles with bf16 products (amx-tile, amx-bf16), granted by the OS.
  bool amx = false;
  /// AVX-512 BF16 (vdpbf16ps), used where there is no AMX.
  bool dotBf16 = false;
};

/// The plan for an attn.attention, attn.attention_grad, projection or merge
/// (or their gradient ops) on `target`. `rows` > 0 asks for register blocks
/// of that many rows instead of the target's choice (no AMX tiles then).
attn::CpuPlanAttr planCpuTiles(mlir::Operation *op, const CpuTarget &target,
                               int64_t rows = 0);

} // namespace attnc

#endif // ATTNC_PASSES_TILEPLAN_H
