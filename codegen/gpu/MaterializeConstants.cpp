// attn-gpu-materialize-constants: constant tensors of host code are
// computed on the device (see Passes.td).
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUMATERIALIZECONSTANTS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// The most elements of a constant that is not a splat: each element of
/// the result picks its value through a chain of selects.
constexpr int64_t kMaxElements = 256;

/// A linalg.generic writing `values` (row-major) into `init`.
Value generateValues(OpBuilder &b, Location loc, RankedTensorType type,
                     Value init, ArrayRef<Attribute> values) {
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type, ValueRange{}, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nested, Location loc, ValueRange) {
        Value flat =
            rank == 0
                ? arith::ConstantIndexOp::create(nested, loc, 0).getResult()
                : linalg::IndexOp::create(nested, loc, 0).getResult();
        for (int64_t d = 1; d < rank; ++d) {
          Value extent =
              arith::ConstantIndexOp::create(nested, loc, type.getDimSize(d));
          flat = arith::AddIOp::create(
              nested, loc, arith::MulIOp::create(nested, loc, flat, extent),
              linalg::IndexOp::create(nested, loc, d));
        }
        auto constant = [&](Attribute value) {
          return arith::ConstantOp::create(nested, loc, cast<TypedAttr>(value))
              .getResult();
        };
        Value value = constant(values.back());
        for (int64_t e = values.size() - 2; e >= 0; --e) {
          Value here = arith::CmpIOp::create(
              nested, loc, arith::CmpIPredicate::eq, flat,
              arith::ConstantIndexOp::create(nested, loc, e));
          value = arith::SelectOp::create(nested, loc, here,
                                          constant(values[e]), value);
        }
        linalg::YieldOp::create(nested, loc, value);
      });
  return generic.getResult(0);
}

LogicalResult materialize(arith::ConstantOp cst) {
  auto type = dyn_cast<RankedTensorType>(cst.getType());
  if (!type || cst->use_empty())
    return success();
  auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
  if (!dense || (!dense.isSplat() && type.getNumElements() > kMaxElements))
    return cst.emitError("a constant tensor in a spec for a GPU target must "
                         "be a splat or have at most ")
           << kMaxElements
           << " elements; pass a larger one as an argument instead";
  OpBuilder b(cst);
  Location loc = cst.getLoc();
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value result;
  if (dense.isSplat()) {
    Value scalar = arith::ConstantOp::create(
        b, loc, cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    result = linalg::FillOp::create(b, loc, scalar, init).getResult(0);
  } else {
    auto values = llvm::to_vector(dense.getValues<Attribute>());
    result = generateValues(b, loc, type, init, values);
  }
  cst.replaceAllUsesWith(result);
  cst.erase();
  return success();
}

struct AttnGpuMaterializeConstantsPass
    : attnc::impl::AttnGpuMaterializeConstantsBase<
          AttnGpuMaterializeConstantsPass> {
  void runOnOperation() override {
    SmallVector<arith::ConstantOp> constants;
    getOperation().walk([&](arith::ConstantOp cst) {
      if (isa<RankedTensorType>(cst.getType()) &&
          !cst->getParentOfType<gpu::LaunchOp>())
        constants.push_back(cst);
    });
    for (arith::ConstantOp cst : constants)
      if (failed(materialize(cst)))
        return signalPassFailure();
  }
};

} // namespace
