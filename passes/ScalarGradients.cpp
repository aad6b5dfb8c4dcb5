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

/// Applies the rule of `op` (a clone, with forward operands and results),
/// writing one adjoint per operand. Returns false when `op` has no rule.
bool applyRule(OpBuilder &b, Location loc, Operation *op, Value g,
               SmallVectorImpl<Value> &adjoints) {
  adjoints.assign(op->getNumOperands(), Value());
  auto mul = [&](Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y).getResult();
  };
  auto div = [&](Value x, Value y) {
    return arith::DivFOp::create(b, loc, x, y).getResult();
  };
  auto neg = [&](Value x) { return arith::NegFOp::create(b, loc, x).getResult(); };
  auto sub = [&](Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y).getResult();
  };
  auto select = [&](Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y).getResult();
  };
  Value r = op->getNumResults() == 1 ? op->getResult(0) : Value();
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](arith::AddFOp o) {
        adjoints.assign({g, g});
        return true;
      })
      .Case([&](arith::SubFOp o) {
        adjoints.assign({g, neg(g)});
        return true;
      })
      .Case([&](arith::MulFOp o) {
        adjoints.assign({mul(g, o.getRhs()), mul(g, o.getLhs())});
        return true;
      })
      .Case([&](arith::DivFOp o) {
        // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b.
        adjoints.assign({div(g, o.getRhs()), neg(div(mul(g, r), o.getRhs()))});
        return true;
      })
      .Case([&](arith::NegFOp o) {
        adjoints.assign({neg(g)});
        return true;
      })
      .Case([&](math::ExpOp o) {
        adjoints.assign({mul(g, r)});
        return true;
      })
      .Case([&](math::LogOp o) {
        adjoints.assign({div(g, o.getOperand())});
        return true;
      })
      .Case([&](math::TanhOp o) {
        Value one = constantLike(b, loc, r, 1.0);
        adjoints.assign({mul(g, sub(one, mul(r, r)))});
        return true;
      })
      .Case([&](math::SqrtOp o) {
        Value half = constantLike(b, loc, r, 0.5);
        adjoints.assign({div(mul(g, half), r)});
        return true;
      })
      .Case([&](math::RsqrtOp o) {
        // d(x^-1/2) = -1/2 x^-3/2 = -r^3 / 2.
        Value minusHalf = constantLike(b, loc, r, -0.5);
        adjoints.assign({mul(g, mul(minusHalf, mul(r, mul(r, r))))});
        return true;
      })
      .Case([&](math::Exp2Op o) {
        adjoints.assign({mul(g, mul(r, constantLike(b, loc, r, M_LN2)))});
        return true;
      })
      .Case([&](math::Log2Op o) {
        adjoints.assign(
            {div(g, mul(o.getOperand(), constantLike(b, loc, r, M_LN2)))});
        return true;
      })
      .Case([&](math::SinOp o) {
        adjoints.assign({mul(g, math::CosOp::create(b, loc, o.getOperand()))});
        return true;
      })
      .Case([&](math::CosOp o) {
        adjoints.assign(
            {neg(mul(g, math::SinOp::create(b, loc, o.getOperand())))});
        return true;
      })
      .Case([&](math::ErfOp o) {
        // 2 / sqrt(pi) exp(-x^2).
        Value x = o.getOperand();
        Value e = math::ExpOp::create(b, loc, neg(mul(x, x)));
        adjoints.assign({mul(g, mul(constantLike(b, loc, r, M_2_SQRTPI), e))});
        return true;
      })
      .Case([&](math::PowFOp o) {
        // d(a^b)/da = b a^(b-1), d(a^b)/db = a^b ln a.
        Value a = o.getLhs(), e = o.getRhs();
        Value one = constantLike(b, loc, r, 1.0);
        Value da = mul(e, math::PowFOp::create(b, loc, a, sub(e, one)));
        adjoints.assign(
            {mul(g, da), mul(g, mul(r, math::LogOp::create(b, loc, a)))});
        return true;
      })
      .Case([&](math::FPowIOp o) {
        // d(a^n)/da = n a^(n-1); the integer exponent has none.
        Value n = o.getRhs();
        Value m = arith::SubIOp::create(
            b, loc, n,
            arith::ConstantOp::create(b, loc,
                                      b.getIntegerAttr(n.getType(), 1)));
        Value nf = arith::SIToFPOp::create(b, loc, r.getType(), n);
        adjoints.assign(
            {mul(g, mul(nf, math::FPowIOp::create(b, loc, o.getLhs(), m))),
             Value()});
        return true;
      })
      .Case([&](math::AbsFOp o) {
        Value zero = constantLike(b, loc, r, 0.0);
        Value nonNegative = arith::CmpFOp::create(
            b, loc, arith::CmpFPredicate::OGE, o.getOperand(), zero);
        adjoints.assign({select(nonNegative, g, neg(g))});
        return true;
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>([&](Operation *o) {
        // The gradient goes to the operand that was selected (the first on
        // ties).
        bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(o);
        Value first = arith::CmpFOp::create(
            b, loc,
            isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE,
            o->getOperand(0), o->getOperand(1));
        Value zero = constantLike(b, loc, g, 0.0);
        adjoints.assign({select(first, g, zero), select(first, zero, g)});
        return true;
      })
      .Case([&](arith::SelectOp o) {
        Value zero = constantLike(b, loc, g, 0.0);
        adjoints.assign({Value(), select(o.getCondition(), g, zero),
                    select(o.getCondition(), zero, g)});
        return true;
      })
      .Case([&](arith::ExtFOp o) {
        adjoints.assign({arith::TruncFOp::create(b, loc, o.getIn().getType(), g)});
        return true;
      })
      .Case([&](arith::TruncFOp o) {
        adjoints.assign({arith::ExtFOp::create(b, loc, o.getIn().getType(), g)});
        return true;
      })
      // Float results that do not depend on a differentiable value.
      .Case<arith::ConstantOp, arith::SIToFPOp, arith::UIToFPOp>(
          [&](Operation *) { return true; })
      .Default([&](Operation *) { return false; });
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

} // namespace

LogicalResult checkDifferentiable(Region &region) {
  Block &block = region.front();
  for (Operation &op : block.without_terminator()) {
    if (!producesFloat(&op) || isCaptureRead(&op))
      continue;
    if (op.getNumRegions() != 0 || op.getNumResults() != 1) {
      return op.emitOpError()
             << "has no gradient rule: attn-derive-backward differentiates "
                "straight-line arith/math code in score_mod regions";
    }
    OpBuilder probe(op.getContext());
    // Rules are tried on a throwaway clone: a rule-less op fails here.
    Block scratch;
    probe.setInsertionPointToStart(&scratch);
    Operation *clone = probe.clone(op);
    SmallVector<Value> adjoints;
    Value g = clone->getResult(0);
    bool known = applyRule(probe, op.getLoc(), clone, g, adjoints);
    // The scratch block's ops refer to each other only; drop them.
    for (Operation &dead : llvm::make_early_inc_range(llvm::reverse(scratch)))
      dead.erase();
    if (!known)
      return op.emitOpError()
             << "has no gradient rule; attn-derive-backward supports addf, "
                "subf, mulf, divf, negf, exp, exp2, log, log2, tanh, sqrt, "
                "rsqrt, sin, cos, erf, powf, fpowi, absf, maximumf, minimumf, "
                "maxnumf, minnumf, select, extf/truncf, constants and casts";
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

  SmallVector<Value> operandAdjoints;
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    if (op.getNumResults() != 1)
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
    bool known = applyRule(b, loc, clone, g, operandAdjoints);
    assert(known && "checkDifferentiable admits only ops with rules");
    (void)known;
    // An adjoint of 0 gives 0, whatever the derivative: a masked score
    // (P = 0) takes no gradient where the score_mod's derivative is inf or
    // NaN (an ALiBi bias through exp((i - j) / 2) for far keys, sqrt(i - j)
    // above the causal diagonal), nor does a term whose adjoint underflowed
    // (SiLU x / (1 + exp(-x)) at x = -100: the divf's adjoint of 1 +
    // exp(-x) is 0, exp's derivative inf). 0 * inf made dQ NaN.
    if (!passesAdjointThrough(&op)) {
      Value zeroIn = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, g,
                                           constantLike(b, loc, g, 0.0));
      for (Value &contribution : operandAdjoints)
        if (contribution)
          contribution = arith::SelectOp::create(
              b, loc, zeroIn, constantLike(b, loc, contribution, 0.0),
              contribution);
    }
    for (auto [operand, contribution] :
         llvm::zip(op.getOperands(), operandAdjoints))
      if (contribution && isa<FloatType>(operand.getType()))
        accumulate(operand, contribution);
  }
  result.scoreAdjoint = adjoint.lookup(block.getArgument(0));
  if (!result.scoreAdjoint)
    result.scoreAdjoint = constantLike(b, loc, seed, 0.0);
  return result;
}

} // namespace attnc
