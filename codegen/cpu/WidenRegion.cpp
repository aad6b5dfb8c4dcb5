// Score_mod and mask_mod regions on 16 lanes (see WidenRegion.h).
//
// Written by hand: upstream's vectorizers work on loops (affine, linalg),
// while these regions are straight-line scalar code whose arguments are a
// mix of per-lane and per-row values; elementwise ops widen one for one.
#include "codegen/cpu/WidenRegion.h"

#include "codegen/cpu/Lanes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

namespace attnc {

static bool isLanes(Value v) { return isa<VectorType>(v.getType()); }

bool canWidenRegion(Region &region) {
  if (region.empty())
    return true;
  for (Operation &op : region.front().without_terminator()) {
    if (op.getNumRegions() != 0)
      return false;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      if (!isa<BlockArgument>(extract.getTensor()))
        return false;
      continue;
    }
    auto scalar = [](Type t) { return t.isIntOrIndexOrFloat(); };
    if (!llvm::all_of(op.getOperandTypes(), scalar) ||
        !llvm::all_of(op.getResultTypes(), scalar))
      return false;
    if (op.getNumOperands() != 0 &&
        !op.hasTrait<OpTrait::Elementwise>())
      return false;
  }
  return true;
}

Value broadcastToLanes(OpBuilder &b, Location loc, Value value) {
  if (isLanes(value))
    return value;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({kLanes}, value.getType()), value);
}

/// capture[indices] for per-lane indices: a masked gather from the memref
/// flattened to one dimension (captures are contiguous, identity layout).
static Value gather(OpBuilder &b, Location loc, Value memref,
                    ArrayRef<Value> indices, Value lanes) {
  auto type = cast<MemRefType>(memref.getType());
  Value flat = memref;
  if (type.getRank() > 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d)
      all.push_back(d);
    flat = memref::CollapseShapeOp::create(b, loc, memref,
                                           ArrayRef<ReassociationIndices>{all});
  }
  // linear = sum_d index_d * stride_d, per lane.
  Value linear;
  int64_t stride = 1;
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    Value term = broadcastToLanes(b, loc, indices[d]);
    if (stride != 1)
      term = arith::MulIOp::create(
          b, loc, term,
          broadcastToLanes(b, loc, arith::ConstantIndexOp::create(b, loc, stride)));
    linear = linear ? arith::AddIOp::create(b, loc, linear, term).getResult()
                    : term;
    stride *= type.getShape()[d];
  }
  auto result = VectorType::get({kLanes}, type.getElementType());
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(result));
  // A lane's index may be garbage where its key does not exist: clamp it
  // too, so that even the address computation stays in the buffer.
  Value last = broadcastToLanes(
      b, loc, arith::ConstantIndexOp::create(b, loc, type.getNumElements() - 1));
  Value zeroIndex =
      broadcastToLanes(b, loc, arith::ConstantIndexOp::create(b, loc, 0));
  linear = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, linear, zeroIndex), last);
  return vector::GatherOp::create(b, loc, result, flat,
                                  ValueRange{arith::ConstantIndexOp::create(b, loc, 0)},
                                  linear, lanes, zero);
}

SmallVector<Value> widenBlock(OpBuilder &b, Location loc, Block &block,
                              ArrayRef<Value> arguments, Value lanes) {
  IRMapping map;
  for (auto [arg, value] : llvm::zip(block.getArguments(), arguments))
    map.map(arg, value);
  for (Operation &op : block.without_terminator()) {
    SmallVector<Value> operands;
    for (Value operand : op.getOperands())
      operands.push_back(map.lookup(operand));
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      Value memref = operands.front();
      ArrayRef<Value> indices = ArrayRef<Value>(operands).drop_front();
      Value result =
          llvm::any_of(indices, isLanes)
              ? gather(b, loc, memref, indices, lanes)
              : memref::LoadOp::create(b, loc, memref, indices).getResult();
      map.map(extract.getResult(), result);
      continue;
    }
    if (!llvm::any_of(operands, isLanes)) {
      b.clone(op, map);
      continue;
    }
    OperationState state(op.getLoc(), op.getName());
    for (Value operand : operands)
      state.operands.push_back(broadcastToLanes(b, loc, operand));
    // Integer division traps on a zero divisor: lanes outside `lanes` (keys
    // past the end, whose values the region never meant to see) divide by
    // 1 instead.
    if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
            arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp>(op) &&
        lanes && isLanes(operands[1])) {
      Value one = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              cast<ShapedType>(state.operands[1].getType()),
              ArrayRef<Attribute>{
                  b.getIntegerAttr(getElementTypeOrSelf(operands[1]), 1)}));
      state.operands[1] =
          arith::SelectOp::create(b, loc, lanes, state.operands[1], one);
    }
    for (Type type : op.getResultTypes())
      state.types.push_back(VectorType::get({kLanes}, type));
    state.propertiesAttr = op.getPropertiesAsAttribute();
    state.addAttributes(llvm::to_vector(op.getDiscardableAttrs()));
    Operation *wide = b.create(state);
    map.map(op.getResults(), wide->getResults());
  }
  SmallVector<Value> results;
  for (Value value : block.getTerminator()->getOperands())
    results.push_back(map.lookup(value));
  return results;
}

} // namespace attnc
