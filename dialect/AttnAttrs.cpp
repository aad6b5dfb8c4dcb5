// The tile plan attributes: verifiers and the plan accessors.
#include "dialect/AttnAttrs.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace attnc::attn;

#include "dialect/AttnAttrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/AttnAttrs.cpp.inc"

void AttnDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/AttnAttrs.cpp.inc"
      >();
}

LogicalResult CpuPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t rows, int64_t queryBlock,
                                  int64_t keyBlock, bool amx, int64_t splits,
                                  bool dotBf16, bool keyTasks) {
  if (rows < 1 || (rows > kMaxRows && !(amx && rows == 2 * kAmxRows)))
    return emitError() << "tile plan rows must be in [1, " << kMaxRows
                       << "], got " << rows;
  if (queryBlock != 0 && (queryBlock < rows || queryBlock % rows ||
                          queryBlock > kMaxQueryTiles * rows))
    return emitError() << "tile plan query_block must be 1 to "
                       << kMaxQueryTiles << " times rows (" << rows << "), got "
                       << queryBlock;
  if (keyBlock != 0 &&
      (keyBlock < kKeyTile || keyBlock > kMaxKeyBlock || keyBlock % kKeyTile))
    return emitError() << "tile plan key_block must be a multiple of "
                       << kKeyTile << " in [" << kKeyTile << ", "
                       << kMaxKeyBlock << "], got " << keyBlock;
  if (amx && ((rows != kAmxRows && rows != 2 * kAmxRows) || keyBlock == 0))
    return emitError()
           << "an AMX tile plan must have rows = " << kAmxRows << " (or "
           << 2 * kAmxRows
           << " on attn.attention and attn.attention_grad) and a key_block, "
              "got rows = "
           << rows << ", key_block = " << keyBlock;
  if (dotBf16 && (amx || rows > kMaxDotRows || keyBlock == 0))
    return emitError() << "a dot_bf16 tile plan must not be an AMX one and "
                          "must have rows <= "
                       << kMaxDotRows << " and a key_block, got rows = " << rows
                       << ", key_block = " << keyBlock;
  if (splits < 1)
    return emitError() << "tile plan splits must be >= 1, got " << splits;
  return success();
}

LogicalResult GpuPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t queryBlock, int64_t keyBlock,
                                  int64_t workgroupSize, int64_t subgroups,
                                  int64_t stages, bool sharedKv) {
  for (auto [name, value] :
       {std::pair<StringRef, int64_t>{"query_block", queryBlock},
        {"key_block", keyBlock},
        {"workgroup_size", workgroupSize},
        {"subgroups", subgroups},
        {"stages", stages}})
    if (value < 1)
      return emitError() << "GPU tile plan " << name << " must be >= 1, got "
                         << value;
  if (workgroupSize % subgroups)
    return emitError() << "GPU tile plan workgroup_size (" << workgroupSize
                       << ") must be a multiple of subgroups (" << subgroups
                       << ")";
  return success();
}

LogicalResult MmaPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t warps, int64_t queryBlock,
                                  int64_t keyBlock, bool wgmma, bool atomicDq) {
  if (warps < 1 || warps > 16)
    return emitError() << "mma plan warps must be in [1, 16], got " << warps;
  for (auto [name, value] :
       {std::pair<StringRef, int64_t>{"query_block", queryBlock},
        {"key_block", keyBlock}})
    if (value < 16 || value % 16 || value > 256)
      return emitError() << "mma plan " << name
                         << " must be a multiple of 16 in [16, 256], got "
                         << value;
  if (wgmma && (warps != 4 || queryBlock != 64))
    return emitError() << "mma plan with wgmma: one warpgroup (warps = 4) "
                          "of 64 query rows";
  return success();
}

TilePlanAttrInterface attnc::attn::getTilePlan(Operation *op) {
  auto *dialect = op->getContext()->getLoadedDialect<AttnDialect>();
  return dialect ? dialect->getTilePlanAttrHelper().getAttr(op)
                 : TilePlanAttrInterface();
}

void attnc::attn::setTilePlan(Operation *op, TilePlanAttrInterface plan) {
  op->getContext()
      ->getOrLoadDialect<AttnDialect>()
      ->getTilePlanAttrHelper()
      .setAttr(op, plan);
}
