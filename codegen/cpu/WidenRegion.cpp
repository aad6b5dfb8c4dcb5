// Score_mod and mask_mod regions on 16 lanes (see WidenRegion.h).
//
// Written by hand: upstream's vectorizers work on loops (affine, linalg),
// while these regions are straight-line scalar code whose arguments are a
// mix of per-lane and per-row values; elementwise ops widen one for one.
#include "codegen/cpu/WidenRegion.h"

#include "codegen/cpu/Lanes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
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

bool hasExpandedMath(Region &region) {
  auto expanded = [](Operation *op) {
    return isa_and_nonnull<math::MathDialect>(op->getDialect()) &&
           !isa<math::FmaOp, math::AbsFOp, math::AbsIOp, math::CopySignOp,
                math::SqrtOp, math::RoundOp, math::RoundEvenOp, math::FloorOp,
                math::CeilOp, math::TruncOp>(op);
  };
  return region
      .walk([&](Operation *op) {
        return expanded(op) ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

Value broadcastToLanes(OpBuilder &b, Location loc, Value value) {
  if (isLanes(value))
    return value;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({kLanes}, value.getType()), value);
}

/// How far ahead (elements) a consecutive read prefetches.
static constexpr int64_t kPrefetchElements = 256;

/// The scalar s of a vector.broadcast of s, else null.
static Value uniformScalar(Value v) {
  auto broadcast = v.getDefiningOp<vector::BroadcastOp>();
  return broadcast && !isLanes(broadcast.getSource()) ? broadcast.getSource()
                                                      : Value();
}

/// Whether v is the constant (0, 1, ..., 15).
static bool isIota(Value v) {
  DenseIntElementsAttr values;
  if (!matchPattern(v, m_Constant(&values)) ||
      values.getNumElements() != kLanes)
    return false;
  int64_t lane = 0;
  for (const APInt &value : values.getValues<APInt>())
    if (value.getSExtValue() != lane++)
      return false;
  return true;
}

/// Whether v is s + iota for a scalar s (consecutiveBase's forms).
static bool isConsecutive(Value v) {
  if (isIota(v))
    return true;
  if (auto add = v.getDefiningOp<arith::AddIOp>())
    return (isConsecutive(add.getLhs()) && uniformScalar(add.getRhs())) ||
           (uniformScalar(add.getLhs()) && isConsecutive(add.getRhs()));
  if (auto sub = v.getDefiningOp<arith::SubIOp>())
    return isConsecutive(sub.getLhs()) && uniformScalar(sub.getRhs());
  return false;
}

static Value baseOf(OpBuilder &b, Location loc, Value v) {
  if (isIota(v))
    return arith::ConstantIndexOp::create(b, loc, 0);
  if (auto add = v.getDefiningOp<arith::AddIOp>()) {
    bool left = isConsecutive(add.getLhs()) && uniformScalar(add.getRhs());
    Value lanes = left ? add.getLhs() : add.getRhs();
    Value scalar = uniformScalar(left ? add.getRhs() : add.getLhs());
    return arith::AddIOp::create(b, loc, baseOf(b, loc, lanes), scalar);
  }
  auto sub = v.getDefiningOp<arith::SubIOp>();
  return arith::SubIOp::create(b, loc, baseOf(b, loc, sub.getLhs()),
                               uniformScalar(sub.getRhs()));
}

Value consecutiveBase(OpBuilder &b, Location loc, Value lanes) {
  if (!isLanes(lanes) || !getElementTypeOrSelf(lanes).isIndex() ||
      !isConsecutive(lanes))
    return Value();
  return baseOf(b, loc, lanes);
}

Value consecutiveOffset(OpBuilder &b, Location loc, ArrayRef<Value> indices,
                        ArrayRef<int64_t> shape) {
  auto scalarOf = [](Value index) {
    return isLanes(index) ? uniformScalar(index) : index;
  };
  if (indices.empty() ||
      !llvm::all_of(indices.drop_back(), [&](Value v) { return scalarOf(v); }))
    return Value();
  Value linear = consecutiveBase(b, loc, indices.back());
  if (!linear)
    return Value();
  int64_t stride = shape.back();
  for (int64_t d = int64_t(indices.size()) - 2; d >= 0; --d) {
    Value index = scalarOf(indices[d]);
    linear = arith::AddIOp::create(
        b, loc, linear,
        arith::MulIOp::create(b, loc, index,
                              arith::ConstantIndexOp::create(b, loc, stride)));
    stride *= shape[d];
  }
  return linear;
}

/// Whether the 16 elements from `linear` lie in [0, size).
static Value consecutiveInBounds(OpBuilder &b, Location loc, Value linear,
                                 int64_t size) {
  return arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, linear,
                            arith::ConstantIndexOp::create(b, loc, 0)),
      arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::sle, linear,
          arith::ConstantIndexOp::create(b, loc, size - kLanes)));
}

Value ifConsecutiveInBounds(OpBuilder &b, Location loc, Value linear,
                            int64_t size, Type type,
                            function_ref<Value()> inBounds,
                            function_ref<Value()> otherwise) {
  auto ifOp = scf::IfOp::create(b, loc, type ? TypeRange{type} : TypeRange{},
                                consecutiveInBounds(b, loc, linear, size),
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  for (auto [block, body] : {std::pair(ifOp.thenBlock(), inBounds),
                             std::pair(ifOp.elseBlock(), otherwise)}) {
    // (Without results the blocks already end in a yield.)
    b.setInsertionPointToStart(block);
    Value value = body();
    if (type)
      scf::YieldOp::create(b, loc, value);
  }
  return type ? ifOp.getResult(0) : Value();
}

/// capture[indices] for per-lane indices: a masked gather from the memref
/// flattened to one dimension (captures are contiguous, identity layout),
/// or, where the indices are those of 16 consecutive elements in bounds
/// (bias[i, j]), a masked load of them: a gather reads each lane on its own
/// (a [Sq, Skv] bias added 79% to a causal f32 forward at S = 2048).
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
  auto gathered = [&]() -> Value {
    return vector::GatherOp::create(
        b, loc, result, flat,
        ValueRange{arith::ConstantIndexOp::create(b, loc, 0)},
        arith::MinSIOp::create(
            b, loc, arith::MaxSIOp::create(b, loc, linear, zeroIndex), last),
        lanes, zero);
  };
  Value first = consecutiveOffset(b, loc, indices, type.getShape());
  if (!first)
    return gathered();
  return ifConsecutiveInBounds(
      b, loc, first, type.getNumElements(), result,
      [&]() -> Value {
        // The row's elements a key step (256) on, which the kernel reads
        // after its tile's other rows: a [Sq, Skv] bias is read from
        // memory, row by row, and its loads waited on it (perf).
        Value ahead = arith::MinSIOp::create(
            b, loc,
            arith::AddIOp::create(
                b, loc, first,
                arith::ConstantIndexOp::create(b, loc, kPrefetchElements)),
            arith::ConstantIndexOp::create(b, loc, type.getNumElements() - 1));
        memref::PrefetchOp::create(b, loc, flat, ValueRange{ahead},
                                   /*isWrite=*/false, /*localityHint=*/3,
                                   /*isDataCache=*/true);
        return vector::MaskedLoadOp::create(b, loc, result, flat,
                                            ValueRange{first}, lanes, zero);
      },
      gathered);
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
