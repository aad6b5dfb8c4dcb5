// A spec's dynamic batch (see DynamicBatch.h).
#include "codegen/DynamicBatch.h"
#include "dialect/AttnDialect.h"
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AttrTypeSubElements.h"

using namespace mlir;

namespace attnc {

bool isBatchedType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() > 0 && tensor.isDynamicDim(0);
}

int64_t batchSliceBytes(Type type) {
  auto tensor = cast<ShapedType>(type);
  // (Other element types are refused with the kernel's types, later.)
  if (!tensor.getElementType().isIntOrFloat())
    return 0;
  int64_t elements = 1;
  for (int64_t dim : tensor.getShape().drop_front())
    elements *= dim;
  return elements * int64_t(tensor.getElementTypeBitWidth() / 8);
}

namespace {

/// Only the first dimension may be dynamic.
LogicalResult checkDims(Location loc, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return success();
  for (int64_t dim = 1; dim < tensor.getRank(); ++dim)
    if (tensor.isDynamicDim(dim))
      return emitError(loc)
             << "dimension " << dim << " of " << type
             << " is dynamic: only the first dimension (the batch) may be "
                "`?`";
  return success();
}

/// A region's batch index: the first index argument of its block
/// (score_mod: score, b, h, i, j, captures...; mask_mod: b, h, i, j, ...).
Value batchIndexOf(Block &block) {
  for (BlockArgument arg : block.getArguments())
    if (arg.getType().isIndex())
      return arg;
  return Value();
}

/// A kernel runs one batch entry at a time, so a region may use its batch
/// index only to read its entry's row of a batched capture, and such a
/// capture only through that index.
LogicalResult checkRegion(Region &region) {
  if (region.empty())
    return success();
  Block &block = region.front();
  Value b = batchIndexOf(block);
  // (Read through the operands: the module is not verified yet.)
  auto readsOwnEntry = [&](Operation *user) {
    return isa<tensor::ExtractOp>(user) && user->getNumOperands() >= 2 &&
           user->getOperand(1) == b &&
           isBatchedType(user->getOperand(0).getType());
  };
  if (b)
    for (OpOperand &use : b.getUses())
      if (use.getOperandNumber() != 1 || !readsOwnEntry(use.getOwner()))
        return use.getOwner()->emitError()
               << "with a dynamic batch (`?`) the kernel runs one batch "
                  "entry at a time: a region may use its batch index only "
                  "as the first index of a capture whose first dimension is "
                  "the batch";
  for (BlockArgument arg : block.getArguments()) {
    if (!isBatchedType(arg.getType()))
      continue;
    for (OpOperand &use : arg.getUses()) {
      if (use.getOperandNumber() != 0 || !b || !readsOwnEntry(use.getOwner()))
        return use.getOwner()->emitError()
               << "a capture whose first dimension is the dynamic batch "
                  "(`?`) must be read at its batch entry: its first index "
                  "must be the region's batch index";
    }
  }
  return success();
}

/// A function's type, or null where the (not yet verified) op has none.
FunctionType functionTypeOf(func::FuncOp func) {
  auto attr = func->getAttrOfType<TypeAttr>(func.getFunctionTypeAttrName());
  return attr ? dyn_cast<FunctionType>(attr.getValue()) : FunctionType();
}

/// What a per-entry kernel needs of a function with batched tensors: no op
/// reduces over the batch, and the regions read their own entries.
LogicalResult checkBatchedFunction(func::FuncOp func) {
  for (Operation &op : func.getBody().getOps()) {
    if (!llvm::any_of(op.getOperandTypes(), isBatchedType))
      continue;
    // A paged cache's pool has no batch: where two sequences' tables name
    // the same page, entry b would read it before entry b + 1 appends to
    // it, where the spec appends every sequence's rows first.
    if (isa<attn::AppendOp>(op) && op.getNumResults() == 1 &&
        !isBatchedType(op.getResult(0).getType()))
      return op.emitError()
             << "attn.append into a paged cache with a dynamic batch (`?`): "
                "the kernel runs one batch entry at a time, so an entry "
                "would not see what later entries append to pages they "
                "share; give the batch statically";
    for (auto [k, type] : llvm::enumerate(op.getResultTypes()))
      if (isa<RankedTensorType>(type) && !isBatchedType(type))
        return op.emitError()
               << "result " << k << " (" << type
               << ") has no batch dimension: with a dynamic batch (`?`) "
                  "every batch entry is computed on its own, so an op may "
                  "not sum or average over the batch; give the batch "
                  "statically";
    for (Region &region : op.getRegions())
      if (failed(checkRegion(region)))
        return failure();
  }
  return success();
}

} // namespace

FailureOr<bool> specializeBatch(ModuleOp module, int64_t batch) {
  // Every tensor the module holds: what the functions take and return,
  // what ops make, and what regions receive.
  WalkResult dims = module.walk([&](Operation *op) {
    auto check = [&](Location loc, TypeRange types) {
      for (Type type : types)
        if (failed(checkDims(loc, type)))
          return failure();
      return success();
    };
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (failed(checkDims(arg.getLoc(), arg.getType())))
            return WalkResult::interrupt();
    if (auto func = dyn_cast<func::FuncOp>(op))
      if (FunctionType type = functionTypeOf(func))
        if (failed(check(func.getLoc(), type.getInputs())) ||
            failed(check(func.getLoc(), type.getResults())))
          return WalkResult::interrupt();
    if (failed(check(op->getLoc(), op->getResultTypes())))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (dims.wasInterrupted())
    return failure();

  // The marks below are the compiler's: a spec's own would misstate its
  // buffers.
  for (auto func : module.getOps<func::FuncOp>())
    for (StringRef mark :
         {attn::AttnDialect::BatchSlicesAttrHelper::getNameStr(),
          attn::AttnDialect::BatchUnevenAttrHelper::getNameStr()})
      if (func->hasAttr(mark))
        return func.emitError()
               << "'" << mark
               << "' is set by the compiler (a dynamic batch is written "
                  "as `?`)";

  bool any = false;
  for (auto func : module.getOps<func::FuncOp>()) {
    FunctionType type = functionTypeOf(func);
    if (!type || func.isExternal() ||
        (!llvm::any_of(type.getInputs(), isBatchedType) &&
         !llvm::any_of(type.getResults(), isBatchedType)))
      continue;
    any = true;
    if (failed(checkBatchedFunction(func)))
      return failure();
    if (!func.isPublic())
      continue;
    auto name =
        func->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
    if (!llvm::any_of(type.getInputs(), isBatchedType))
      return func.emitError()
             << "@" << (name ? name.getValue() : StringRef("<unnamed>"))
             << " returns tensors of a dynamic batch (`?`) but takes none: "
                "the batch size comes from the inputs";
    SmallVector<int64_t> slices;
    for (TypeRange types :
         {TypeRange(type.getInputs()), TypeRange(type.getResults())})
      for (Type t : types)
        slices.push_back(isBatchedType(t) ? batchSliceBytes(t) : 0);
    func->setAttr(attn::AttnDialect::BatchSlicesAttrHelper::getNameStr(),
                  DenseI64ArrayAttr::get(module.getContext(), slices));
    if (llvm::any_of(type.getInputs(), [](Type t) {
          return isBatchedType(t) &&
                 isa<IntegerType>(cast<ShapedType>(t).getElementType());
        }))
      func->setAttr(attn::AttnDialect::BatchUnevenAttrHelper::getNameStr(),
                    UnitAttr::get(module.getContext()));
  }

  AttrTypeReplacer replacer;
  replacer.addReplacement([&](RankedTensorType type) -> std::optional<Type> {
    if (!isBatchedType(type))
      return std::nullopt;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = batch;
    return type.clone(shape);
  });
  replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/true);
  return any;
}

} // namespace attnc
