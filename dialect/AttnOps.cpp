// Verifiers and helpers of the attn ops.
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace attnc::attn;
using attnc::elementTypeOf;
using attnc::shapeOf;

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

/// The custom<...KeywordCheck> directive of an op's syntax, placed after its
/// optional keywords and before its `:`: it parses nothing when a `{` or the
/// `:` comes next, and otherwise reports the word there (a misspelt keyword
/// such as `casual`, or a keyword out of order) rather than the generic
/// "expected ':'". `keywords` are those the syntax takes before the `:`, in
/// its order; `regionKeywords` those of regions after the result types.
/// (MLIR prefixes the errors with "custom op 'attn.<name>'".)
ParseResult parseKeywordCheck(OpAsmParser &parser, ArrayRef<StringRef> keywords,
                              ArrayRef<StringRef> regionKeywords) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (failed(parser.parseOptionalKeyword(&word)))
    return success();
  auto quoted = [](ArrayRef<StringRef> words) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::interleave(
        words, os, [&](StringRef w) { os << "'" << w << "'"; }, ", ");
    return text;
  };
  if (llvm::is_contained(keywords, word))
    return parser.emitError(loc)
           << "keyword '" << word
           << "' repeated or out of order; the keywords come in this order: "
           << quoted(keywords);
  if (llvm::is_contained(regionKeywords, word))
    return parser.emitError(loc)
           << "the '" << word
           << "' region comes after the result types (`: ... -> ... " << word
           << " { ... }`)";
  StringRef best;
  unsigned bestDistance = ~0u;
  for (ArrayRef<StringRef> list : {keywords, regionKeywords})
    for (StringRef candidate : list) {
      unsigned distance = word.edit_distance(candidate);
      if (distance < bestDistance) {
        best = candidate;
        bestDistance = distance;
      }
    }
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown keyword '" << word << "'";
  if (!best.empty() && bestDistance <= (word.size() + 2) / 3) {
    diag << "; did you mean '" << best << "'?";
    return diag;
  }
  diag << "; before the ':' come " << quoted(keywords) << " (in this order)";
  if (!regionKeywords.empty())
    diag << ", after the result types the regions " << quoted(regionKeywords);
  return diag;
}

ParseResult parseAttentionKeywordCheck(OpAsmParser &parser, IntegerAttr) {
  return parseKeywordCheck(parser,
                           {"scale", "causal", "window", "cache", "lengths",
                            "varlen", "pages", "score_captures",
                            "mask_captures"},
                           {"score_mod", "mask_mod"});
}

ParseResult parseAttentionGradKeywordCheck(OpAsmParser &parser, IntegerAttr) {
  return parseKeywordCheck(parser,
                           {"lse_grad", "scale", "causal", "window", "cache",
                            "lengths", "varlen", "score_captures",
                            "mask_captures"},
                           {"score_mod", "mask_mod"});
}

ParseResult parseAttentionStatsGradKeywordCheck(OpAsmParser &parser,
                                                IntegerAttr) {
  return parseKeywordCheck(parser,
                           {"entropy_grad", "mean_entropy_grad", "scale",
                            "causal", "window", "lengths", "score_captures",
                            "mask_captures"},
                           {"score_mod", "mask_mod"});
}

/// attn.distill and attn.distill_grad: their keywords, and a word for a
/// score_mod's, which this version does not take.
ParseResult parseDistillKeywordCheck(OpAsmParser &parser, IntegerAttr) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword("score_captures")))
    return parser.emitError(loc)
           << "takes no score_captures: attn.distill has no score_mod region";
  return parseKeywordCheck(parser,
                           {"scale", "teacher_scale", "causal", "window",
                            "lengths", "mask_captures"},
                           {"mask_mod"});
}

/// After attn.distill(_grad)'s result types: a score_mod region is refused
/// by name (the generic error would be about the expected end of the op).
ParseResult parseDistillRegionCheck(OpAsmParser &parser, IntegerAttr) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword("score_mod")))
    return parser.emitError(loc)
           << "has no score_mod region (this version of attn.distill takes "
              "a mask_mod only)";
  return success();
}

ParseResult parseMaskKeywordCheck(OpAsmParser &parser, IntegerAttr) {
  return parseKeywordCheck(parser,
                           {"causal", "window", "cache", "lengths", "varlen",
                            "captures", "zero_fill"},
                           {});
}

/// The checks print nothing (the IntegerAttr, the window, is unused: a
/// custom directive needs an argument).
void printAttentionKeywordCheck(OpAsmPrinter &, Operation *, IntegerAttr) {}
void printMaskKeywordCheck(OpAsmPrinter &, Operation *, IntegerAttr) {}
void printAttentionGradKeywordCheck(OpAsmPrinter &, Operation *, IntegerAttr) {}
void printAttentionStatsGradKeywordCheck(OpAsmPrinter &, Operation *,
                                         IntegerAttr) {}
void printDistillKeywordCheck(OpAsmPrinter &, Operation *, IntegerAttr) {}
void printDistillRegionCheck(OpAsmPrinter &, Operation *, IntegerAttr) {}

/// The integer divisions and remainders, undefined behaviour by zero.
bool isIntegerDivision(Operation *op) {
  return isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
             arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp>(op);
}

/// Checks of a region op's values that need no run time: an integer
/// division by a constant 0, and a tensor.extract index out of its
/// capture's bounds, either a constant or, in the region's own block
/// (ops there run for every (b, h, i, j)), the b or h argument itself,
/// which takes every value below B or H. (i and j are left alone: a mask
/// may hide the keys where they run past a capture.)
LogicalResult verifyRegionValues(Operation *inner, Block &block, StringRef name,
                                 unsigned firstIndexArg,
                                 ArrayRef<int64_t> scoresShape) {
  APInt constant;
  if (isIntegerDivision(inner) &&
      matchPattern(inner->getOperand(1), m_ConstantInt(&constant)) &&
      constant.isZero())
    return inner->emitOpError()
           << "divides by a constant 0 in a " << name
           << " region (undefined behaviour: no value to compute)";
  auto extract = dyn_cast<tensor::ExtractOp>(inner);
  if (!extract)
    return success();
  ArrayRef<int64_t> shape = extract.getTensor().getType().getShape();
  for (auto [dim, index] : llvm::enumerate(extract.getIndices())) {
    if (ShapedType::isDynamic(shape[dim]))
      continue;
    if (matchPattern(index, m_ConstantInt(&constant))) {
      int64_t value = constant.getSExtValue();
      if (value < 0 || value >= shape[dim])
        return extract.emitOpError()
               << "index " << value << " is out of bounds for dimension " << dim
               << " of size " << shape[dim];
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(index);
    if (!arg || arg.getOwner() != &block || inner->getBlock() != &block ||
        scoresShape.size() != 4)
      continue;
    unsigned which = arg.getArgNumber() - firstIndexArg;
    if (which < 2 && scoresShape[which] > shape[dim])
      return extract.emitOpError()
             << "index "
             << "bh"[which] << " takes values up to " << scoresShape[which] - 1
             << ", out of bounds for dimension " << dim << " of size "
             << shape[dim];
  }
  return success();
}

/// Verifies a score_mod (withScore) or mask_mod region: its block signature
/// (score?, b, h, i, j, captures...), its attn.yield of `yieldType`, that
/// every op inside is free of side effects, and what verifyRegionValues
/// checks (`scoresShape` is [B, H, Sq, Skv]).
LogicalResult verifyModRegion(Operation *op, Region &region, StringRef name,
                              bool withScore, TypeRange captureTypes,
                              Type yieldType, ArrayRef<int64_t> scoresShape) {
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
    // The float classes have no CPU lowering (MLIR 22 converts them
    // neither to LLVM nor to libm calls).
    if (isa<math::IsInfOp, math::IsNaNOp, math::IsFiniteOp, math::IsNormalOp>(
            inner)) {
      inner->emitOpError()
          << "is not supported in a " << name
          << " region: use arith.cmpf (isinf: oeq |x|, inf; isnan: uno x, x; "
             "isfinite: olt |x|, inf)";
      return WalkResult::interrupt();
    }
    // No lowering either; MLIR 22's math-expand-ops gives
    // maximumf(minimumf(x, lo), hi), which is not a clamp.
    if (isa<math::ClampFOp>(inner)) {
      inner->emitOpError() << "is not supported in a " << name
                           << " region: use arith.maximumf and arith.minimumf";
      return WalkResult::interrupt();
    }
    if (!isMemoryEffectFree(inner)) {
      inner->emitOpError() << "is not allowed in a " << name
                           << " region: its ops must be free of side effects";
      return WalkResult::interrupt();
    }
    if (failed(verifyRegionValues(inner, block, name, numLeading - 4,
                                  scoresShape)))
      return WalkResult::interrupt();
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

/// `varlen(%cu)`: n + 1 >= 2 offsets of packed sequences that cut the rows
/// and the keys alike (Sq == Skv), which a cache's rows (at the end of each
/// batch's keys) cannot be; constant offsets are checked here, an
/// argument's by the entry points.
LogicalResult verifyVarlen(Operation *op, Value varlen, bool cache, int64_t sq,
                           int64_t skv) {
  if (!varlen)
    return success();
  if (failed(verifyShape(op, varlen, 1, "varlen")))
    return failure();
  if (shapeOf(varlen)[0] < 2)
    return op->emitOpError()
           << "varlen needs n + 1 >= 2 offsets (n packed sequences), got "
           << varlen.getType();
  if (cache)
    return op->emitOpError(
        "takes 'varlen' or 'cache', not both: a cache's queries are the last "
        "tokens of each batch's keys, packed sequences cut rows and keys "
        "alike");
  if (sq != skv)
    return op->emitOpError()
           << "with varlen, queries and keys are packed alike: Sq must equal "
              "Skv, got "
           << sq << " and " << skv;
  DenseIntElementsAttr offsets;
  if (!matchPattern(varlen, m_Constant(&offsets)))
    return success();
  int64_t previous = 0, d = 0;
  for (APInt x : offsets.getValues<APInt>()) {
    int64_t cu = x.getSExtValue();
    if (cu < previous || cu > skv)
      return op->emitOpError()
             << "varlen offset " << d << " is " << cu
             << ": the offsets must be nondecreasing, from 0 up to Skv (" << skv
             << ")";
    previous = cu;
    ++d;
  }
  return success();
}

/// `cache` moves the queries to the end of the keys, which only the causal
/// and window masks read: alone it would mean nothing.
LogicalResult verifyCache(Operation *op, bool cache, bool causal,
                          std::optional<int64_t> window) {
  if (cache && !causal && !window)
    return op->emitOpError(
        "'cache' needs 'causal' or 'window': it places the queries at the "
        "end of each batch's keys, which only those masks read");
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

/// Checks Q[B,H,Sq,D] against K[B,Hkv,Skv,D] (GQA: H % Hkv == 0); the
/// diagnostics call them `queryName` and `keyName`. With `pagedKey`, K is a
/// pool of pages [N,Hkv,P,D], whose first dimension is not the batch.
LogicalResult verifyQueryKey(Operation *op, Value query, Value key,
                             StringRef queryName = "query",
                             StringRef keyName = "key", bool pagedKey = false) {
  if (failed(verifyShape(op, query, 4, queryName)) ||
      failed(verifyShape(op, key, 4, keyName)) ||
      failed(verifySameElementType(op, query, key, queryName, keyName)))
    return failure();
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  if (!pagedKey && q[0] != k[0])
    return op->emitOpError()
           << queryName << " and " << keyName << " batch sizes differ: " << q[0]
           << " vs " << k[0];
  if (q[3] != k[3])
    return op->emitOpError()
           << queryName << " and " << keyName
           << " head dimensions differ: " << q[3] << " vs " << k[3];
  if (q[1] % k[1] != 0)
    return op->emitOpError()
           << queryName << " heads (" << q[1] << ") must be a multiple of "
           << keyName << " heads (" << k[1] << ") for GQA/MQA";
  return success();
}

/// Checks a paged KV cache: Q[B,H,Sq,D], pools of pages K[N,Hkv,P,D] and
/// V[N,Hkv,P,Dv] and the block table [B, M], with `cache` and `lengths`.
LogicalResult verifyPagedCache(Operation *op, Value query, Value key,
                               Value value, Value table, bool cache,
                               Value lengths) {
  if (!cache || !lengths)
    return op->emitOpError(
        "'pages' needs 'cache' and 'lengths': a paged KV cache holds each "
        "batch's first lengths[b] tokens");
  if (failed(verifyQueryKey(op, query, key, "query", "key",
                            /*pagedKey=*/true)) ||
      failed(verifyShape(op, value, 4, "value")) ||
      failed(verifyShape(op, table, 2, "pages")) ||
      failed(verifySameElementType(op, query, value, "query", "value")))
    return failure();
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key), v = shapeOf(value),
                    t = shapeOf(table);
  if (t[0] != q[0])
    return op->emitOpError() << "pages must have one row per batch (" << q[0]
                             << "), got " << table.getType();
  if (v[0] != k[0] || v[2] != k[2])
    return op->emitOpError()
           << "key and value pools must have the same pages of the same "
              "size: "
           << key.getType() << " vs " << value.getType();
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
                         Float32Type::get(getContext()), shapeOf(getScores()));
}

LogicalResult MaskOp::verify() {
  if (failed(verifyShape(*this, getScores(), 4, "scores")) ||
      failed(verifyMaskOptions(*this, getWindow(), getLengths(),
                               shapeOf(getScores())[0])) ||
      failed(verifyCache(*this, getCache(), getCausal(), getWindow())) ||
      failed(verifyVarlen(*this, getVarlen(), getCache(),
                          shapeOf(getScores())[2], shapeOf(getScores())[3])))
    return failure();
  if (getMaskMod().empty()) {
    if (!getCaptures().empty())
      return emitOpError("has captures but no mask_mod region to use them");
    if (!getCausal() && !getWindow() && !getLengths() && !getVarlen())
      return emitOpError("masks nothing: give causal, window, lengths, "
                         "varlen or a mask_mod region");
    return success();
  }
  return verifyModRegion(*this, getMaskMod(), "mask_mod", /*withScore=*/false,
                         getCaptures().getTypes(),
                         IntegerType::get(getContext(), 1),
                         shapeOf(getScores()));
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

/// The checks every op with attention's score options shares: the scale,
/// the mask options and both regions over scores [B, H, Sq, Skv].
template <typename OpTy> static LogicalResult verifyScoreOptions(OpTy op) {
  Operation *raw = op.getOperation();
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  if (FloatAttr scale = op.getScaleAttr())
    if (failed(verifyScaleValue(raw, scale.getValueAsDouble(), "scale")))
      return failure();
  if (failed(verifyMaskOptions(raw, op.getWindow(), op.getLengths(), q[0])))
    return failure();
  if (failed(verifyCache(raw, isCache(op), op.getCausal(), op.getWindow())) ||
      failed(
          verifyVarlen(raw, varlenOf(op), isCache(op), q[2], keyCountOf(op))))
    return failure();
  SmallVector<int64_t, 4> scores = {q[0], q[1], q[2], keyCountOf(op)};
  if (op.getScoreMod().empty()) {
    if (!op.getScoreCaptures().empty())
      return op.emitOpError("has score_captures but no score_mod region");
  } else if (failed(verifyModRegion(raw, op.getScoreMod(), "score_mod", true,
                                    op.getScoreCaptures().getTypes(),
                                    Float32Type::get(op.getContext()),
                                    scores))) {
    return failure();
  }
  if (op.getMaskMod().empty()) {
    if (!op.getMaskCaptures().empty())
      return op.emitOpError("has mask_captures but no mask_mod region");
    return success();
  }
  return verifyModRegion(raw, op.getMaskMod(), "mask_mod", false,
                         op.getMaskCaptures().getTypes(),
                         IntegerType::get(op.getContext(), 1), scores);
}

/// The checks attn.attention and attn.attention_grad share: Q/K/V shapes,
/// the output and LSE types, and the score options.
template <typename OpTy>
static LogicalResult verifyAttentionLike(OpTy op, Type outputType,
                                         Type lseType) {
  Operation *raw = op.getOperation();
  if (Value table = pageTableOf(op)) {
    if (failed(verifyPagedCache(raw, op.getQuery(), op.getKey(), op.getValue(),
                                table, isCache(op), op.getLengths())))
      return failure();
  } else if (failed(verifyQueryKey(raw, op.getQuery(), op.getKey())) ||
             failed(verifySameElementType(raw, op.getQuery(), op.getValue(),
                                          "query", "value"))) {
    return failure();
  } else {
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
    if (failed(verifyProbsValue(raw, {q[0], q[1], q[2], k[2]}, op.getValue())))
      return failure();
  }
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
  ArrayRef<int64_t> v = shapeOf(op.getValue());
  if (v[1] != k[1])
    return op.emitOpError()
           << "key and value head counts differ: " << k[1] << " vs " << v[1];
  if (cast<RankedTensorType>(outputType).getElementType() !=
      elementTypeOf(op.getValue()))
    return op.emitOpError()
           << "output must have the element type of value, "
           << elementTypeOf(op.getValue()) << ", got " << outputType;
  if (failed(verifyExpectedShape(raw, outputType, {q[0], q[1], q[2], v[3]},
                                 "output")) ||
      failed(verifyExpectedShape(raw, lseType, {q[0], q[1], q[2]}, "lse")))
    return failure();
  return verifyScoreOptions(op);
}

/// Each capture gradient has its capture's type.
static LogicalResult verifyCaptureGrads(Operation *op, TypeRange captures,
                                        TypeRange grads) {
  if (captures.size() != grads.size())
    return op->emitOpError() << "must return one gradient per capture ("
                             << captures.size() << "), got " << grads.size();
  for (auto [k, pair] : llvm::enumerate(llvm::zip(captures, grads)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return op->emitOpError()
             << "gradient " << k << " must have its capture's type "
             << std::get<0>(pair) << ", got " << std::get<1>(pair);
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionLike(*this, getOutput().getType(),
                             getLse().getType());
}

double AttentionGradOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(double(shapeOf(getQuery())[3]));
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionLike(*this, getOutput().getType(),
                                 getLse().getType())))
    return failure();
  if (getOutputGrad().getType() != getOutput().getType())
    return emitOpError() << "output_grad must have the output's type "
                         << getOutput().getType() << ", got "
                         << getOutputGrad().getType();
  if (getLseGrad() && getLseGrad().getType() != getLse().getType())
    return emitOpError() << "lse_grad must have the lse's type "
                         << getLse().getType() << ", got "
                         << getLseGrad().getType();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("query, key and value gradients must have the types "
                       "of query, key and value");
  return verifyCaptureGrads(*this, getScoreCaptures().getTypes(),
                            getScoreCapturesGrad().getTypes());
}

//===----------------------------------------------------------------------===//
// AttentionStatsOp, AttentionStatsGradOp
//===----------------------------------------------------------------------===//

double AttentionStatsOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(double(shapeOf(getQuery())[3]));
}

/// The query, key and LSE operands of the statistics ops, and their score
/// options.
template <typename OpTy> static LogicalResult verifyStatsInputs(OpTy op) {
  if (failed(verifyQueryKey(op, op.getQuery(), op.getKey())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  if (failed(verifyExpectedShape(op, op.getLse().getType(), {q[0], q[1], q[2]},
                                 "lse")))
    return failure();
  return verifyScoreOptions(op);
}

LogicalResult AttentionStatsOp::verify() {
  if (failed(verifyStatsInputs(*this)))
    return failure();
  if (getNumResults() == 0)
    return emitOpError("must return at least one of entropy, mean_entropy, "
                       "pooled and similarity");
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey());
  if (getEntropy() &&
      failed(verifyExpectedShape(*this, getEntropy().getType(),
                                 {q[0], q[1], q[2]}, "entropy")))
    return failure();
  if (getMeanEntropy() &&
      failed(verifyExpectedShape(*this, getMeanEntropy().getType(),
                                 {q[0], q[1]}, "mean_entropy")))
    return failure();
  if (getSimilarity() &&
      failed(verifyExpectedShape(*this, getSimilarity().getType(),
                                 {q[0], q[1], q[1]}, "similarity")))
    return failure();
  if (!getPooled())
    return success();
  ArrayRef<int64_t> grid = shapeOf(getPooled());
  if (grid.size() != 4 || grid[0] != q[0] || grid[1] != q[1])
    return emitOpError() << "pooled must be [B, H, Gq, Gk] = [" << q[0] << ", "
                         << q[1] << ", Gq, Gk], got " << getPooled().getType();
  if (grid[2] < 1 || grid[2] > q[2] || grid[3] < 1 || grid[3] > k[2])
    return emitOpError() << "pooled's grid " << grid[2] << " x " << grid[3]
                         << " must be between 1 x 1 and Sq x Skv = " << q[2]
                         << " x " << k[2];
  return success();
}

double AttentionStatsGradOp::getEffectiveScale() {
  if (FloatAttr scale = getScaleAttr())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(double(shapeOf(getQuery())[3]));
}

LogicalResult AttentionStatsGradOp::verify() {
  if (failed(verifyStatsInputs(*this)))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQuery());
  if (!getEntropyGrad() && !getMeanEntropyGrad())
    return emitOpError("needs entropy_grad, mean_entropy_grad or both");
  if (getEntropyGrad() &&
      failed(verifyExpectedShape(*this, getEntropyGrad().getType(),
                                 {q[0], q[1], q[2]}, "entropy_grad")))
    return failure();
  if (getMeanEntropyGrad() &&
      failed(verifyExpectedShape(*this, getMeanEntropyGrad().getType(),
                                 {q[0], q[1]}, "mean_entropy_grad")))
    return failure();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getLseGrad().getType() != getLse().getType())
    return emitOpError("query, key and lse gradients must have the types of "
                       "query, key and lse");
  return verifyCaptureGrads(*this, getScoreCaptures().getTypes(),
                            getScoreCapturesGrad().getTypes());
}

//===----------------------------------------------------------------------===//
// DistillOp, DistillGradOp
//===----------------------------------------------------------------------===//

/// The checks attn.distill and attn.distill_grad share: each side's Q and K
/// (GQA per side), the same B, H, Sq and Skv on both sides, both LSEs, both
/// scales, the mask options and the mask_mod region; `kl` is the type of the
/// result (or of its cotangent): per row [B, H, Sq] or the mean, rank 0.
template <typename OpTy>
static LogicalResult verifyDistillLike(OpTy op, Type kl, StringRef klName) {
  Operation *raw = op.getOperation();
  if (failed(verifyQueryKey(raw, op.getQuery(), op.getKey())) ||
      failed(verifyQueryKey(raw, op.getTeacherQuery(), op.getTeacherKey(),
                            "teacher_query", "teacher_key")))
    return failure();
  ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
                    tq = shapeOf(op.getTeacherQuery()),
                    tk = shapeOf(op.getTeacherKey());
  if (tq[0] != q[0] || tq[1] != q[1] || tq[2] != q[2] || tk[2] != k[2])
    return op.emitOpError()
           << "the teacher's B, H, Sq and Skv (" << tq[0] << ", " << tq[1]
           << ", " << tq[2] << ", " << tk[2] << ") must be the student's ("
           << q[0] << ", " << q[1] << ", " << q[2] << ", " << k[2] << ")";
  if (failed(verifyExpectedShape(raw, op.getLse().getType(), {q[0], q[1], q[2]},
                                 "lse")) ||
      failed(verifyExpectedShape(raw, op.getTeacherLse().getType(),
                                 {q[0], q[1], q[2]}, "teacher_lse")))
    return failure();
  ArrayRef<int64_t> klShape = shapeOf(kl);
  if (!klShape.empty() && klShape != ArrayRef<int64_t>({q[0], q[1], q[2]}))
    return op.emitOpError()
           << klName << " must be tensor<" << q[0] << "x" << q[1] << "x" << q[2]
           << "xf32> (the KL per row) or tensor<f32> (its mean), got " << kl;
  for (auto [scale, what] :
       {std::pair(op.getScaleAttr(), "scale"),
        std::pair(op.getTeacherScaleAttr(), "teacher_scale")})
    if (scale && failed(verifyScaleValue(raw, scale.getValueAsDouble(), what)))
      return failure();
  if (failed(verifyMaskOptions(raw, op.getWindow(), op.getLengths(), q[0])))
    return failure();
  if (op.getMaskMod().empty()) {
    if (!op.getMaskCaptures().empty())
      return op.emitOpError("has mask_captures but no mask_mod region");
    return success();
  }
  return verifyModRegion(
      raw, op.getMaskMod(), "mask_mod", false, op.getMaskCaptures().getTypes(),
      IntegerType::get(op.getContext(), 1), {q[0], q[1], q[2], k[2]});
}

/// 1/sqrt(D) of `query` unless `scale` is given.
static double effectiveScale(FloatAttr scale, Value query) {
  if (scale)
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(double(shapeOf(query)[3]));
}

double DistillOp::getEffectiveScale() {
  return effectiveScale(getScaleAttr(), getQuery());
}

double DistillOp::getEffectiveTeacherScale() {
  return effectiveScale(getTeacherScaleAttr(), getTeacherQuery());
}

bool DistillOp::isMean() { return getKl().getType().getRank() == 0; }

LogicalResult DistillOp::verify() {
  return verifyDistillLike(*this, getKl().getType(), "result");
}

double DistillGradOp::getEffectiveScale() {
  return effectiveScale(getScaleAttr(), getQuery());
}

double DistillGradOp::getEffectiveTeacherScale() {
  return effectiveScale(getTeacherScaleAttr(), getTeacherQuery());
}

bool DistillGradOp::isMean() { return getKlGrad().getType().getRank() == 0; }

LogicalResult DistillGradOp::verify() {
  if (failed(verifyDistillLike(*this, getKlGrad().getType(), "kl_grad")))
    return failure();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getLseGrad().getType() != getLse().getType() ||
      getTeacherQueryGrad().getType() != getTeacherQuery().getType() ||
      getTeacherKeyGrad().getType() != getTeacherKey().getType() ||
      getTeacherLseGrad().getType() != getTeacherLse().getType())
    return emitOpError("gradients must have the types of query, key, lse, "
                       "teacher_query, teacher_key and teacher_lse");
  return success();
}

//===----------------------------------------------------------------------===//
// Other gradient ops
//===----------------------------------------------------------------------===//

LogicalResult ProjectionGradOp::verify() {
  if (failed(verifyShape(*this, getInput(), 3, "input")) ||
      failed(verifyShape(*this, getWeight(), 2, "weight")) ||
      failed(verifyShape(*this, getGrad(), 4, "grad")) ||
      failed(verifySameElementType(*this, getInput(), getWeight(), "input",
                                   "weight")) ||
      failed(verifySameElementType(*this, getInput(), getGrad(), "input",
                                   "grad")))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightGrad().getType() != getWeight().getType())
    return emitOpError("gradients must have the types of input and weight");
  ArrayRef<int64_t> x = shapeOf(getInput()), w = shapeOf(getWeight()),
                    g = shapeOf(getGrad());
  if (x[2] != w[0] || w[1] != g[1] * g[3])
    return emitOpError("input, weight and grad shapes are inconsistent");
  return verifyExpectedShape(*this, getGrad().getType(),
                             {x[0], g[1], x[1], g[3]}, "grad");
}

LogicalResult MergeGradOp::verify() {
  if (failed(verifyShape(*this, getInput(), 4, "input")) ||
      failed(verifyShape(*this, getWeight(), 2, "weight")) ||
      failed(verifyShape(*this, getGrad(), 3, "grad")) ||
      failed(verifySameElementType(*this, getInput(), getWeight(), "input",
                                   "weight")) ||
      failed(verifySameElementType(*this, getInput(), getGrad(), "input",
                                   "grad")))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightGrad().getType() != getWeight().getType())
    return emitOpError("gradients must have the types of input and weight");
  ArrayRef<int64_t> o = shapeOf(getInput()), w = shapeOf(getWeight());
  if (w[0] != o[1] * o[3])
    return emitOpError("input, weight and grad shapes are inconsistent");
  return verifyExpectedShape(*this, getGrad().getType(), {o[0], o[2], w[1]},
                             "grad");
}

LogicalResult TransposedApplyOp::verify() {
  if (failed(verifyShape(*this, getLhs(), 4, "lhs")) ||
      failed(verifyShape(*this, getRhs(), 4, "rhs")) ||
      failed(verifyShape(*this, getResult(), 4, "result")) ||
      failed(verifySameElementType(*this, getRhs(), getResult(), "rhs",
                                   "result")))
    return failure();
  ArrayRef<int64_t> x = shapeOf(getLhs()), y = shapeOf(getRhs()),
                    r = shapeOf(getResult());
  if (x[0] != y[0] || x[1] != y[1] || x[2] != y[2])
    return emitOpError("lhs and rhs must agree on batch, heads and queries");
  if (x[1] % r[1] != 0)
    return emitOpError() << "query heads (" << x[1]
                         << ") must be a multiple of result heads (" << r[1]
                         << ")";
  return verifyExpectedShape(*this, getResult().getType(),
                             {x[0], r[1], x[3], y[3]}, "result");
}

LogicalResult SoftmaxGradOp::verify() {
  return verifyShape(*this, getProbs(), 4, "probs");
}

LogicalResult ScoreModGradOp::verify() {
  if (failed(verifyShape(*this, getScores(), 4, "scores")) ||
      failed(verifyCaptureGrads(*this, getCaptures().getTypes(),
                                getCapturesGrad().getTypes())))
    return failure();
  return verifyModRegion(*this, getBody(), "score_mod", /*withScore=*/true,
                         getCaptures().getTypes(),
                         Float32Type::get(getContext()), shapeOf(getScores()));
}

#define GET_OP_CLASSES
#include "dialect/AttnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// CombineOp, CombineGradOp
//===----------------------------------------------------------------------===//

/// One or more partial results of one type ([B, H, Sq, Dv] and [B, H, Sq]).
static LogicalResult verifyPartials(Operation *op, ValueRange outputs,
                                    ValueRange lses) {
  if (outputs.empty())
    return op->emitOpError("needs at least one partial result");
  if (outputs.size() != lses.size())
    return op->emitOpError() << "needs one lse per output, got "
                             << outputs.size() << " outputs and " << lses.size()
                             << " lses";
  if (failed(verifyShape(op, outputs[0], 4, "output")) ||
      failed(verifyShape(op, lses[0], 3, "lse")))
    return failure();
  for (Value output : outputs)
    if (output.getType() != outputs[0].getType())
      return op->emitOpError() << "needs outputs of one type, got "
                               << outputs[0].getType() << " and "
                               << output.getType();
  ArrayRef<int64_t> o = shapeOf(outputs[0]);
  for (Value lse : lses)
    if (failed(verifyExpectedShape(op, lse.getType(), {o[0], o[1], o[2]},
                                   "lse")))
      return failure();
  return success();
}

LogicalResult CombineOp::verify() {
  if (failed(verifyPartials(*this, getOutputs(), getLses())))
    return failure();
  if (getOutput().getType() != getOutputs()[0].getType() ||
      getLse().getType() != getLses()[0].getType())
    return emitOpError() << "results must have the partials' types "
                         << getOutputs()[0].getType() << " and "
                         << getLses()[0].getType();
  return success();
}

LogicalResult CombineGradOp::verify() {
  if (failed(verifyPartials(*this, getOutputs(), getLses())))
    return failure();
  Type output = getOutputs()[0].getType(), lse = getLses()[0].getType();
  if (getOutputGrad().getType() != output)
    return emitOpError() << "output_grad must have the outputs' type "
                         << output << ", got " << getOutputGrad().getType();
  if (getLseGrad() && getLseGrad().getType() != lse)
    return emitOpError() << "lse_grad must have the lses' type " << lse
                         << ", got " << getLseGrad().getType();
  size_t n = getOutputs().size();
  if (getGrads().size() != 2 * n)
    return emitOpError() << "returns dO_k then dLSE_k: expected " << 2 * n
                         << " results, got " << getGrads().size();
  for (auto [k, grad] : llvm::enumerate(getGrads()))
    if (grad.getType() != (k < n ? output : lse))
      return emitOpError() << "result " << k << " must have type "
                           << (k < n ? output : lse) << ", got "
                           << grad.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AppendOp
//===----------------------------------------------------------------------===//

int64_t AppendOp::getCapacity() {
  ArrayRef<int64_t> c = shapeOf(getCache());
  if (Value table = getPages())
    return shapeOf(table)[1] * c[2];
  return c[2];
}

bool AppendOp::isAppendedTo(Value value) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    auto append = dyn_cast<AppendOp>(user);
    return append && append.getCache() == value;
  });
}

LogicalResult AppendOp::verify() {
  if (failed(verifyShape(*this, getRows(), 4, "rows")) ||
      failed(verifyShape(*this, getCache(), 4, "cache")) ||
      failed(
          verifySameElementType(*this, getRows(), getCache(), "rows", "cache")))
    return failure();
  ArrayRef<int64_t> r = shapeOf(getRows()), c = shapeOf(getCache());
  if (failed(verifyMaskOptions(*this, std::nullopt, getLengths(), r[0])))
    return failure();
  if (c[1] != r[1] || c[3] != r[3])
    return emitOpError() << "rows and cache must have the same heads and "
                            "head dimension: "
                         << getRows().getType() << " vs "
                         << getCache().getType();
  if (Value table = getPages()) {
    if (failed(verifyShape(*this, table, 2, "pages")))
      return failure();
    ArrayRef<int64_t> t = shapeOf(table);
    if (t[0] != r[0])
      return emitOpError() << "pages must have one row per batch (" << r[0]
                           << "), got " << table.getType();
    int64_t capacity;
    if (llvm::MulOverflow(t[1], c[2], capacity))
      return emitOpError() << "the cache's capacity (" << t[1] << " pages of "
                           << c[2] << " tokens) overflows";
  } else if (c[0] != r[0]) {
    return emitOpError() << "rows and cache batch sizes differ: " << r[0]
                         << " vs " << c[0];
  }
  if (r[2] > getCapacity())
    return emitOpError() << "appends " << r[2]
                         << " rows per sequence to a cache of capacity "
                         << getCapacity();
  return success();
}

void attnc::attn::cloneRegions(Operation *from, Operation *to) {
  assert(from->getNumRegions() == to->getNumRegions() &&
         "cloneRegions between ops of other regions");
  for (auto [source, target] :
       llvm::zip(from->getRegions(), to->getRegions())) {
    IRMapping mapping;
    source.cloneInto(&target, mapping);
  }
}
