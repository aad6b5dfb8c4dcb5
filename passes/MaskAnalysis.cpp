// mask_mod regions as named masks (see MaskAnalysis.h).
#include "passes/MaskAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace attnc {

namespace {

/// a * i + c * j + k over index values; nullopt when not affine in i, j.
struct Affine {
  int64_t a = 0, c = 0, k = 0;
};

std::optional<Affine> affineOf(Value v, Value i, Value j, unsigned depth = 0) {
  if (depth > 16 || !v.getType().isIndex())
    return std::nullopt;
  if (v == i)
    return Affine{1, 0, 0};
  if (v == j)
    return Affine{0, 1, 0};
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant)))
    return Affine{0, 0, constant.getSExtValue()};
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<Affine> x = affineOf(op->getOperand(0), i, j, depth + 1);
  std::optional<Affine> y = affineOf(op->getOperand(1), i, j, depth + 1);
  if (!x || !y)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return Affine{x->a + y->a, x->c + y->c, x->k + y->k};
  if (isa<arith::SubIOp>(op))
    return Affine{x->a - y->a, x->c - y->c, x->k - y->k};
  if (isa<arith::MulIOp>(op)) {
    if (!x->a && !x->c)
      std::swap(x, y);
    if (y->a || y->c)
      return std::nullopt; // i * j: not affine
    return Affine{x->a * y->k, x->c * y->k, x->k * y->k};
  }
  return std::nullopt;
}

/// A conjunct `cmp` as bounds on d = i - j, when it is one.
bool addBounds(arith::CmpIOp cmp, Value i, Value j, IndexBounds &bounds) {
  std::optional<Affine> l = affineOf(cmp.getLhs(), i, j),
                        r = affineOf(cmp.getRhs(), i, j);
  if (!l || !r)
    return false;
  // e = lhs - rhs = s * d + k with s = +-1.
  Affine e{l->a - r->a, l->c - r->c, l->k - r->k};
  if (e.a != -e.c || (e.a != 1 && e.a != -1))
    return false;
  int64_t s = e.a, k = e.k;
  // Unsigned compares agree with signed ones when both sides are known
  // non-negative (i, j, a non-negative constant); `e' <u W` with a
  // constant W >= 0 also says e' >= 0.
  auto nonNegative = [&](const Affine &x) {
    return (x.a == 1 && !x.c && !x.k) || (!x.a && x.c == 1 && !x.k) ||
           (!x.a && !x.c && x.k >= 0);
  };
  arith::CmpIPredicate p = cmp.getPredicate();
  bool isUnsigned = p == arith::CmpIPredicate::ult ||
                    p == arith::CmpIPredicate::ule ||
                    p == arith::CmpIPredicate::ugt ||
                    p == arith::CmpIPredicate::uge;
  std::optional<int64_t> lo, hi; // on e: lo <= e <= hi
  switch (p) {
  case arith::CmpIPredicate::slt:
  case arith::CmpIPredicate::ult:
    hi = -1;
    break;
  case arith::CmpIPredicate::sle:
  case arith::CmpIPredicate::ule:
    hi = 0;
    break;
  case arith::CmpIPredicate::sgt:
  case arith::CmpIPredicate::ugt:
    lo = 1;
    break;
  case arith::CmpIPredicate::sge:
  case arith::CmpIPredicate::uge:
    lo = 0;
    break;
  default:
    return false; // eq, ne
  }
  std::optional<int64_t> extraLo; // on lhs, for `lhs <u W`
  if (isUnsigned && !(nonNegative(*l) && nonNegative(*r))) {
    bool lhsBelowConstant =
        (p == arith::CmpIPredicate::ult || p == arith::CmpIPredicate::ule) &&
        !r->a && !r->c && r->k >= 0;
    if (!lhsBelowConstant)
      return false;
    extraLo = 0; // lhs >= 0, and lhs = e + r.k
  }
  // e = s * d + k  =>  bounds on d.
  auto onD = [&](int64_t bound, bool isLo) {
    int64_t v = bound - k; // s * d (>= or <=) v
    bool lower = (s == 1) == isLo;
    std::optional<int64_t> &slot = lower ? bounds.lo : bounds.hi;
    int64_t d = s == 1 ? v : -v;
    slot = !slot ? d : lower ? std::max(*slot, d) : std::min(*slot, d);
  };
  if (lo)
    onD(*lo, true);
  if (hi)
    onD(*hi, false);
  if (extraLo)
    onD(*extraLo - r->k, true); // lhs >= 0  <=>  e >= -r.k
  return true;
}

/// Collects the conjuncts of `v`; returns whether every one is a bound.
bool collect(Value v, Value i, Value j, IndexBounds &bounds) {
  if (auto andOp = v.getDefiningOp<arith::AndIOp>())
    return collect(andOp.getLhs(), i, j, bounds) &
           collect(andOp.getRhs(), i, j, bounds);
  if (auto cmp = v.getDefiningOp<arith::CmpIOp>())
    return addBounds(cmp, i, j, bounds);
  return matchPattern(v, m_One()); // `true` says nothing

}

template <typename OpTy> bool promote(OpTy op) {
  Region &region = op.getMaskMod();
  if (region.empty())
    return false;
  // A cache's named masks compare keys with positions, its region with
  // rows: a bound on j - i is not one of them.
  if (attn::isCache(op))
    return false;
  IndexBounds bounds = analyzeMaskMod(region);
  bool causal = op.getCausal() || op.getWindow() ||
                (bounds.lo && *bounds.lo >= 0);
  std::optional<uint64_t> window = op.getWindow();
  if (causal && bounds.hi && *bounds.hi >= 0) {
    uint64_t w = uint64_t(*bounds.hi) + 1;
    window = window ? std::min(*window, w) : w;
  }
  // Drop the region when the named masks imply each of its conjuncts.
  bool implied = bounds.exact &&
                 (!bounds.lo || (causal && *bounds.lo <= 0)) &&
                 (!bounds.hi || (window && int64_t(*window) - 1 <= *bounds.hi));
  bool changed = false;
  if (causal && !op.getCausal() && !op.getWindow()) {
    op.setCausal(true);
    changed = true;
  }
  if (window != op.getWindow()) {
    op.setWindow(*window);
    changed = true;
  }
  if (implied) {
    op.getMaskCapturesMutable().clear();
    region.dropAllReferences();
    region.getBlocks().clear();
    changed = true;
  }
  return changed;
}

} // namespace

IndexBounds analyzeMaskMod(Region &maskMod) {
  IndexBounds bounds;
  Block &block = maskMod.front();
  if (block.getNumArguments() < 4)
    return bounds;
  Value i = block.getArgument(2), j = block.getArgument(3);
  Operation *yield = block.getTerminator();
  if (yield->getNumOperands() != 1)
    return bounds;
  bounds.exact = collect(yield->getOperand(0), i, j, bounds);
  return bounds;
}

bool promoteMaskMod(attn::AttentionOp op) { return promote(op); }
bool promoteMaskMod(attn::AttentionGradOp op) { return promote(op); }
bool promoteMaskMod(attn::AttentionStatsGradOp op) { return promote(op); }

bool promoteMaskModOfFusedOp(Operation *op) {
  if (auto fwd = dyn_cast<attn::AttentionOp>(op))
    promote(fwd);
  else if (auto grad = dyn_cast<attn::AttentionGradOp>(op))
    promote(grad);
  else if (auto stats = dyn_cast<attn::AttentionStatsOp>(op))
    promote(stats);
  else if (auto statsGrad = dyn_cast<attn::AttentionStatsGradOp>(op))
    promote(statsGrad);
  else if (auto distill = dyn_cast<attn::DistillOp>(op))
    promote(distill);
  else if (auto distillGrad = dyn_cast<attn::DistillGradOp>(op))
    promote(distillGrad);
  else
    return false;
  return true;
}

} // namespace attnc
