// Verifiers and helpers of the attn ops.
#include "dialect/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace attnc::attn;

namespace {

/// Checks that `value` is a statically shaped tensor of rank `rank` whose
/// dimensions are all >= 1; `what` names it in the diagnostic.
LogicalResult verifyShape(Operation *op, Value value, int64_t rank,
                          StringRef what) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() != rank)
    return op->emitOpError() << what << " must have rank " << rank
                             << ", got " << type;
  if (!type.hasStaticShape())
    return op->emitOpError() << what << " must have a static shape, got "
                             << type;
  for (int64_t dim : type.getShape())
    if (dim < 1)
      return op->emitOpError()
             << what << " must have every dimension >= 1, got " << type;
  return success();
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}
ArrayRef<int64_t> shapeOf(Type type) {
  return cast<RankedTensorType>(type).getShape();
}
Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

/// Checks the expected shape of a result or operand, dimension by dimension.
LogicalResult verifyExpectedShape(Operation *op, Type actual,
                                  ArrayRef<int64_t> expected,
                                  StringRef what) {
  if (shapeOf(actual) != expected) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::interleave(expected, os, "x");
    return op->emitOpError() << what << " must have shape " << text
                             << ", got " << actual;
  }
  return success();
}

LogicalResult verifySameElementType(Operation *op, Value a, Value b,
                                    StringRef whatA, StringRef whatB) {
  if (elementTypeOf(a) != elementTypeOf(b))
    return op->emitOpError() << whatA << " and " << whatB
                             << " must have the same element type, got "
                             << elementTypeOf(a) << " and " << elementTypeOf(b);
  return success();
}

/// Verifies a score_mod (withScore) or mask_mod region: its block signature
/// (score?, b, h, i, j, captures...), its attn.yield of `yieldType`, and
/// that every op inside is free of side effects.
LogicalResult verifyModRegion(Operation *op, Region &region, StringRef name,
                              bool withScore, TypeRange captureTypes,
                              Type yieldType) {
  Block &block = region.front();
  unsigned numLeading = withScore ? 5 : 4;
  unsigned expectedArgs = numLeading + captureTypes.size();
  if (block.getNumArguments() != expectedArgs)
    return op->emitOpError()
           << name << " region must have " << expectedArgs << " arguments ("
           << (withScore ? "score: f32, " : "")
           << "b, h, i, j: index, then one per capture), got "
           << block.getNumArguments();
  unsigned argIndex = 0;
  if (withScore) {
    if (!block.getArgument(0).getType().isF32())
      return op->emitOpError() << name << " region argument 0 (the score) "
                               << "must be f32, got "
                               << block.getArgument(0).getType();
    argIndex = 1;
  }
  for (unsigned k = 0; k < 4; ++k, ++argIndex)
    if (!block.getArgument(argIndex).getType().isIndex())
      return op->emitOpError()
             << name << " region argument " << argIndex << " ("
             << "bhij"[k] << ") must be index, got "
             << block.getArgument(argIndex).getType();
  for (auto [k, type] : llvm::enumerate(captureTypes))
    if (block.getArgument(numLeading + k).getType() != type)
      return op->emitOpError()
             << name << " region argument " << numLeading + k
             << " must match capture " << k << " of type " << type
             << ", got " << block.getArgument(numLeading + k).getType();

  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return op->emitOpError() << name << " region must end with attn.yield";
  if (yield.getValue().getType() != yieldType)
    return yield.emitOpError() << "in a " << name << " region must yield "
                               << yieldType << ", got "
                               << yield.getValue().getType();

  // Regions are scalar code: arith, math and scf, reads of captured tensors,
  // all free of side effects (they are cloned into loop bodies and, later,
  // differentiated).
  WalkResult walk = region.walk([&](Operation *inner) {
    if (isa<YieldOp>(inner)) {
      if (inner->getBlock() == &block)
        return WalkResult::advance();
      inner->emitOpError() << "must terminate the " << name
                           << " region itself, not a nested region";
      return WalkResult::interrupt();
    }
    Dialect *dialect = inner->getDialect();
    bool allowed =
        dialect && (isa<arith::ArithDialect, math::MathDialect>(dialect) ||
                    dialect->getNamespace() == "scf" ||
                    isa<tensor::ExtractOp, tensor::DimOp>(inner));
    if (!allowed) {
      inner->emitOpError() << "is not allowed in a " << name
                           << " region: use arith, math and scf ops and "
                              "tensor.extract of captures";
      return WalkResult::interrupt();
    }
    if (!isMemoryEffectFree(inner)) {
      inner->emitOpError() << "is not allowed in a " << name
                           << " region: its ops must be free of side effects";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Verifies the named mask options shared by attn.mask and attn.attention.
LogicalResult verifyMaskOptions(Operation *op, std::optional<int64_t> window,
                                Value lengths, int64_t batch) {
  if (window && *window < 1)
    return op->emitOpError() << "window must be >= 1, got " << *window;
  if (lengths) {
    if (failed(verifyShape(op, lengths, 1, "lengths")))
      return failure();
    if (shapeOf(lengths)[0] != batch)
      return op->emitOpError() << "lengths must have one entry per batch ("
                               << batch << "), got " << lengths.getType();
  }
  return success();
}

/// Scores are f32: the factor must stay finite and non-zero in f32.
LogicalResult verifyScaleValue(Operation *op, double scale, StringRef what) {
  float rounded = float(scale);
  if (!std::isfinite(rounded) || rounded == 0.0f)
    return op->emitOpError() << what
                             << " must be finite and non-zero in f32, got "
                             << scale;
  return success();
}

/// Checks Q[B,H,Sq,D] against K[B,Hkv,Skv,D] (GQA: H % Hkv == 0).
LogicalResult verifyQueryKey(Operation *op, Value query, Value key) {
  if (failed(verifyShape(op, query, 4, "query")) ||
      failed(verifyShape(op, key, 4, "key")) ||
      failed(verifySameElementType(op, query, key, "query", "key")))
    return failure();
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  if (q[0] != k[0])
    return op->emitOpError() << "query and key batch sizes differ: " << q[0]
                             << " vs " << k[0];
  if (q[3] != k[3])
    return op->emitOpError() << "query and key head dimensions differ: "
                             << q[3] << " vs " << k[3];
  if (q[1] % k[1] != 0)
    return op->emitOpError()
           << "query heads (" << q[1] << ") must be a multiple of key heads ("
           << k[1] << ") for GQA/MQA";
  return success();
}

/// Checks P or S [B,H,Sq,Skv] against V[B,Hkv,Skv,Dv] (GQA: H % Hkv == 0).
LogicalResult verifyProbsValue(Operation *op, ArrayRef<int64_t> p,
                               Value value) {
  if (failed(verifyShape(op, value, 4, "value")))
    return failure();
  ArrayRef<int64_t> v = shapeOf(value);
  if (p[0] != v[0])
    return op->emitOpError() << "batch sizes differ: " << p[0] << " vs "
                             << v[0] << " (value)";
  if (p[3] != v[2])
    return op->emitOpError() << "key length " << p[3]
                             << " differs from value length " << v[2];
  if (p[1] % v[1] != 0)
    return op->emitOpError()
           << "query heads (" << p[1]
           << ") must be a multiple of value heads (" << v[1] << ")";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// ProjectionOp / MergeOp
//===----------------------------------------------------------------------===//

LogicalResult ProjectionOp::verify() {
  if (failed(verifyShape(*this, getInput(), 3, "input")) ||
      failed(verifyShape(*this, getWeight(), 2, "weight")) ||
      failed(verifyShape(*this, getResult(), 4, "result")) ||
      failed(verifySameElementType(*this, getInput(), getWeight(), "input",
                                   "weight")) ||
      failed(verifySameElementType(*this, getInput(), getResult(), "input",
                                   "result")))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getInput()), w = shapeOf(getWeight()),
                    r = shapeOf(getResult());
  if (x[2] != w[0])
    return emitOpError() << "input features (" << x[2]
                         << ") must equal weight rows (" << w[0] << ")";
  if (w[1] != r[1] * r[3])
    return emitOpError() << "weight columns (" << w[1]
                         << ") must equal heads * head dim (" << r[1] << " * "
                         << r[3] << ")";
  return verifyExpectedShape(*this, getResult().getType(),
                             {x[0], r[1], x[1], r[3]}, "result");
}

LogicalResult MergeOp::verify() {
  if (failed(verifyShape(*this, getInput(), 4, "input")) ||
      failed(verifyShape(*this, getWeight(), 2, "weight")) ||
      failed(verifyShape(*this, getResult(), 3, "result")) ||
      failed(verifySameElementType(*this, getInput(), getWeight(), "input",
                                   "weight")) ||
      failed(verifySameElementType(*this, getInput(), getResult(), "input",
                                   "result")))
    return failure();
  ArrayRef<int64_t> o = shapeOf(getInput()), w = shapeOf(getWeight());
  if (w[0] != o[1] * o[3])
    return emitOpError() << "weight rows (" << w[0]
                         << ") must equal heads * head dim (" << o[1] << " * "
                         << o[3] << ")";
  return verifyExpectedShape(*this, getResult().getType(), {o[0], o[2], w[1]},
                             "result");
}

//===----------------------------------------------------------------------===//
// ScoresOp / ScaleOp / ScoreModOp / MaskOp / SoftmaxOp / ApplyOp
//===----------------------------------------------------------------------===//

LogicalResult ScoresOp::verify() {
  if (failed(verifyQueryKey(*this, getQuery(), getKey())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey());
  return verifyExpectedShape(*this, getResult().getType(),
                             {q[0], q[1], q[2], k[2]}, "result");
}

double ScaleOp::getEffectiveFactor() {
  if (FloatAttr factor = getFactorAttr())
    return factor.getValueAsDouble();
  auto scores = getScores().getDefiningOp<ScoresOp>();
  return 1.0 / std::sqrt(double(shapeOf(scores.getQuery())[3]));
}

LogicalResult ScaleOp::verify() {
  if (failed(verifyShape(*this, getScores(), 4, "scores")))
    return failure();
  if (FloatAttr factor = getFactorAttr())
    return verifyScaleValue(*this, factor.getValueAsDouble(), "factor");
  if (!getScores().getDefiningOp<ScoresOp>())
    return emitOpError("without 'by' needs its operand produced by "
                       "attn.scores, to take the default 1/sqrt(D)");
  return success();
}

LogicalResult ScoreModOp::verify() {
  if (failed(verifyShape(*this, getScores(), 4, "scores")))
    return failure();
  return verifyModRegion(*this, getBody(), "score_mod", /*withScore=*/true,
                         getCaptures().getTypes(),
                         Float32Type::get(getContext()));
}

LogicalResult MaskOp::verify() {
  if (failed(verifyShape(*this, getScores(), 4, "scores")) ||
      failed(verifyMaskOptions(*this, getWindow(), getLengths(),
                               shapeOf(getScores())[0])))
    return failure();
  if (getMaskMod().empty()) {
    if (!getCaptures().empty())
      return emitOpError("has captures but no mask_mod region to use them");
    if (!getCausal() && !getWindow() && !getLengths())
      return emitOpError("masks nothing: give causal, window, lengths or a "
                         "mask_mod region");
    return success();
  }
  return verifyModRegion(*this, getMaskMod(), "mask_mod", /*withScore=*/false,
                         getCaptures().getTypes(),
                         IntegerType::get(getContext(), 1));
}

LogicalResult SoftmaxOp::verify() {
  return verifyShape(*this, getScores(), 4, "scores");
}

LogicalResult ApplyOp::verify() {
  if (failed(verifyShape(*this, getProbs(), 4, "probs")) ||
      failed(verifyShape(*this, getResult(), 4, "result")) ||
      failed(verifySameElementType(*this, getValue(), getResult(), "value",
                                   "result")) ||
      failed(verifyProbsValue(*this, shapeOf(getProbs()), getValue())))
    return failure();
  ArrayRef<int64_t> p = shapeOf(getProbs()), v = shapeOf(getValue());
  return verifyExpectedShape(*this, getResult().getType(),
                             {p[0], p[1], p[2], v[3]}, "result");
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

double AttentionOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(double(shapeOf(getQuery())[3]));
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyQueryKey(*this, getQuery(), getKey())) ||
      failed(verifySameElementType(*this, getQuery(), getValue(), "query",
                                   "value")) ||
      failed(verifySameElementType(*this, getValue(), getOutput(), "value",
                                   "output")))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey());
  if (failed(verifyProbsValue(*this, {q[0], q[1], q[2], k[2]}, getValue())))
    return failure();
  ArrayRef<int64_t> v = shapeOf(getValue());
  if (v[1] != k[1])
    return emitOpError() << "key and value head counts differ: " << k[1]
                         << " vs " << v[1];
  if (failed(verifyExpectedShape(*this, getOutput().getType(),
                                 {q[0], q[1], q[2], v[3]}, "output")) ||
      failed(verifyExpectedShape(*this, getLse().getType(), {q[0], q[1], q[2]},
                                 "lse")))
    return failure();
  if (FloatAttr scale = getScaleAttr())
    if (failed(verifyScaleValue(*this, scale.getValueAsDouble(), "scale")))
      return failure();
  if (failed(verifyMaskOptions(*this, getWindow(), getLengths(), q[0])))
    return failure();
  if (getScoreMod().empty()) {
    if (!getScoreCaptures().empty())
      return emitOpError("has score_captures but no score_mod region");
  } else if (failed(verifyModRegion(*this, getScoreMod(), "score_mod", true,
                                    getScoreCaptures().getTypes(),
                                    Float32Type::get(getContext())))) {
    return failure();
  }
  if (getMaskMod().empty()) {
    if (!getMaskCaptures().empty())
      return emitOpError("has mask_captures but no mask_mod region");
    return success();
  }
  return verifyModRegion(*this, getMaskMod(), "mask_mod", false,
                         getMaskCaptures().getTypes(),
                         IntegerType::get(getContext(), 1));
}

#define GET_OP_CLASSES
#include "dialect/AttnOps.cpp.inc"
