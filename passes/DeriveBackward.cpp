// attn-derive-backward: @f -> @f_fwd (saves what backward reuses) and @f_bwd.
#include "dialect/ShapeUtils.h"
#include "passes/Passes.h"
#include "passes/ScalarGradients.h"

#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNDERIVEBACKWARD
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;
using namespace attnc::attn;

namespace {

/// Rejects, with a located error, every op of @f that has no rule.
LogicalResult checkDifferentiable(func::FuncOp func) {
  for (Operation &op : func.getBody().getOps()) {
    if (isa<ProjectionOp, MergeOp, ScoresOp, ScaleOp, MaskOp, SoftmaxOp,
            ApplyOp, CombineOp, DistillOp, arith::ConstantOp, func::ReturnOp>(
            op))
      continue;
    if (auto mod = dyn_cast<ScoreModOp>(op)) {
      if (failed(attnc::checkDifferentiable(mod.getBody(), kNoBackwardHint)))
        return failure();
      continue;
    }
    if (isa<AppendOp>(op))
      return op.emitOpError()
             << "writes into a KV cache, which has no gradient (appends are "
                "for inference)"
             << kNoBackwardHint;
    if (auto attention = dyn_cast<AttentionOp>(op);
        attention && attention.getPages())
      return op.emitOpError()
             << "reads a paged KV cache, which has no gradient (paged caches "
                "are for inference)"
             << kNoBackwardHint;
    if (isa<AttentionOp, AttentionStatsOp>(op)) {
      Region &scoreMod = op.getRegion(0);
      if (!scoreMod.empty() &&
          failed(attnc::checkDifferentiable(scoreMod, kNoBackwardHint)))
        return failure();
      continue;
    }
    return op.emitOpError()
           << "has no gradient rule; attn-derive-backward differentiates attn "
              "ops and constants"
           << kNoBackwardHint;
  }
  return success();
}

/// Builds @f_bwd's body: the recomputed forward values and the reverse sweep.
class BackwardBuilder {
public:
  BackwardBuilder(OpBuilder &b, IRMapping &forward)
      : b(b), forward(forward) {}

  void accumulate(Value original, Value contribution) {
    Value &slot = adjoints[original];
    slot = slot ? arith::AddFOp::create(b, original.getLoc(), slot,
                                        contribution)
                      .getResult()
                : contribution;
  }

  Value adjointOf(Value original) const { return adjoints.lookup(original); }

  Value zerosLike(Location loc, Type type) {
    auto tensor = cast<RankedTensorType>(type);
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(tensor,
                               b.getFloatAttr(tensor.getElementType(), 0.0)));
  }

  /// Applies the rule of one forward op whose results have adjoints.
  void applyRule(Operation *op) {
    Location loc = op->getLoc();
    auto m = [&](Value v) { return forward.lookup(v); };
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](ProjectionOp o) {
          auto grad = ProjectionGradOp::create(
              b, loc, o.getInput().getType(), o.getWeight().getType(),
              m(o.getInput()), m(o.getWeight()), adjointOf(o.getResult()));
          accumulate(o.getInput(), grad.getInputGrad());
          accumulate(o.getWeight(), grad.getWeightGrad());
        })
        .Case([&](MergeOp o) {
          auto grad = MergeGradOp::create(
              b, loc, o.getInput().getType(), o.getWeight().getType(),
              m(o.getInput()), m(o.getWeight()), adjointOf(o.getResult()));
          accumulate(o.getInput(), grad.getInputGrad());
          accumulate(o.getWeight(), grad.getWeightGrad());
        })
        .Case([&](ScoresOp o) {
          // dQ = dS K, dK = dS^T Q (summed over each KV head's group).
          Value g = adjointOf(o.getResult());
          accumulate(o.getQuery(), ApplyOp::create(b, loc,
                                                   o.getQuery().getType(), g,
                                                   m(o.getKey())));
          accumulate(o.getKey(),
                     TransposedApplyOp::create(b, loc, o.getKey().getType(),
                                               g, m(o.getQuery())));
        })
        .Case([&](ScaleOp o) {
          accumulate(o.getScores(),
                     ScaleOp::create(b, loc, o.getType(),
                                     adjointOf(o.getResult()),
                                     b.getF64FloatAttr(
                                         o.getEffectiveFactor())));
        })
        .Case([&](ScoreModOp o) {
          auto grad = ScoreModGradOp::create(
              b, loc, o.getType(), o.getCaptures().getTypes(),
              m(o.getScores()), adjointOf(o.getResult()),
              llvm::map_to_vector(o.getCaptures(), m));
          IRMapping regionMapping;
          o.getBody().cloneInto(&grad.getBody(), regionMapping);
          accumulate(o.getScores(), grad.getScoresGrad());
          accumulateCaptures(o.getCaptures(), grad.getCapturesGrad());
        })
        .Case([&](MaskOp o) {
          // Masked entries get no gradient.
          auto grad = MaskOp::create(
              b, loc, o.getType(), adjointOf(o.getResult()), o.getCausalAttr(),
              b.getUnitAttr(), o.getWindowAttr(), o.getCacheAttr(),
              o.getLengths() ? m(o.getLengths()) : Value(),
              o.getVarlen() ? m(o.getVarlen()) : Value(),
              llvm::map_to_vector(o.getCaptures(), m));
          IRMapping regionMapping;
          o.getMaskMod().cloneInto(&grad.getMaskMod(), regionMapping);
          accumulate(o.getScores(), grad);
        })
        .Case([&](SoftmaxOp o) {
          accumulate(o.getScores(),
                     SoftmaxGradOp::create(b, loc, o.getType(),
                                           m(o.getResult()),
                                           adjointOf(o.getResult())));
        })
        .Case([&](ApplyOp o) {
          // dP = dO V^T, dV = P^T dO.
          Value g = adjointOf(o.getResult());
          accumulate(o.getProbs(),
                     ScoresOp::create(b, loc, o.getProbs().getType(), g,
                                      m(o.getValue())));
          accumulate(o.getValue(),
                     TransposedApplyOp::create(b, loc, o.getValue().getType(),
                                               m(o.getProbs()), g));
        })
        .Case([&](CombineOp o) {
          Value gOutput = adjointOf(o.getOutput());
          if (!gOutput)
            gOutput = zerosLike(loc, o.getOutput().getType());
          SmallVector<Type> types(o.getOutputs().getTypes());
          llvm::append_range(types, o.getLses().getTypes());
          auto grad = CombineGradOp::create(
              b, loc, types, llvm::map_to_vector(o.getOutputs(), m),
              llvm::map_to_vector(o.getLses(), m), gOutput,
              adjointOf(o.getLse()));
          size_t n = o.getOutputs().size();
          for (auto [k, output] : llvm::enumerate(o.getOutputs()))
            accumulate(output, grad.getGrads()[k]);
          for (auto [k, lse] : llvm::enumerate(o.getLses()))
            accumulate(lse, grad.getGrads()[n + k]);
        })
        .Case([&](AttentionStatsOp o) {
          // Only the entropies have a rule: pooled maps and similarities
          // are constants to the backward (their cotangents are ignored).
          Value gEntropy = o.getEntropy() ? adjointOf(o.getEntropy()) : Value();
          Value gMean =
              o.getMeanEntropy() ? adjointOf(o.getMeanEntropy()) : Value();
          if (!gEntropy && !gMean)
            return;
          auto grad = AttentionStatsGradOp::create(
              b, loc, o.getQuery().getType(), o.getKey().getType(),
              o.getLse().getType(), o.getScoreCaptures().getTypes(),
              m(o.getQuery()), m(o.getKey()), m(o.getLse()), gEntropy, gMean,
              o.getScaleAttr(), o.getCausalAttr(), o.getWindowAttr(),
              o.getLengths() ? m(o.getLengths()) : Value(),
              llvm::map_to_vector(o.getScoreCaptures(), m),
              llvm::map_to_vector(o.getMaskCaptures(), m));
          cloneRegions(o, grad);
          accumulate(o.getQuery(), grad.getQueryGrad());
          accumulate(o.getKey(), grad.getKeyGrad());
          accumulate(o.getLse(), grad.getLseGrad());
          accumulateCaptures(o.getScoreCaptures(), grad.getScoreCapturesGrad());
        })
        .Case([&](DistillOp o) {
          // The partial derivatives with both LSEs held fixed; the LSEs'
          // gradients reach each side's attention as its lse_grad.
          auto grad = DistillGradOp::create(
              b, loc, o.getQuery().getType(), o.getKey().getType(),
              o.getLse().getType(), o.getTeacherQuery().getType(),
              o.getTeacherKey().getType(), o.getTeacherLse().getType(),
              m(o.getQuery()), m(o.getKey()), m(o.getLse()),
              m(o.getTeacherQuery()), m(o.getTeacherKey()),
              m(o.getTeacherLse()), adjointOf(o.getKl()), o.getScaleAttr(),
              o.getTeacherScaleAttr(), o.getCausalAttr(), o.getWindowAttr(),
              o.getLengths() ? m(o.getLengths()) : Value(),
              llvm::map_to_vector(o.getMaskCaptures(), m));
          cloneRegions(o, grad);
          accumulate(o.getQuery(), grad.getQueryGrad());
          accumulate(o.getKey(), grad.getKeyGrad());
          accumulate(o.getLse(), grad.getLseGrad());
          accumulate(o.getTeacherQuery(), grad.getTeacherQueryGrad());
          accumulate(o.getTeacherKey(), grad.getTeacherKeyGrad());
          accumulate(o.getTeacherLse(), grad.getTeacherLseGrad());
        })
        .Case([&](AttentionOp o) {
          Value gOutput = adjointOf(o.getOutput());
          if (!gOutput)
            gOutput = zerosLike(loc, o.getOutput().getType());
          auto grad = AttentionGradOp::create(
              b, loc, o.getQuery().getType(), o.getKey().getType(),
              o.getValue().getType(), o.getScoreCaptures().getTypes(),
              m(o.getQuery()), m(o.getKey()), m(o.getValue()), m(o.getOutput()),
              m(o.getLse()), gOutput, adjointOf(o.getLse()), o.getScaleAttr(),
              o.getCausalAttr(), o.getWindowAttr(), o.getCacheAttr(),
              o.getLengths() ? m(o.getLengths()) : Value(),
              o.getVarlen() ? m(o.getVarlen()) : Value(),
              llvm::map_to_vector(o.getScoreCaptures(), m),
              llvm::map_to_vector(o.getMaskCaptures(), m));
          cloneRegions(o, grad);
          accumulate(o.getQuery(), grad.getQueryGrad());
          accumulate(o.getKey(), grad.getKeyGrad());
          accumulate(o.getValue(), grad.getValueGrad());
          accumulateCaptures(o.getScoreCaptures(),
                             grad.getScoreCapturesGrad());
        });
  }

private:
  void accumulateCaptures(ValueRange captures, ValueRange grads) {
    for (auto [capture, grad] : llvm::zip(captures, grads))
      if (isFloatTensor(capture.getType()))
        accumulate(capture, grad);
  }

  OpBuilder &b;
  IRMapping &forward;
  DenseMap<Value, Value> adjoints;
};

/// What the backward reuses and @f does not return: projected Q/K/V and the
/// O and LSE of fused attention. Never S or P.
SmallVector<Value> savedValues(func::FuncOp func, func::ReturnOp ret) {
  llvm::SmallDenseSet<Value> returned(ret.getOperands().begin(),
                                      ret.getOperands().end());
  SmallVector<Value> saved;
  for (Operation &op : func.getBody().getOps())
    if (isa<ProjectionOp, AttentionOp>(op))
      for (Value result : op.getResults())
        if (!returned.contains(result))
          saved.push_back(result);
  return saved;
}

/// Builds @f_fwd at `b`: @f returning the saved values too; when nothing is
/// saved, a call of @f. Either way the object holds one copy of the
/// forward: when something is saved, @f becomes a call of @f_fwd at the end.
func::FuncOp buildForward(OpBuilder &b, func::FuncOp func, StringRef name,
                          ArrayRef<Value> saved) {
  func::FuncOp fwd;
  if (saved.empty()) {
    fwd = func::FuncOp::create(b, func.getLoc(), name, func.getFunctionType());
    OpBuilder body = OpBuilder::atBlockBegin(fwd.addEntryBlock());
    auto call = func::CallOp::create(body, func.getLoc(), func,
                                     fwd.getArguments());
    func::ReturnOp::create(body, func.getLoc(), call.getResults());
  } else {
    IRMapping fwdMapping;
    fwd = cast<func::FuncOp>(func->clone(fwdMapping));
    fwd.setSymName(name);
    b.insert(fwd);
    auto fwdReturn =
        cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
    SmallVector<Value> fwdResults(fwdReturn.getOperands());
    for (Value value : saved)
      fwdResults.push_back(fwdMapping.lookup(value));
    OpBuilder returnBuilder(fwdReturn);
    func::ReturnOp::create(returnBuilder, fwdReturn.getLoc(), fwdResults);
    fwdReturn.erase();
    fwd.setFunctionType(FunctionType::get(func.getContext(),
                                          func.getArgumentTypes(),
                                          ValueRange(fwdResults).getTypes()));
    // @f's result attributes (if any) do not fit @f_fwd's longer results.
    fwd.removeResAttrsAttr();
  }
  // The size query attn-export-abi exports as @f_saved_bytes.
  int64_t savedBytes = 0;
  for (Value value : saved) {
    auto type = cast<RankedTensorType>(value.getType());
    savedBytes +=
        type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }
  fwd->setAttr(AttnDialect::SavedBytesAttrHelper::getNameStr(),
               b.getI64IntegerAttr(savedBytes));
  return fwd;
}

/// @f_bwd(inputs, results, saved, d results) -> d inputs: a cotangent per
/// float result, a gradient per float input.
struct BackwardSignature {
  FunctionType type;
  SmallVector<unsigned> cotangentResults; // @f's results that take one
  SmallVector<unsigned> gradientInputs;   // @f's arguments that get one
};

BackwardSignature backwardSignature(func::FuncOp func, ArrayRef<Value> saved) {
  BackwardSignature signature;
  SmallVector<Type> bwdInputs(func.getArgumentTypes());
  llvm::append_range(bwdInputs, func.getResultTypes());
  for (Value value : saved)
    bwdInputs.push_back(value.getType());
  for (auto [k, type] : llvm::enumerate(func.getResultTypes()))
    if (isFloatTensor(type)) {
      signature.cotangentResults.push_back(k);
      bwdInputs.push_back(type);
    }
  SmallVector<Type> bwdResults;
  for (auto [k, type] : llvm::enumerate(func.getArgumentTypes()))
    if (isFloatTensor(type)) {
      signature.gradientInputs.push_back(k);
      bwdResults.push_back(type);
    }
  signature.type = FunctionType::get(func.getContext(), bwdInputs, bwdResults);
  return signature;
}

/// Maps @f's values into @f_bwd's `block`: inputs, results and saved
/// values to its arguments, the rest recomputed at `b`.
IRMapping recomputeForward(OpBuilder &b, func::FuncOp func, func::ReturnOp ret,
                           ArrayRef<Value> saved, Block *block) {
  IRMapping forward;
  unsigned next = 0;
  for (BlockArgument arg : func.getArguments())
    forward.map(arg, block->getArgument(next++));
  for (Value value : ret.getOperands()) {
    BlockArgument result = block->getArgument(next++);
    if (!isa<BlockArgument>(value) && !forward.contains(value))
      forward.map(value, result);
  }
  for (Value value : saved)
    forward.map(value, block->getArgument(next++));
  // Recompute the forward values that are neither inputs nor saved.
  for (Operation &op : func.getBody().front().without_terminator())
    if (!llvm::all_of(op.getResults(),
                      [&](Value r) { return forward.contains(r); }))
      b.clone(op, forward);
  return forward;
}

/// Builds @f_bwd at `b`: the recomputed forward, then the reverse sweep
/// seeded with the cotangents, returning the float inputs' adjoints (zeros
/// for an input nothing reaches).
void buildBackward(OpBuilder &b, func::FuncOp func, StringRef name,
                   ArrayRef<Value> saved) {
  BackwardSignature signature = backwardSignature(func, saved);
  auto bwd = func::FuncOp::create(b, func.getLoc(), name, signature.type);
  Block *block = bwd.addEntryBlock();
  b.setInsertionPointToStart(block);
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  IRMapping forward = recomputeForward(b, func, ret, saved, block);

  BackwardBuilder backward(b, forward);
  unsigned next = func.getNumArguments() + func.getNumResults() + saved.size();
  for (unsigned k : signature.cotangentResults)
    backward.accumulate(ret.getOperand(k), block->getArgument(next++));
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return backward.adjointOf(r); }))
      backward.applyRule(&op);

  SmallVector<Value> gradients;
  for (unsigned k : signature.gradientInputs) {
    Value g = backward.adjointOf(func.getArgument(k));
    gradients.push_back(
        g ? g : backward.zerosLike(func.getLoc(), func.getArgumentTypes()[k]));
  }
  func::ReturnOp::create(b, func.getLoc(), gradients);
}

/// @f = @f_fwd without the saved values (the cost: @f writes them to
/// buffers it frees; the gain: one forward kernel to compile, not two).
void callForward(func::FuncOp func, func::FuncOp fwd) {
  Block &entry = func.getBody().front();
  while (!entry.empty())
    entry.back().erase();
  OpBuilder body = OpBuilder::atBlockBegin(&entry);
  auto call =
      func::CallOp::create(body, func.getLoc(), fwd, entry.getArguments());
  func::ReturnOp::create(body, func.getLoc(),
                         call.getResults().take_front(func.getNumResults()));
}

LogicalResult deriveFunction(ModuleOp module, func::FuncOp func) {
  if (failed(checkDifferentiable(func)))
    return failure();
  // Resolve 1/sqrt(D) now: the backward recomputes a scale from a block
  // argument when @f returns its scores, and there the default is unknown.
  func.walk([](ScaleOp op) {
    op.setFactorAttr(Builder(op).getF64FloatAttr(op.getEffectiveFactor()));
  });
  std::string fwdName = (func.getSymName() + "_fwd").str();
  std::string bwdName = (func.getSymName() + "_bwd").str();
  for (const std::string &name : {fwdName, bwdName})
    if (SymbolTable::lookupSymbolIn(module, name))
      return func.emitError()
             << "cannot derive @" << name << ": a symbol of that name exists";

  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Value> saved = savedValues(func, ret);
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(func);
  func::FuncOp fwd = buildForward(b, func, fwdName, saved);
  buildBackward(b, func, bwdName, saved);
  if (!saved.empty())
    callForward(func, fwd);
  return success();
}

struct AttnDeriveBackwardPass
    : attnc::impl::AttnDeriveBackwardBase<AttnDeriveBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        functions.push_back(func);
    for (func::FuncOp func : functions)
      if (failed(deriveFunction(module, func)))
        return signalPassFailure();
  }
};

} // namespace
