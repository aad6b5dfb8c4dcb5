// Registration of the attn dialect.
#include "dialect/AttnDialect.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace attnc::attn;

#include "dialect/AttnDialect.cpp.inc"

namespace {
/// attn ops are pure tensor computations: calls to spec functions can be
/// inlined through them (attn-derive-backward differentiates one body).
struct AttnInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/AttnOps.cpp.inc"
      >();
  registerAttributes();
  addInterfaces<AttnInlinerInterface>();
}

/// A tile plan fits its op: the fused ops take either target's plan with
/// both blocks, GEMMs only a CPU plan of rows; AMX is a forward's choice,
/// dQ splits a backward's.
static LogicalResult verifyTilePlan(Operation *op, NamedAttribute attr) {
  auto plan = dyn_cast<TilePlanAttrInterface>(attr.getValue());
  if (!plan)
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a tile plan (#attn.cpu_plan<...> or "
                              "#attn.gpu_plan<...>), got "
                           << attr.getValue();
  bool fused = isa<AttentionOp, AttentionGradOp, AttentionStatsOp,
                   AttentionStatsGradOp, DistillOp, DistillGradOp>(op);
  bool gemm = isa<ProjectionOp, MergeOp, ProjectionGradOp, MergeGradOp>(op);
  if (!fused && !gemm)
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' is only valid on attn.attention(_grad), "
                              "attn.attention_stats(_grad), "
                              "attn.distill(_grad), projections and merges";
  auto cpu = dyn_cast<CpuPlanAttr>(plan);
  if (!cpu) {
    if (!fused)
      return op->emitError() << "a GPU tile plan is only valid on "
                                "attn.attention(_grad), "
                                "attn.attention_stats(_grad) and "
                                "attn.distill(_grad)";
    return success();
  }
  if (fused && (!cpu.getQueryBlock() || !cpu.getKeyBlock()))
    return op->emitError() << "the tile plan of '" << op->getName()
                           << "' must give query_block and key_block, got "
                           << cpu;
  if (cpu.getAmx() && !isa<AttentionOp, AttentionGradOp, AttentionStatsOp>(op))
    return op->emitError() << "only attn.attention, attn.attention_grad and "
                              "attn.attention_stats take an AMX tile plan";
  auto grad = dyn_cast<AttentionGradOp>(op);
  if (cpu.getAmx() && (grad || isa<AttentionStatsOp>(op)) &&
      (grad ? 2 : 1) * CpuPlanAttr::kAmxRows != cpu.getRows())
    return op->emitError() << "an AMX tile plan of '" << op->getName()
                           << "' needs rows = "
                           << (grad ? 2 : 1) * CpuPlanAttr::kAmxRows << ", got "
                           << cpu.getRows();
  if (cpu.getDotBf16() && !isa<AttentionOp, AttentionGradOp>(op))
    return op->emitError()
           << "only attn.attention and attn.attention_grad take a dot_bf16 "
              "tile plan";
  if (cpu.getDotBf16() && grad && cpu.getRows() % 2)
    return op->emitError() << "a dot_bf16 tile plan of attn.attention_grad "
                              "needs an even number of rows, got "
                           << cpu.getRows();
  if (cpu.getAmx() || cpu.getDotBf16()) {
    // The bf16 pairs: bf16 operands, D a multiple of 32 (AMX) or 16 and
    // Dv of 16.
    SmallVector<Value> operands = {op->getOperand(0), op->getOperand(1)};
    if (isa<AttentionOp, AttentionGradOp>(op))
      operands.push_back(op->getOperand(2));
    int64_t dMultiple = cpu.getAmx() ? 32 : 16;
    for (auto [n, operand] : llvm::enumerate(operands)) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      // (The AMX backward's dP = dO V^T reduces over Dv: 32 too.)
      int64_t multiple = n == 2 && !(grad && cpu.getAmx()) ? 16 : dMultiple;
      if (!type || !type.getElementType().isBF16() || type.getRank() != 4 ||
          type.getDimSize(3) % multiple)
        return op->emitError()
               << "a" << (cpu.getAmx() ? "n AMX" : " dot_bf16")
               << " tile plan needs bf16 Q, K" << (n == 2 ? " and V" : "")
               << " whose head dimensions are multiples of " << multiple
               << ", got " << operand.getType();
    }
  }
  if (cpu.getSplits() != 1 && !isa<AttentionGradOp, AttentionOp>(op))
    return op->emitError() << "only attn.attention_grad (dQ copies) and "
                              "attn.attention (key ranges) take tile plan "
                              "splits";
  return success();
}

LogicalResult AttnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == TilePlanAttrHelper::getNameStr())
    return verifyTilePlan(op, attr);
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "'" << name << "' must be " << what;
  };
  if (name == UsesAmxAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(attr.getValue()) && isa<ModuleOp>(op),
                  "a unit attribute of a module");
  if (name == ParallelTasksAttrHelper::getNameStr() ||
      name == BatchUnevenAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(attr.getValue()) &&
                      isa<FunctionOpInterface>(op),
                  "a unit attribute of a function");
  if (name == SavedBytesAttrHelper::getNameStr()) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    return expect(bytes && bytes.getType().isInteger(64) &&
                      bytes.getValue().isNonNegative() &&
                      isa<FunctionOpInterface>(op),
                  "a non-negative i64 of a function");
  }
  if (name == BatchSlicesAttrHelper::getNameStr() ||
      name == BatchSumsAttrHelper::getNameStr()) {
    auto bytes = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    return expect(
        bytes && isa<FunctionOpInterface>(op) &&
            llvm::all_of(bytes.asArrayRef(), [](int64_t n) { return n >= 0; }),
        "an array of non-negative i64 on a function");
  }
  return op->emitError() << "unknown attn attribute '" << name << "'";
}

LogicalResult AttnDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == NondecreasingAttrHelper::getNameStr()) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on a function "
             << "argument";
    return success();
  }
  if (name != MaxValueAttrHelper::getNameStr())
    return op->emitError() << "unknown attn argument attribute '" << name
                           << "'";
  // (The argument's type changes down the pipeline: an integer tensor,
  // its memref, then LLVM's descriptor.)
  auto bound = dyn_cast<IntegerAttr>(attr.getValue());
  if (!bound || !bound.getType().isInteger(64) ||
      bound.getValue().isNegative() || !isa<FunctionOpInterface>(op))
    return op->emitError() << "'" << name
                           << "' must be a non-negative i64 on a function "
                              "argument";
  return success();
}
