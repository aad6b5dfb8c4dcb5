// The region evaluator of RegionEvaluator.h.
#include "tools/reference/RegionEvaluator.h"

#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace attnc {
namespace {

bool isIntegral(Type type) { return isa<IntegerType, IndexType>(type); }

unsigned widthOf(Type type) {
  return isa<IndexType>(type) ? IndexType::kInternalStorageBitWidth
                              : type.getIntOrFloatBitWidth();
}

/// The ops on floats the evaluator computes itself, in float64.
bool isFloatOp(Operation &op) {
  return isa<
      arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp, arith::RemFOp,
      arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
      arith::MinNumFOp, arith::ExtFOp, arith::TruncFOp, math::ExpOp,
      math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log2Op, math::Log10Op,
      math::Log1pOp, math::TanhOp, math::SinhOp, math::CoshOp, math::SinOp,
      math::CosOp, math::TanOp, math::AtanOp, math::Atan2Op, math::AsinOp,
      math::AcosOp, math::AsinhOp, math::AcoshOp, math::AtanhOp, math::ErfOp,
      math::ErfcOp, math::SqrtOp, math::RsqrtOp, math::CbrtOp, math::AbsFOp,
      math::CeilOp, math::FloorOp, math::RoundOp, math::RoundEvenOp,
      math::TruncOp, math::CopySignOp, math::PowFOp, math::FmaOp>(op);
}

/// Ops between floats and integers, and the ones of either kind.
bool isMixedOp(Operation &op) {
  return isa<arith::ConstantOp, arith::CmpFOp, arith::SelectOp, arith::SIToFPOp,
             arith::UIToFPOp, arith::FPToSIOp, arith::FPToUIOp,
             arith::BitcastOp, math::FPowIOp, tensor::ExtractOp, tensor::DimOp>(
      op);
}

bool isControlFlow(Operation &op) {
  return isa<scf::IfOp, scf::ForOp, scf::WhileOp, scf::IndexSwitchOp,
             scf::ExecuteRegionOp, scf::YieldOp, scf::ConditionOp,
             attn::YieldOp>(op);
}

/// Integer-only ops without regions: folded with constant operands.
bool isIntegerOp(Operation &op) {
  return op.getNumRegions() == 0 && op.getNumResults() > 0 &&
         llvm::all_of(op.getOperandTypes(), isIntegral) &&
         llvm::all_of(op.getResultTypes(), isIntegral);
}

bool compareF(arith::CmpFPredicate p, double x, double y) {
  bool unordered = std::isnan(x) || std::isnan(y);
  switch (p) {
  case arith::CmpFPredicate::OEQ:
    return !unordered && x == y;
  case arith::CmpFPredicate::OGT:
    return !unordered && x > y;
  case arith::CmpFPredicate::OGE:
    return !unordered && x >= y;
  case arith::CmpFPredicate::OLT:
    return !unordered && x < y;
  case arith::CmpFPredicate::OLE:
    return !unordered && x <= y;
  case arith::CmpFPredicate::ONE:
    return !unordered && x != y;
  case arith::CmpFPredicate::ORD:
    return !unordered;
  case arith::CmpFPredicate::UEQ:
    return unordered || x == y;
  case arith::CmpFPredicate::UGT:
    return unordered || x > y;
  case arith::CmpFPredicate::UGE:
    return unordered || x >= y;
  case arith::CmpFPredicate::ULT:
    return unordered || x < y;
  case arith::CmpFPredicate::ULE:
    return unordered || x <= y;
  case arith::CmpFPredicate::UNE:
    return unordered || x != y;
  case arith::CmpFPredicate::UNO:
    return unordered;
  case arith::CmpFPredicate::AlwaysTrue:
    return true;
  case arith::CmpFPredicate::AlwaysFalse:
    return false;
  }
  return false;
}

/// x rounded to `type` (f16, bf16, f32) and back.
double roundTo(Type type, double x) {
  auto floatType = dyn_cast<FloatType>(type);
  if (!floatType || floatType.getWidth() >= 64)
    return x;
  APFloat value(x);
  bool lost;
  value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

/// An integer from a float by truncation, wrapped to `width` bits (out of
/// range, MLIR's result is poison: any value will do).
APInt truncated(double x, unsigned width, bool isSigned) {
  if (!std::isfinite(x))
    return APInt(width, 0);
  double t = std::trunc(x);
  APInt wide =
      isSigned
          ? APInt(64, uint64_t(int64_t(std::clamp(t, -9.2e18, 9.2e18))), true)
          : APInt(64, uint64_t(std::clamp(t, 0.0, 1.8e19)));
  return wide.sextOrTrunc(width);
}

/// The folders of the integer ops answer for constant operands; an op
/// without one (or one that does not fold ones) cannot be evaluated.
bool foldsConstants(Operation &op) {
  SmallVector<Attribute> operands;
  for (Type type : op.getOperandTypes())
    operands.push_back(IntegerAttr::get(type, 1));
  SmallVector<OpFoldResult> results;
  return succeeded(op.fold(operands, results)) &&
         results.size() == op.getNumResults();
}

} // namespace

LogicalResult RegionEvaluator::check() {
  WalkResult walk = region.walk([&](Operation *op) {
    if (isControlFlow(*op) || isFloatOp(*op) || isMixedOp(*op) ||
        (isIntegerOp(*op) && foldsConstants(*op)))
      return WalkResult::advance();
    op->emitOpError("cannot be evaluated by the float64 reference of attnc "
                    "run");
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

double RegionEvaluator::evaluate(ArrayRef<double> leading) {
  values.clear();
  Block &block = region.front();
  SmallVector<Scalar> args;
  for (auto [arg, value] : llvm::zip(block.getArguments(), leading)) {
    Scalar s;
    if (isIntegral(arg.getType()))
      s.i = APInt(widthOf(arg.getType()), uint64_t(int64_t(value)), true);
    else
      s.f = value;
    args.push_back(s);
  }
  // The captures are tensors, read by tensor.extract from `captures`.
  args.resize(block.getNumArguments());
  SmallVector<Scalar> result = run(block, args);
  Type type = block.getTerminator()->getOperand(0).getType();
  return isIntegral(type) ? double(result.front().i.getBoolValue())
                          : result.front().f;
}

SmallVector<RegionEvaluator::Scalar>
RegionEvaluator::run(Block &block, ArrayRef<Scalar> args) {
  for (auto [arg, value] : llvm::zip(block.getArguments(), args))
    values[arg] = value;
  for (Operation &op : block.without_terminator())
    step(op);
  SmallVector<Scalar> out;
  for (Value v : block.getTerminator()->getOperands())
    out.push_back(get(v));
  return out;
}

void RegionEvaluator::foldIntegers(Operation &op) {
  SmallVector<Attribute> operands;
  for (Value v : op.getOperands())
    operands.push_back(IntegerAttr::get(v.getType(), get(v).i));
  SmallVector<OpFoldResult> results;
  // A fold that fails is undefined behaviour (a division by 0): 0.
  if (failed(op.fold(operands, results)) ||
      results.size() != op.getNumResults()) {
    for (Value r : op.getResults())
      values[r] = Scalar{0, APInt(widthOf(r.getType()), 0)};
    return;
  }
  for (auto [r, folded] : llvm::zip(op.getResults(), results)) {
    if (auto value = dyn_cast<Value>(folded))
      values[r] = get(value);
    else if (auto attr =
                 dyn_cast_or_null<IntegerAttr>(dyn_cast<Attribute>(folded)))
      values[r] = Scalar{0, attr.getValue()};
    else
      values[r] = Scalar{0, APInt(widthOf(r.getType()), 0)};
  }
}

double RegionEvaluator::floatOf(Operation &op, double a, double b, double c) {
  return llvm::TypeSwitch<Operation *, double>(&op)
      .Case([&](arith::AddFOp) { return a + b; })
      .Case([&](arith::SubFOp) { return a - b; })
      .Case([&](arith::MulFOp) { return a * b; })
      .Case([&](arith::DivFOp) { return a / b; })
      .Case([&](arith::RemFOp) { return std::fmod(a, b); })
      .Case([&](arith::NegFOp) { return -a; })
      .Case([&](arith::MaximumFOp) {
        return std::isnan(a) || std::isnan(b) ? std::nan("")
               : a == b                       ? (std::signbit(a) ? b : a)
                                              : std::fmax(a, b);
      })
      .Case([&](arith::MinimumFOp) {
        return std::isnan(a) || std::isnan(b) ? std::nan("")
               : a == b                       ? (std::signbit(a) ? a : b)
                                              : std::fmin(a, b);
      })
      .Case([&](arith::MaxNumFOp) { return std::fmax(a, b); })
      .Case([&](arith::MinNumFOp) { return std::fmin(a, b); })
      .Case([&](arith::ExtFOp) { return a; })
      .Case([&](arith::TruncFOp) { return a; }) // rounded by step, if at all
      .Case([&](math::ExpOp) { return std::exp(a); })
      .Case([&](math::Exp2Op) { return std::exp2(a); })
      .Case([&](math::ExpM1Op) { return std::expm1(a); })
      .Case([&](math::LogOp) { return std::log(a); })
      .Case([&](math::Log2Op) { return std::log2(a); })
      .Case([&](math::Log10Op) { return std::log10(a); })
      .Case([&](math::Log1pOp) { return std::log1p(a); })
      .Case([&](math::TanhOp) { return std::tanh(a); })
      .Case([&](math::SinhOp) { return std::sinh(a); })
      .Case([&](math::CoshOp) { return std::cosh(a); })
      .Case([&](math::SinOp) { return std::sin(a); })
      .Case([&](math::CosOp) { return std::cos(a); })
      .Case([&](math::TanOp) { return std::tan(a); })
      .Case([&](math::AtanOp) { return std::atan(a); })
      .Case([&](math::Atan2Op) { return std::atan2(a, b); })
      .Case([&](math::AsinOp) { return std::asin(a); })
      .Case([&](math::AcosOp) { return std::acos(a); })
      .Case([&](math::AsinhOp) { return std::asinh(a); })
      .Case([&](math::AcoshOp) { return std::acosh(a); })
      .Case([&](math::AtanhOp) { return std::atanh(a); })
      .Case([&](math::ErfOp) { return std::erf(a); })
      .Case([&](math::ErfcOp) { return std::erfc(a); })
      .Case([&](math::SqrtOp) { return std::sqrt(a); })
      .Case([&](math::RsqrtOp) { return 1 / std::sqrt(a); })
      .Case([&](math::CbrtOp) { return std::cbrt(a); })
      .Case([&](math::AbsFOp) { return std::fabs(a); })
      .Case([&](math::CeilOp) { return std::ceil(a); })
      .Case([&](math::FloorOp) { return std::floor(a); })
      .Case([&](math::RoundOp) { return std::round(a); })
      .Case([&](math::RoundEvenOp) {
        double r = std::round(a);
        return std::fabs(a - std::trunc(a)) == 0.5 ? 2 * std::round(a / 2) : r;
      })
      .Case([&](math::TruncOp) { return std::trunc(a); })
      .Case([&](math::CopySignOp) { return std::copysign(a, b); })
      .Case([&](math::PowFOp) { return std::pow(a, b); })
      .Case([&](math::FmaOp) { return std::fma(a, b, c); })
      .Default([](Operation *) { return std::nan(""); });
}

void RegionEvaluator::step(Operation &op) {
  auto result = [&](Scalar s) { values[op.getResult(0)] = s; };
  auto f = [&](Value v) { return get(v).f; };
  auto i = [&](Value v) { return get(v).i; };
  if (isFloatOp(op)) {
    double a = f(op.getOperand(0));
    double b = op.getNumOperands() > 1 ? f(op.getOperand(1)) : 0;
    double c = op.getNumOperands() > 2 ? f(op.getOperand(2)) : 0;
    double value = floatOf(op, a, b, c);
    Type type = op.getResult(0).getType();
    if (rounding && type.getIntOrFloatBitWidth() < 32)
      value = roundTo(type, value);
    return result({value, APInt()});
  }
  if (isIntegerOp(op))
    return foldIntegers(op);
  llvm::TypeSwitch<Operation *>(&op)
      .Case([&](arith::ConstantOp c) {
        if (auto value = dyn_cast<FloatAttr>(c.getValue()))
          result({value.getValueAsDouble(), APInt()});
        else if (auto value = dyn_cast<IntegerAttr>(c.getValue()))
          result({0, value.getValue()});
      })
      .Case([&](arith::CmpFOp c) {
        result({0, APInt(1, compareF(c.getPredicate(), f(c.getLhs()),
                                     f(c.getRhs())))});
      })
      .Case([&](arith::SelectOp s) {
        result(get(i(s.getCondition()).getBoolValue() ? s.getTrueValue()
                                                      : s.getFalseValue()));
      })
      .Case([&](arith::SIToFPOp c) {
        result({roundTo(c.getType(), double(i(c.getIn()).getSExtValue())),
                APInt()});
      })
      .Case([&](arith::UIToFPOp c) {
        APInt in = i(c.getIn());
        result({roundTo(c.getType(), in.getBitWidth() == 1
                                         ? double(in.getBoolValue())
                                         : double(in.getZExtValue())),
                APInt()});
      })
      .Case([&](arith::FPToSIOp c) {
        result({0, truncated(f(c.getIn()), widthOf(c.getType()), true)});
      })
      .Case([&](arith::FPToUIOp c) {
        result({0, truncated(f(c.getIn()), widthOf(c.getType()), false)});
      })
      .Case([&](arith::BitcastOp c) {
        // Between a float and an integer of its width: the float's bits
        // as its type stores them.
        Type to = c.getType();
        if (auto floatType = dyn_cast<FloatType>(to)) {
          APFloat value(floatType.getFloatSemantics(), i(c.getIn()));
          bool lost;
          value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                        &lost);
          result({value.convertToDouble(), APInt()});
          return;
        }
        auto from = cast<FloatType>(c.getIn().getType());
        APFloat value(f(c.getIn()));
        bool lost;
        value.convert(from.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                      &lost);
        result({0, value.bitcastToAPInt()});
      })
      .Case([&](math::FPowIOp p) {
        result({std::pow(f(p.getLhs()), double(i(p.getRhs()).getSExtValue())),
                APInt()});
      })
      .Case([&](tensor::ExtractOp e) {
        Block &entry = region.front();
        auto arg = cast<BlockArgument>(e.getTensor());
        const HostTensor &t =
            *captures[arg.getArgNumber() -
                      (entry.getNumArguments() - captures.size())];
        int64_t offset = 0;
        bool inBounds = true;
        for (auto [k, index] : llvm::enumerate(e.getIndices())) {
          int64_t at = i(index).getSExtValue();
          inBounds = inBounds && at >= 0 && at < t.shape[k];
          offset = offset * t.shape[k] + at;
        }
        double value = inBounds ? t.data[offset]
                                : std::numeric_limits<double>::quiet_NaN();
        Type type = e.getType();
        if (isIntegral(type))
          result({0, APInt(widthOf(type),
                           uint64_t(int64_t(std::isnan(value) ? 0 : value)),
                           true)});
        else
          result({value, APInt()});
      })
      .Case([&](tensor::DimOp d) {
        Block &entry = region.front();
        auto arg = cast<BlockArgument>(d.getSource());
        const HostTensor &t =
            *captures[arg.getArgNumber() -
                      (entry.getNumArguments() - captures.size())];
        int64_t dim = i(d.getIndex()).getSExtValue();
        result({0, APInt(64, dim >= 0 && dim < int64_t(t.shape.size())
                                 ? uint64_t(t.shape[dim])
                                 : 0)});
      })
      .Case([&](scf::IfOp s) {
        SmallVector<Scalar> out =
            i(s.getCondition()).getBoolValue()
                ? runRegion(s.getThenRegion(), {})
                : (s.getElseRegion().empty()
                       ? SmallVector<Scalar>()
                       : runRegion(s.getElseRegion(), {}));
        for (auto [r, v] : llvm::zip(s.getResults(), out))
          values[r] = v;
      })
      .Case([&](scf::ExecuteRegionOp s) {
        SmallVector<Scalar> out = runRegion(s.getRegion(), {});
        for (auto [r, v] : llvm::zip(s.getResults(), out))
          values[r] = v;
      })
      .Case([&](scf::IndexSwitchOp s) {
        int64_t at = i(s.getArg()).getSExtValue();
        Region *chosen = &s.getDefaultRegion();
        for (auto [value, r] : llvm::zip(s.getCases(), s.getCaseRegions()))
          if (value == at)
            chosen = &r;
        SmallVector<Scalar> out = runRegion(*chosen, {});
        for (auto [r, v] : llvm::zip(s.getResults(), out))
          values[r] = v;
      })
      .Case([&](scf::ForOp s) {
        APInt lb = i(s.getLowerBound()), ub = i(s.getUpperBound()),
              stepBy = i(s.getStep());
        bool isUnsigned = s.getUnsignedCmp();
        SmallVector<Scalar> carried;
        for (Value init : s.getInitArgs())
          carried.push_back(get(init));
        for (APInt iv = lb; isUnsigned ? iv.ult(ub) : iv.slt(ub);
             iv += stepBy) {
          SmallVector<Scalar> args = {Scalar{0, iv}};
          args.append(carried);
          carried = run(*s.getBody(), args);
          if (stepBy.isZero() || (!isUnsigned && stepBy.isNegative()))
            break;
          APInt next = iv + stepBy;
          if (isUnsigned ? next.ult(iv) : next.slt(iv)) // wrapped around
            break;
        }
        for (auto [r, v] : llvm::zip(s.getResults(), carried))
          values[r] = v;
      })
      .Case([&](scf::WhileOp s) {
        SmallVector<Scalar> carried;
        for (Value init : s.getInits())
          carried.push_back(get(init));
        // A loop that does not end in a million iterations ends there.
        for (int64_t n = 0; n < 1000000; ++n) {
          Block &before = s.getBefore().front();
          run(before, carried);
          auto condition = cast<scf::ConditionOp>(before.getTerminator());
          carried.clear();
          for (Value v : condition.getArgs())
            carried.push_back(get(v));
          if (!i(condition.getCondition()).getBoolValue())
            break;
          carried = run(s.getAfter().front(), carried);
        }
        for (auto [r, v] : llvm::zip(s.getResults(), carried))
          values[r] = v;
      });
}

} // namespace attnc
