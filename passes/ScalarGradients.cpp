// The gradient rule table of the scalar ops allowed in score_mod regions.
#include "passes/ScalarGradients.h"

#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;

namespace attnc {
namespace {

Value constantLike(OpBuilder &b, Location loc, Value like, double value) {
  return arith::ConstantOp::create(b, loc,
                                   b.getFloatAttr(like.getType(), value));
}

/// One adjoint per operand of an op; null where the operand takes none.
using Adjoints = SmallVector<Value, 2>;

/// The gradient rules: rule(op) builds, at the builder, the adjoints of the
/// operands of `op` (a clone, with forward operands and result `r`) given
/// the adjoint `g` of its result.
class GradientRules {
public:
  GradientRules(OpBuilder &b, Location loc, Value g, Value r)
      : b(b), loc(loc), g(g), r(r) {}

  // Arithmetic.
  Adjoints rule(arith::AddFOp) { return {g, g}; }
  Adjoints rule(arith::SubFOp) { return {g, neg(g)}; }
  Adjoints rule(arith::MulFOp o) {
    return {mul(g, o.getRhs()), mul(g, o.getLhs())};
  }
  Adjoints rule(arith::DivFOp o) {
    // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b.
    return {div(g, o.getRhs()), neg(div(mul(g, r), o.getRhs()))};
  }
  Adjoints rule(arith::NegFOp) { return {neg(g)}; }

  // Elementary functions.
  Adjoints rule(math::ExpOp) { return {mul(g, r)}; }
  Adjoints rule(math::LogOp o) { return {div(g, o.getOperand())}; }
  Adjoints rule(math::TanhOp) {
    Value one = constantLike(b, loc, r, 1.0);
    return {mul(g, sub(one, mul(r, r)))};
  }
  Adjoints rule(math::SqrtOp) {
    Value half = constantLike(b, loc, r, 0.5);
    return {div(mul(g, half), r)};
  }
  Adjoints rule(math::RsqrtOp) {
    // d(x^-1/2) = -1/2 x^-3/2 = -r^3 / 2.
    Value minusHalf = constantLike(b, loc, r, -0.5);
    return {mul(g, mul(minusHalf, mul(r, mul(r, r))))};
  }
  Adjoints rule(math::Exp2Op) {
    return {mul(g, mul(r, constantLike(b, loc, r, M_LN2)))};
  }
  Adjoints rule(math::Log2Op o) {
    return {div(g, mul(o.getOperand(), constantLike(b, loc, r, M_LN2)))};
  }
  Adjoints rule(math::SinOp o) {
    return {mul(g, math::CosOp::create(b, loc, o.getOperand()))};
  }
  Adjoints rule(math::CosOp o) {
    return {neg(mul(g, math::SinOp::create(b, loc, o.getOperand())))};
  }
  Adjoints rule(math::ErfOp o) {
    // 2 / sqrt(pi) exp(-x^2).
    Value x = o.getOperand();
    Value e = math::ExpOp::create(b, loc, neg(mul(x, x)));
    return {mul(g, mul(constantLike(b, loc, r, M_2_SQRTPI), e))};
  }

  // Powers.
  Adjoints rule(math::PowFOp o) {
    // d(a^b)/da = b a^(b-1), d(a^b)/db = a^b ln a.
    Value a = o.getLhs(), e = o.getRhs();
    Value one = constantLike(b, loc, r, 1.0);
    Value da = mul(e, math::PowFOp::create(b, loc, a, sub(e, one)));
    return {mul(g, da), mul(g, mul(r, math::LogOp::create(b, loc, a)))};
  }
  Adjoints rule(math::FPowIOp o) {
    // d(a^n)/da = n a^(n-1); the integer exponent has none.
    Value n = o.getRhs();
    Value m = arith::SubIOp::create(
        b, loc, n,
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(n.getType(), 1)));
    Value nf = arith::SIToFPOp::create(b, loc, r.getType(), n);
    return {mul(g, mul(nf, math::FPowIOp::create(b, loc, o.getLhs(), m))),
            Value()};
  }

  // Piecewise: the adjoint goes to one side.
  Adjoints rule(math::AbsFOp o) {
    Value zero = constantLike(b, loc, r, 0.0);
    Value nonNegative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE,
                                              o.getOperand(), zero);
    return {select(nonNegative, g, neg(g))};
  }
  /// maximumf/maxnumf (`firstIfTrue` OGE) and minimumf/minnumf (OLE): the
  /// gradient goes to the operand that was selected (the first on ties).
  Adjoints selectedOperandRule(Operation *o, arith::CmpFPredicate firstIfTrue) {
    Value first = arith::CmpFOp::create(b, loc, firstIfTrue, o->getOperand(0),
                                        o->getOperand(1));
    Value zero = constantLike(b, loc, g, 0.0);
    return {select(first, g, zero), select(first, zero, g)};
  }
  Adjoints rule(arith::SelectOp o) {
    Value zero = constantLike(b, loc, g, 0.0);
    return {Value(), select(o.getCondition(), g, zero),
            select(o.getCondition(), zero, g)};
  }

  // Conversions.
  Adjoints rule(arith::ExtFOp o) {
    return {arith::TruncFOp::create(b, loc, o.getIn().getType(), g)};
  }
  Adjoints rule(arith::TruncFOp o) {
    return {arith::ExtFOp::create(b, loc, o.getIn().getType(), g)};
  }

private:
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y).getResult();
  }
  Value div(Value x, Value y) {
    return arith::DivFOp::create(b, loc, x, y).getResult();
  }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x).getResult(); }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y).getResult();
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y).getResult();
  }

  OpBuilder &b;
  Location loc;
  Value g, r;
};

/// Applies the rule of `op` (a clone, with forward operands and results)
/// given the adjoint `g` of its result. Returns std::nullopt when `op` has
/// no rule.
std::optional<Adjoints> applyRule(OpBuilder &b, Location loc, Operation *op,
                                  Value g) {
  GradientRules rules(b, loc, g,
                      op->getNumResults() == 1 ? op->getResult(0) : Value());
  return llvm::TypeSwitch<Operation *, std::optional<Adjoints>>(op)
      .Case<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
            arith::NegFOp, math::ExpOp, math::LogOp, math::TanhOp, math::SqrtOp,
            math::RsqrtOp, math::Exp2Op, math::Log2Op, math::SinOp, math::CosOp,
            math::ErfOp, math::PowFOp, math::FPowIOp, math::AbsFOp,
            arith::SelectOp, arith::ExtFOp, arith::TruncFOp>(
          [&](auto o) { return rules.rule(o); })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](Operation *o) {
        return rules.selectedOperandRule(o, arith::CmpFPredicate::OGE);
      })
      .Case<arith::MinimumFOp, arith::MinNumFOp>([&](Operation *o) {
        return rules.selectedOperandRule(o, arith::CmpFPredicate::OLE);
      })
      // Float results that do not depend on a differentiable value.
      .Case<arith::ConstantOp, arith::SIToFPOp, arith::UIToFPOp>(
          [&](Operation *o) { return Adjoints(o->getNumOperands(), Value()); })
      .Default([](Operation *) { return std::nullopt; });
}

/// Whether the rule of `op` gives every operand its adjoint g, -g or a
/// select of g and 0 (0 stays 0); the others multiply g by a derivative,
/// which can be inf or NaN.
bool passesAdjointThrough(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::ExtFOp,
             arith::TruncFOp, arith::SelectOp, arith::MaximumFOp,
             arith::MaxNumFOp, arith::MinimumFOp, arith::MinNumFOp,
             math::AbsFOp>(op);
}

/// Whether an op of a score_mod region needs a rule: it makes a float.
bool producesFloat(Operation *op) {
  return llvm::any_of(op->getResultTypes(),
                      [](Type t) { return isa<FloatType>(t); });
}

/// tensor.extract of a captured tensor is the rule-less leaf whose adjoint
/// flows into the capture's gradient.
bool isCaptureRead(Operation *op) {
  return isa<tensor::ExtractOp>(op) && producesFloat(op);
}

/// The values of a score_mod region that depend on the score or on a
/// captured float: only their ops need gradient rules. The rest (floats
/// computed from indices: floor((i - j) / 3), a table's integer read
/// converted) are constants to the derivative.
llvm::DenseSet<Value> activeValues(Block &block) {
  llvm::DenseSet<Value> active = {block.getArgument(0)};
  for (Operation &op : block.without_terminator()) {
    bool isActive = isCaptureRead(&op);
    op.walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        isActive = isActive || active.contains(operand);
    });
    if (isActive)
      active.insert(op.result_begin(), op.result_end());
  }
  return active;
}

} // namespace

LogicalResult checkDifferentiable(Region &region, StringRef hint) {
  Block &block = region.front();
  llvm::DenseSet<Value> active = activeValues(block);
  for (Operation &op : block.without_terminator()) {
    if (!producesFloat(&op) || isCaptureRead(&op) ||
        llvm::none_of(op.getResults(),
                      [&](Value r) { return active.contains(r); }))
      continue;
    if (op.getNumRegions() != 0 || op.getNumResults() != 1) {
      return op.emitOpError()
             << "has no gradient rule: attn-derive-backward differentiates "
                "straight-line arith/math code in score_mod regions"
             << hint;
    }
    OpBuilder probe(op.getContext());
    // Rules are tried on a throwaway clone: a rule-less op fails here.
    Block scratch;
    probe.setInsertionPointToStart(&scratch);
    Operation *clone = probe.clone(op);
    bool known =
        applyRule(probe, op.getLoc(), clone, clone->getResult(0)).has_value();
    // The scratch block's ops refer to each other only; drop them.
    for (Operation &dead : llvm::make_early_inc_range(llvm::reverse(scratch)))
      dead.erase();
    if (!known)
      return op.emitOpError()
             << "has no gradient rule; attn-derive-backward supports addf, "
                "subf, mulf, divf, negf, exp, exp2, log, log2, tanh, sqrt, "
                "rsqrt, sin, cos, erf, powf, fpowi, absf, maximumf, minimumf, "
                "maxnumf, minnumf, select, extf/truncf, constants and casts"
             << hint;
  }
  return success();
}

ScoreModAdjoints buildScoreModAdjoints(OpBuilder &b, Location loc,
                                       Region &region, ValueRange arguments,
                                       Value seed) {
  Block &block = region.front();
  IRMapping forward;
  for (auto [arg, value] : llvm::zip(block.getArguments(), arguments))
    forward.map(arg, value);
  for (Operation &op : block.without_terminator())
    b.clone(op, forward);
  auto yield = cast<attn::YieldOp>(block.getTerminator());

  ScoreModAdjoints result;
  result.result = forward.lookup(yield.getValue());
  DenseMap<Value, Value> adjoint; // keyed by original region values
  auto accumulate = [&](Value original, Value contribution) {
    Value &slot = adjoint[original];
    slot = slot ? arith::AddFOp::create(b, loc, slot, contribution).getResult()
                : contribution;
  };
  accumulate(yield.getValue(), seed);

  llvm::DenseSet<Value> active = activeValues(block);
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    if (op.getNumResults() != 1 || !active.contains(op.getResult(0)))
      continue;
    Value g = adjoint.lookup(op.getResult(0));
    if (!g)
      continue;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      auto arg = dyn_cast<BlockArgument>(extract.getTensor());
      if (arg && arg.getOwner() == &block && arg.getArgNumber() >= 5) {
        CaptureAdjoint read;
        read.capture = arg.getArgNumber() - 5;
        for (Value index : extract.getIndices())
          read.indices.push_back(forward.lookupOrDefault(index));
        // In f32 for the caller's sums: a narrow capture's element read
        // through extf had its f32 adjoint truncated by extf's rule, which
        // would round every term of the sum (8e-2 relative error on a
        // bf16 per-head scale): take it from before the truncation.
        if (auto trunc = g.getDefiningOp<arith::TruncFOp>();
            trunc && trunc.getIn().getType().isF32())
          g = trunc.getIn();
        else if (!g.getType().isF32())
          g = arith::ExtFOp::create(b, loc, b.getF32Type(), g);
        read.adjoint = g;
        result.captures.push_back(std::move(read));
      }
      continue;
    }
    Operation *clone = forward.lookup(op.getResult(0)).getDefiningOp();
    std::optional<Adjoints> operandAdjoints = applyRule(b, loc, clone, g);
    assert(operandAdjoints && "checkDifferentiable admits only ops with rules");
    // An adjoint of 0 gives 0, whatever the derivative: a masked score
    // (P = 0) takes no gradient where the score_mod's derivative is inf or
    // NaN (an ALiBi bias through exp((i - j) / 2) for far keys, sqrt(i - j)
    // above the causal diagonal), nor does a term whose adjoint underflowed
    // (SiLU x / (1 + exp(-x)) at x = -100: the divf's adjoint of 1 +
    // exp(-x) is 0, exp's derivative inf). 0 * inf made dQ NaN.
    if (!passesAdjointThrough(&op)) {
      Value zeroIn = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, g,
                                           constantLike(b, loc, g, 0.0));
      for (Value &contribution : *operandAdjoints)
        if (contribution)
          contribution = arith::SelectOp::create(
              b, loc, zeroIn, constantLike(b, loc, contribution, 0.0),
              contribution);
    }
    for (auto [operand, contribution] :
         llvm::zip(op.getOperands(), *operandAdjoints))
      if (contribution && isa<FloatType>(operand.getType()))
        accumulate(operand, contribution);
  }
  result.scoreAdjoint = adjoint.lookup(block.getArgument(0));
  if (!result.scoreAdjoint)
    result.scoreAdjoint = constantLike(b, loc, seed, 0.0);
  return result;
}

namespace {

/// Which values of a score_mod region's block depend on its key j.
class KeyDependence {
public:
  explicit KeyDependence(Block &block) : key(block.getArgument(4)) {}

  bool dependsOnKey(Value v) {
    if (v == key)
      return true;
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    auto [it, inserted] = memo.try_emplace(v, false);
    if (!inserted)
      return it->second;
    bool depends = llvm::any_of(def->getOperands(),
                                [&](Value x) { return dependsOnKey(x); });
    memo[v] = depends;
    return depends;
  }

  /// v is j, or j plus or minus values without j (j - i + c).
  bool movesWithKey(Value v) {
    if (v == key)
      return true;
    if (auto add = v.getDefiningOp<arith::AddIOp>())
      return (movesWithKey(add.getLhs()) && !dependsOnKey(add.getRhs())) ||
             (!dependsOnKey(add.getLhs()) && movesWithKey(add.getRhs()));
    if (auto sub = v.getDefiningOp<arith::SubIOp>())
      return movesWithKey(sub.getLhs()) && !dependsOnKey(sub.getRhs());
    return false;
  }

private:
  Value key;
  llvm::DenseMap<Value, bool> memo;
};

} // namespace

/// Whether every use of score capture `capture` in the score_mod `region`
/// is a tensor.extract of it whose indices satisfy `read`.
static bool allReadsAre(Region &region, unsigned capture,
                        function_ref<bool(ValueRange)> read) {
  if (region.empty())
    return false;
  BlockArgument arg = region.front().getArgument(5 + capture);
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (!type || type.getRank() == 0)
    return false;
  return llvm::all_of(arg.getUses(), [&](OpOperand &use) {
    auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
    return extract && use.getOperandNumber() == 0 && read(extract.getIndices());
  });
}

bool isReadOncePerRow(Region &region, unsigned capture) {
  if (region.empty())
    return false;
  KeyDependence keys(region.front());
  return allReadsAre(region, capture, [&](ValueRange indices) {
    return keys.movesWithKey(indices.back()) &&
           llvm::none_of(indices.drop_back(),
                         [&](Value x) { return keys.dependsOnKey(x); });
  });
}

bool isReadAtItsKey(Region &region, unsigned capture, int64_t keys) {
  if (region.empty())
    return false;
  auto type = dyn_cast<RankedTensorType>(
      region.front().getArgument(5 + capture).getType());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1) ||
      type.getShape().back() < keys)
    return false;
  Value key = region.front().getArgument(4);
  return allReadsAre(region, capture,
                     [&](ValueRange indices) { return indices.back() == key; });
}

} // namespace attnc
