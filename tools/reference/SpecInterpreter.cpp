// The float64 interpreter of attn specs (see SpecInterpreter.h).
#include "tools/reference/SpecInterpreter.h"

#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "tools/reference/Reference.h"
#include "tools/reference/RegionEvaluator.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace attnc {
namespace {

HostTensor zeros(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return {shape.vec(), std::vector<double>(n, 0.0)};
}

/// Rounds `t` to f16 or bf16 values when `type` has that element type.
void roundTo(Type type, HostTensor &t) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor ||
      !(tensor.getElementType().isF16() || tensor.getElementType().isBF16()))
    return;
  const llvm::fltSemantics &semantics =
      cast<FloatType>(tensor.getElementType()).getFloatSemantics();
  for (double &x : t.data) {
    APFloat value(x);
    bool lost;
    value.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
    value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    x = value.convertToDouble();
  }
}

/// The named mask conditions and mask_mod of attn.mask/attn.attention.
struct MaskEvaluator {
  ref::MaskSpec spec;
  std::vector<int64_t> lengths, offsets;
  std::unique_ptr<RegionEvaluator> maskMod;
};

/// One run of a function body: the value of every tensor defined so far,
/// and one step per op kind, each emitting a located error when it cannot
/// evaluate its op.
class FunctionInterpreter {
public:
  FunctionInterpreter(func::FuncOp func, const std::vector<HostTensor> &inputs,
                      bool rounding)
      : rounding(rounding) {
    for (auto [arg, input] : llvm::zip(func.getArguments(), inputs))
      env[arg] = input;
  }

  LogicalResult evaluate(Operation &op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<attn::ProjectionOp, attn::MergeOp, attn::ScoresOp, attn::ScaleOp,
              attn::ScoreModOp, attn::MaskOp, attn::SoftmaxOp, attn::ApplyOp,
              attn::AttentionOp, attn::AttentionStatsOp, attn::DistillOp,
              attn::CombineOp, attn::AppendOp, arith::ConstantOp>(
            [&](auto concrete) { return evaluateOp(concrete); })
        .Default([](Operation *other) {
          return other->emitOpError("cannot be evaluated by attnc run");
        });
  }

  /// The largest finite |score| a score_mod took or gave (fused or as
  /// attn.score_mod): the scale of the scores' f32 rounding in a kernel.
  double largestScore() const { return largest; }

  /// Rounds the f16/bf16 results of `op` as the spec stores them.
  void roundResults(Operation &op) {
    for (Value result : op.getResults())
      roundTo(result.getType(), env[result]);
  }

  std::vector<HostTensor> valuesOf(ValueRange values) {
    std::vector<HostTensor> tensors;
    for (Value v : values)
      tensors.push_back(env[v]);
    return tensors;
  }

  /// `a` on the values computed so far (interpretAttention); its callbacks
  /// read `self`'s captures through the state, which keeps `self` alive.
  FailureOr<InterpretedAttention>
  interpretedAttention(attn::AttentionOp a,
                       std::shared_ptr<FunctionInterpreter> self) {
    struct State {
      std::shared_ptr<FunctionInterpreter> interpreter;
      std::unique_ptr<MaskEvaluator> mask;
      std::unique_ptr<RegionEvaluator> scoreMod;
    };
    auto q = shapeOf(a.getQuery()), k = shapeOf(a.getKey()),
         v = shapeOf(a.getValue());
    InterpretedAttention result;
    result.shape = {q[0], q[1], k[1], q[2], attn::keyCountOf(a), q[3], v[3]};
    result.scale = double(float(a.getEffectiveScale()));
    // Read before the evaluators point into env.
    result.query = env[a.getQuery()];
    result.key = keysOf(a, a.getKey());
    result.value = keysOf(a, a.getValue());
    auto state = std::make_shared<State>();
    state->interpreter = std::move(self);
    FailureOr<std::unique_ptr<MaskEvaluator>> mask =
        maskOf(a, a.getMaskCaptures());
    FailureOr<ref::ScoreMod> mod = scoreModOf(a, state->scoreMod);
    if (failed(mask) || failed(mod))
      return failure();
    state->mask = std::move(*mask);
    result.mask = state->mask->spec;
    result.scoreMod = *mod;
    result.state = std::move(state);
    return result;
  }

private:
  LogicalResult evaluateOp(attn::ProjectionOp p) {
    auto x = shapeOf(p.getInput()), r = shapeOf(p.getResult());
    HostTensor out = zeros(r);
    ref::projection(x[0], x[1], x[2], r[1], r[3], env[p.getInput()].data.data(),
                    env[p.getWeight()].data.data(), out.data.data());
    env[p.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::MergeOp m) {
    auto o = shapeOf(m.getInput()), r = shapeOf(m.getResult());
    HostTensor out = zeros(r);
    ref::merge(o[0], o[1], o[2], o[3], r[2], env[m.getInput()].data.data(),
               env[m.getWeight()].data.data(), out.data.data());
    env[m.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::ScoresOp s) {
    auto q = shapeOf(s.getQuery()), k = shapeOf(s.getKey());
    HostTensor out = zeros({q[0], q[1], q[2], k[2]});
    ref::computeScores({q[0], q[1], k[1], q[2], k[2], q[3], /*Dv=*/0},
                       env[s.getQuery()].data.data(),
                       env[s.getKey()].data.data(), out.data.data());
    env[s.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::ScaleOp s) {
    HostTensor out = env[s.getScores()];
    double factor = double(float(s.getEffectiveFactor()));
    for (double &x : out.data)
      x *= factor;
    env[s.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::ScoreModOp s) {
    FailureOr<std::unique_ptr<RegionEvaluator>> region =
        regionOf(s.getBody(), s.getCaptures());
    if (failed(region))
      return failure();
    HostTensor out = env[s.getScores()];
    auto shape = out.shape;
    size_t n = 0;
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t h = 0; h < shape[1]; ++h)
        for (int64_t i = 0; i < shape[2]; ++i)
          for (int64_t j = 0; j < shape[3]; ++j, ++n) {
            noteScore(out.data[n]);
            out.data[n] = (*region)->evaluate(
                {out.data[n], double(b), double(h), double(i), double(j)});
            noteScore(out.data[n]);
          }
    env[s.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::MaskOp m) {
    FailureOr<std::unique_ptr<MaskEvaluator>> mask = maskOf(m, m.getCaptures());
    if (failed(mask))
      return failure();
    const double fill =
        m.getZeroFill() ? 0.0 : -std::numeric_limits<double>::infinity();
    HostTensor out = env[m.getScores()];
    ref::maskScores(out.shape[0], out.shape[1], out.shape[2], out.shape[3],
                    (*mask)->spec, fill, out.data.data());
    env[m.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::SoftmaxOp s) {
    HostTensor out = env[s.getScores()];
    ref::softmaxRows(out.shape[0] * out.shape[1] * out.shape[2], out.shape[3],
                     out.data.data());
    env[s.getResult()] = std::move(out);
    return success();
  }

  LogicalResult evaluateOp(attn::ApplyOp a) {
    auto p = shapeOf(a.getProbs()), v = shapeOf(a.getValue());
    HostTensor out = zeros({p[0], p[1], p[2], v[3]});
    ref::applyProbabilities({p[0], p[1], v[1], p[2], p[3], /*D=*/0, v[3]},
                            env[a.getProbs()].data.data(),
                            env[a.getValue()].data.data(), out.data.data());
    env[a.getResult()] = std::move(out);
    return success();
  }

  /// The score_mod of an op with attention's options as a ref::ScoreMod
  /// (empty without a region); `holder` keeps its evaluator alive.
  template <typename OpTy>
  FailureOr<ref::ScoreMod>
  scoreModOf(OpTy op, std::unique_ptr<RegionEvaluator> &holder) {
    ref::ScoreMod mod;
    if (op.getScoreMod().empty())
      return mod;
    FailureOr<std::unique_ptr<RegionEvaluator>> region =
        regionOf(op.getScoreMod(), op.getScoreCaptures());
    if (failed(region))
      return failure();
    holder = std::move(*region);
    mod.apply = [r = holder.get()](double s, int64_t b, int64_t h, int64_t i,
                                   int64_t j) {
      return r->evaluate({s, double(b), double(h), double(i), double(j)});
    };
    return mod;
  }

  /// K or V of `a` as [B, Hkv, Skv, D]: a paged cache's pages gathered.
  HostTensor keysOf(attn::AttentionOp a, Value pool) {
    Value table = a.getPages();
    if (!table)
      return env[pool];
    auto p = shapeOf(pool), t = shapeOf(table);
    std::vector<int64_t> entries;
    for (double e : env[table].data)
      entries.push_back(int64_t(e));
    return {{t[0], p[1], t[1] * p[2], p[3]},
            ref::gatherPages(p[0], p[1], p[2], p[3], t[0], t[1],
                             env[pool].data.data(), entries.data())};
  }

  LogicalResult evaluateOp(attn::AttentionOp a) {
    auto q = shapeOf(a.getQuery()), k = shapeOf(a.getKey()),
         v = shapeOf(a.getValue());
    HostTensor keys = keysOf(a, a.getKey()), values = keysOf(a, a.getValue());
    FailureOr<std::unique_ptr<MaskEvaluator>> mask =
        maskOf(a, a.getMaskCaptures());
    std::unique_ptr<RegionEvaluator> holder;
    FailureOr<ref::ScoreMod> mod = scoreModOf(a, holder);
    if (failed(mask) || failed(mod))
      return failure();
    if (mod->apply)
      mod->apply = [this, apply = mod->apply](double s, int64_t b, int64_t h,
                                              int64_t i, int64_t j) {
        double r = apply(s, b, h, i, j);
        noteScore(s);
        noteScore(r);
        return r;
      };
    HostTensor out = zeros({q[0], q[1], q[2], v[3]}),
               lse = zeros({q[0], q[1], q[2]});
    ref::attentionForward(
        {q[0], q[1], k[1], q[2], attn::keyCountOf(a), q[3], v[3]},
        double(float(a.getEffectiveScale())), (*mask)->spec, *mod,
        env[a.getQuery()].data.data(), keys.data.data(), values.data.data(),
        out.data.data(), lse.data.data());
    env[a.getOutput()] = std::move(out);
    env[a.getLse()] = std::move(lse);
    return success();
  }

  /// The statistics of exp(S' - lse) for the op's lse operand (the LSE of
  /// its own P by the op's contract, but an argument may be any value).
  LogicalResult evaluateOp(attn::AttentionStatsOp a) {
    auto q = shapeOf(a.getQuery()), k = shapeOf(a.getKey());
    FailureOr<std::unique_ptr<MaskEvaluator>> mask =
        maskOf(a, a.getMaskCaptures());
    std::unique_ptr<RegionEvaluator> holder;
    FailureOr<ref::ScoreMod> mod = scoreModOf(a, holder);
    if (failed(mask) || failed(mod))
      return failure();
    int64_t gq = 1, gk = 1;
    if (a.getPooled())
      gq = shapeOf(a.getPooled())[2], gk = shapeOf(a.getPooled())[3];
    ref::AttentionStatistics stats = ref::attentionStatistics(
        {q[0], q[1], k[1], q[2], k[2], q[3], /*Dv=*/0},
        double(float(a.getEffectiveScale())), (*mask)->spec, *mod,
        env[a.getQuery()].data.data(), env[a.getKey()].data.data(), gq, gk,
        env[a.getLse()].data.data());
    auto set = [&](Value result, std::vector<double> &data) {
      if (result)
        env[result] = {shapeOf(result).vec(), std::move(data)};
    };
    set(a.getEntropy(), stats.entropy);
    set(a.getMeanEntropy(), stats.meanEntropy);
    set(a.getPooled(), stats.pooled);
    set(a.getSimilarity(), stats.similarity);
    return success();
  }

  /// KL(P_t || P_s) of the op's own P (its LSE operands are those of the
  /// two attentions by the op's contract; the reference recomputes them).
  LogicalResult evaluateOp(attn::DistillOp d) {
    auto q = shapeOf(d.getQuery()), k = shapeOf(d.getKey()),
         tq = shapeOf(d.getTeacherQuery()), tk = shapeOf(d.getTeacherKey());
    FailureOr<std::unique_ptr<MaskEvaluator>> mask =
        maskOf(d, d.getMaskCaptures());
    if (failed(mask))
      return failure();
    ref::Distillation kl = ref::distillation(
        {q[0], q[1], k[1], q[2], k[2], q[3], /*Dv=*/0},
        double(float(d.getEffectiveScale())),
        {tq[0], tq[1], tk[1], tq[2], tk[2], tq[3], /*Dv=*/0},
        double(float(d.getEffectiveTeacherScale())), (*mask)->spec,
        env[d.getQuery()].data.data(), env[d.getKey()].data.data(),
        env[d.getTeacherQuery()].data.data(),
        env[d.getTeacherKey()].data.data());
    if (d.isMean())
      env[d.getKl()] = HostTensor{{}, {kl.meanKl}};
    else
      env[d.getKl()] = {shapeOf(d.getKl()).vec(), std::move(kl.kl)};
    return success();
  }

  LogicalResult evaluateOp(attn::CombineOp c) {
    std::vector<const double *> outputs, lses;
    for (Value o : c.getOutputs())
      outputs.push_back(env[o].data.data());
    for (Value l : c.getLses())
      lses.push_back(env[l].data.data());
    auto o = shapeOf(c.getOutput());
    HostTensor out = zeros(o), lse = zeros({o[0], o[1], o[2]});
    ref::combinePartials(o[0] * o[1] * o[2], o[3], outputs, lses,
                         out.data.data(), lse.data.data());
    env[c.getOutput()] = std::move(out);
    env[c.getLse()] = std::move(lse);
    return success();
  }

  LogicalResult evaluateOp(attn::AppendOp a) {
    auto r = shapeOf(a.getRows()), c = shapeOf(a.getCache());
    Value table = a.getPages();
    auto integers = [&](Value v) {
      std::vector<int64_t> out;
      for (double x : env[v].data)
        out.push_back(int64_t(x));
      return out;
    };
    std::vector<int64_t> lengths = integers(a.getLengths()), entries;
    if (table)
      entries = integers(table);
    int64_t dims[7] = {r[0],
                       r[1],
                       r[2],
                       r[3],
                       c[2],
                       table ? c[0] : 0,
                       table ? shapeOf(table)[1] : 0};
    HostTensor cache = env[a.getCache()];
    ref::appendRows(dims, env[a.getRows()].data.data(), lengths.data(),
                    table ? entries.data() : nullptr, cache.data.data());
    env[a.getResult()] = std::move(cache);
    return success();
  }

  LogicalResult evaluateOp(arith::ConstantOp c) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return c.emitOpError("cannot be evaluated by attnc run");
    HostTensor t = zeros(shapeOf(c.getResult()));
    size_t n = 0;
    if (isa<FloatType>(dense.getElementType()))
      for (APFloat f : dense.getValues<APFloat>())
        t.data[n++] = f.convertToDouble();
    else
      for (APInt i : dense.getValues<APInt>())
        t.data[n++] = double(i.getSExtValue());
    env[c.getResult()] = std::move(t);
    return success();
  }

  /// The evaluator of a score_mod/mask_mod region reading `captures`.
  FailureOr<std::unique_ptr<RegionEvaluator>> regionOf(Region &region,
                                                       ValueRange captures) {
    std::vector<const HostTensor *> tensors;
    for (Value c : captures)
      tensors.push_back(&env[c]);
    auto evaluator =
        std::make_unique<RegionEvaluator>(region, tensors, rounding);
    if (failed(evaluator->check()))
      return failure();
    return evaluator;
  }

  template <typename OpTy>
  FailureOr<std::unique_ptr<MaskEvaluator>> maskOf(OpTy op,
                                                   ValueRange maskCaptures) {
    auto mask = std::make_unique<MaskEvaluator>();
    mask->spec.causal = op.getCausal();
    mask->spec.cache = attn::isCache(op);
    if (mask->spec.cache) {
      // (attn.mask's are those of its scores, [B, H, Sq, Skv].)
      if constexpr (std::is_same_v<OpTy, attn::MaskOp>) {
        mask->spec.sq = shapeOf(op.getScores())[2];
        mask->spec.skv = shapeOf(op.getScores())[3];
      } else {
        mask->spec.sq = shapeOf(op.getQuery())[2];
        mask->spec.skv = attn::keyCountOf(op);
      }
    }
    if (std::optional<int64_t> w = op.getWindow())
      mask->spec.window = *w;
    if (Value len = op.getLengths()) {
      for (double l : env[len].data)
        mask->lengths.push_back(int64_t(l));
      mask->spec.lengths = mask->lengths.data();
    }
    if (Value cu = attn::varlenOf(op)) {
      for (double d : env[cu].data)
        mask->offsets.push_back(int64_t(d));
      mask->spec.offsets = mask->offsets.data();
      mask->spec.numOffsets = int64_t(mask->offsets.size());
    }
    if (!op.getMaskMod().empty()) {
      FailureOr<std::unique_ptr<RegionEvaluator>> region =
          regionOf(op.getMaskMod(), maskCaptures);
      if (failed(region))
        return failure();
      mask->maskMod = std::move(*region);
      mask->spec.maskMod = [r = mask->maskMod.get()](int64_t b, int64_t h,
                                                     int64_t i, int64_t j) {
        return r->evaluate({double(b), double(h), double(i), double(j)}) != 0;
      };
    }
    return mask;
  }

  DenseMap<Value, HostTensor> env;
  bool rounding; // regions round f16/bf16 results (interpretSpec)
  double largest = 0; // largestScore()

  void noteScore(double x) {
    if (std::isfinite(x))
      largest = std::max(largest, std::fabs(x));
  }
};

} // namespace

FailureOr<std::vector<HostTensor>>
interpretSpec(func::FuncOp func, const std::vector<HostTensor> &inputs,
              bool roundResults, double *largestScore) {
  FunctionInterpreter interpreter(func, inputs, roundResults);
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (largestScore)
        *largestScore = interpreter.largestScore();
      return interpreter.valuesOf(ret.getOperands());
    }
    if (failed(interpreter.evaluate(op)))
      return failure();
    if (roundResults)
      interpreter.roundResults(op);
  }
  return failure();
}

FailureOr<InterpretedAttention>
interpretAttention(func::FuncOp func, attn::AttentionOp op,
                   const std::vector<HostTensor> &inputs) {
  auto interpreter =
      std::make_shared<FunctionInterpreter>(func, inputs, /*rounding=*/true);
  for (Operation &other : func.getBody().front()) {
    if (&other == op.getOperation())
      return interpreter->interpretedAttention(op, interpreter);
    if (isa<func::ReturnOp>(other))
      break;
    if (failed(interpreter->evaluate(other)))
      return failure();
    interpreter->roundResults(other);
  }
  return op.emitOpError("is not an op of the body of @")
         << func.getSymName() << ", which the reference interprets";
}

} // namespace attnc
