// attnc run (see Run.h).
#include "tools/attnc/Run.h"

#include "attnc/runtime.h"

#include "attnc/jit.h"
#include "codegen/Spec.h"
#include "dialect/AttnOps.h"
#include "passes/Passes.h"
#include "tools/attnc/HostBuffer.h"
#include "tools/attnc/LoadedSpec.h"
#include "tools/reference/Reference.h"
#include "tools/reference/SpecInterpreter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>

namespace attnc {
namespace {

using jit::DType;

double toleranceFor(DType d) {
  return d == DType::BF16 ? 3e-2 : d == DType::F16 ? 5e-3 : 1e-4;
}

/// The tolerance of the narrowest float tensor of `func` (its arguments
/// and every value its ops define): a result is only as exact as what it
/// is computed from allows (an f32 bias table's gradient in a bf16
/// attention comes from the bf16 O that the forward saved; f32
/// probabilities of f16 projections are as exact as the projections).
double computeToleranceOf(mlir::func::FuncOp func) {
  double tolerance = toleranceFor(DType::F32);
  // Tensors, and the scalars of score_mod and mask_mod regions (bf16 code
  // in a region is as exact as bf16).
  auto consider = [&](mlir::Type type) {
    mlir::Type element = mlir::getElementTypeOrSelf(type);
    if (element.isF16())
      tolerance = std::max(tolerance, toleranceFor(DType::F16));
    else if (element.isBF16())
      tolerance = std::max(tolerance, toleranceFor(DType::BF16));
  };
  for (mlir::Type type : func.getArgumentTypes())
    consider(type);
  func.walk([&](mlir::Operation *op) {
    for (mlir::Type type : op->getResultTypes())
      consider(type);
  });
  return tolerance;
}

/// `x` as the report prints it: 2.60e-06.
std::string scientific(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2e", x);
  return text;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// L(x) = sum over the float results of @f of <result, cotangent>, by the
/// float64 interpreter: the function whose central differences the
/// gradients of <f>_bwd are checked against.
class ReferenceLoss {
public:
  ReferenceLoss(mlir::func::FuncOp func, std::vector<HostTensor> cotangents)
      : func(func), cotangents(std::move(cotangents)) {
    for (size_t r = 0, e = func.getNumResults(); r < e; ++r)
      if (mlir::isa<mlir::FloatType>(
              mlir::cast<mlir::RankedTensorType>(func.getResultTypes()[r])
                  .getElementType()))
        floatResults.push_back(r);
  }

  double operator()(const std::vector<HostTensor> &x) const {
    // The forward already ran through the interpreter: it cannot fail.
    mlir::FailureOr<std::vector<HostTensor>> y = interpretSpec(func, x);
    double total = 0;
    for (size_t c = 0; c < floatResults.size(); ++c) {
      const std::vector<double> &values = (*y)[floatResults[c]].data;
      // Non-finite results (the -inf LSE of a row the mask empties) are
      // constants of the inputs: they add nothing.
      for (size_t i = 0; i < values.size(); ++i)
        if (std::isfinite(values[i]))
          total += values[i] * cotangents[c].data[i];
    }
    return total;
  }

private:
  mlir::func::FuncOp func;
  std::vector<HostTensor> cotangents;
  std::vector<size_t> floatResults;
};

/// The least denominator of result `index`'s per-element error: 0.1 for the
/// entropies and KL divergences of attn.attention_stats and attn.distill,
/// whose rounding noise does not shrink with them (every row that sees one
/// key has 0 exactly, and a kernel gives 1e-8), as test/unit's checks judge
/// them; 0 (the values' own scale) for the others.
static double errorFloorOf(mlir::func::FuncOp func, unsigned index) {
  mlir::Value result = func.front().getTerminator()->getOperand(index);
  if (auto stats = result.getDefiningOp<attn::AttentionStatsOp>())
    return result == stats.getEntropy() || result == stats.getMeanEntropy()
               ? 0.1
               : 0.0;
  return result.getDefiningOp<attn::DistillOp>() ? 0.1 : 0.0;
}

/// The relative error of the gradient `grad` along `direction` against the
/// central difference `numeric` (signed), judged against the terms of the dot
/// product, or against 1e-3 of `largestGradient` where they are smaller: a
/// gradient that is zero in exact arithmetic (dQ and dK when every row sees
/// one key) comes out as rounding noise, which its own magnitude cannot
/// judge.
double directionalError(const std::vector<double> &grad,
                        const std::vector<double> &direction, double numeric,
                        double largestGradient) {
  double analytic = dot(grad, direction), scale = 1e-30, floor = 0;
  for (size_t i = 0; i < direction.size(); ++i) {
    scale += std::fabs(grad[i] * direction[i]);
    floor += 1e-3 * largestGradient * std::fabs(direction[i]);
  }
  scale = std::max(scale, floor);
  return (analytic - numeric) / std::max(scale, std::fabs(numeric));
}

/// A spec whose body is one attn.attention on its arguments, without
/// regions, returning only its O: its gradients have a float64 reference of
/// their own, ref::attentionBackward, against which each element is checked.
struct PlainAttention {
  attn::AttentionOp op;
  unsigned q, k, v;            // argument numbers (they may repeat)
  std::optional<unsigned> len; // the lengths argument
  std::optional<unsigned> cu;  // varlen's offsets
};

std::optional<PlainAttention> plainAttentionOf(mlir::func::FuncOp func) {
  mlir::Block &body = func.getBody().front();
  if (body.getOperations().size() != 2)
    return std::nullopt;
  auto op = mlir::dyn_cast<attn::AttentionOp>(body.front());
  auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(body.back());
  if (!op || !ret || !op.getScoreMod().empty() || !op.getMaskMod().empty() ||
      op.getPages() || ret.getNumOperands() != 1 ||
      ret.getOperand(0) != op.getOutput())
    return std::nullopt;
  auto argument = [&](mlir::Value value) -> std::optional<unsigned> {
    auto arg = mlir::dyn_cast_or_null<mlir::BlockArgument>(value);
    if (!arg || arg.getOwner() != &body)
      return std::nullopt;
    return arg.getArgNumber();
  };
  std::optional<unsigned> q = argument(op.getQuery()),
                          k = argument(op.getKey()),
                          v = argument(op.getValue());
  if (!q || !k || !v)
    return std::nullopt;
  PlainAttention plain{op, *q, *k, *v, std::nullopt, std::nullopt};
  if (mlir::Value len = op.getLengths()) {
    plain.len = argument(len);
    if (!plain.len)
      return std::nullopt;
  }
  if (mlir::Value cu = op.getVarlen()) {
    plain.cu = argument(cu);
    if (!plain.cu)
      return std::nullopt;
  }
  return plain;
}

/// The float64 gradient of every argument of `plain`'s spec at `inputs`
/// given the cotangent `dO` of its O (empty for the arguments attention
/// does not read: the lengths, varlen's offsets).
std::vector<std::vector<double>>
plainAttentionGradients(PlainAttention plain,
                        const std::vector<HostTensor> &inputs,
                        const std::vector<double> &dO) {
  const std::vector<int64_t> &q = inputs[plain.q].shape,
                             &k = inputs[plain.k].shape,
                             &v = inputs[plain.v].shape;
  ref::AttentionShape shape{q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
  ref::MaskSpec mask;
  mask.causal = plain.op.getCausal();
  if (std::optional<int64_t> window = plain.op.getWindow())
    mask.window = *window;
  mask.cache = plain.op.getCache();
  mask.sq = q[2];
  mask.skv = k[2];
  std::vector<int64_t> lengths, offsets;
  if (plain.len) {
    for (double l : inputs[*plain.len].data)
      lengths.push_back(int64_t(l));
    mask.lengths = lengths.data();
  }
  if (plain.cu) {
    for (double d : inputs[*plain.cu].data)
      offsets.push_back(int64_t(d));
    mask.offsets = offsets.data();
    mask.numOffsets = int64_t(offsets.size());
  }
  std::vector<double> dQ(inputs[plain.q].data.size()),
      dK(inputs[plain.k].data.size()), dV(inputs[plain.v].data.size());
  ref::attentionBackward(
      shape, double(float(plain.op.getEffectiveScale())), mask, {},
      inputs[plain.q].data.data(), inputs[plain.k].data.data(),
      inputs[plain.v].data.data(), dO.data(), dQ.data(), dK.data(), dV.data());
  // An argument that is Q and K (and V) gets the sum of their gradients.
  std::vector<std::vector<double>> grads(inputs.size());
  auto add = [&](unsigned arg, const std::vector<double> &g) {
    std::vector<double> &to = grads[arg];
    to.resize(g.size(), 0.0);
    for (size_t i = 0; i < g.size(); ++i)
      to[i] += g[i];
  };
  add(plain.q, dQ);
  add(plain.k, dK);
  add(plain.v, dV);
  return grads;
}

/// Checks the kernels of one compiled spec against the float64 interpreter
/// and prints a line per output and per gradient. Every random value comes
/// from one stream, in a fixed order, so that a seed reproduces a run.
class KernelChecker {
public:
  KernelChecker(const jit::Module &module, const RunOptions &options,
                llvm::raw_ostream &outs, llvm::raw_ostream &errs)
      : module(module), options(options), outs(outs), errs(errs),
        rng(options.seed) {}

  /// Checks @f (`func`, compiled as `entry`) and, with a backward, the
  /// gradient of each of its float inputs. Fails when a kernel or the
  /// interpreter does (with a message); errors above tolerance only
  /// clear passed().
  mlir::LogicalResult check(mlir::func::FuncOp func,
                            const jit::EntryPoint &entry) {
    computeTolerance = computeToleranceOf(func);
    forwardHasNaN = false;
    std::vector<Buffer> buffers;
    std::vector<HostTensor> inputs;
    if (mlir::failed(checkForward(func, entry, buffers, inputs)))
      return mlir::failure();
    const jit::EntryPoint *fwd = module.find(entry.name + "_fwd");
    const jit::EntryPoint *bwd = module.find(entry.name + "_bwd");
    if (!options.backward || !fwd || !bwd)
      return mlir::success();
    // Rows with a score of +inf or NaN are NaN (as the reference's are):
    // the loss is NaN, and central differences of it measure nothing.
    if (forwardHasNaN) {
      outs << "  gradients not checked: the forward is NaN on rows with a "
              "score of +inf or NaN\n";
      return mlir::success();
    }
    return checkGradients(func, entry, fwd->atBatch(options.batch),
                          bwd->atBatch(options.batch), buffers, inputs);
  }

  bool passed() const { return allOk; }

  /// The columns of the report (printed above each kernel's lines), and
  /// what they measure (printed once, after the last kernel).
  static constexpr llvm::StringLiteral kHeader =
      "                         per-element  directional FD\n";
  static constexpr llvm::StringLiteral kForwardHeader =
      "                         per-element\n";
  static constexpr llvm::StringLiteral kElementwiseLegend =
      "per-element: max |kernel - float64| over a tensor's elements / max "
      "|float64|, against the\n"
      "  spec's float64 interpreter (outputs; entropies and KL divergences "
      "dividing by at least\n"
      "  0.1 nats) or its float64 backward (gradients of a spec that returns "
      "the O of one\n"
      "  attn.attention without regions, dividing by at least 1e-3 of the "
      "largest gradient\n"
      "  element; n/a for the others)\n";
  static constexpr llvm::StringLiteral kDirectionalLegend =
      "directional FD: relative error of <gradient, u> against a central "
      "finite difference of the\n"
      "  float64 interpreter along one random direction u per input: it "
      "checks a gradient as a\n"
      "  whole and is not comparable with per-element errors\n";

  /// Whether a gradient was checked (and its directional error printed).
  bool checkedGradients() const { return anyGradient; }

private:
  /// Runs @f on random inputs (left in `buffers` and `inputs`) and compares
  /// each output with the interpreter's, which rounds f16/bf16 results as
  /// the spec does.
  mlir::LogicalResult checkForward(mlir::func::FuncOp func,
                                   const jit::EntryPoint &entry,
                                   std::vector<Buffer> &buffers,
                                   std::vector<HostTensor> &inputs) {
    int64_t largest = largestDimension(entry);
    // A cache's lengths within its capacity (past it the kernel refuses).
    llvm::DenseMap<unsigned, InputBound> bounds = integerInputBounds(func);
    for (const jit::TensorSpec &arg : entry.args) {
      buffers.emplace_back(arg);
      Buffer &buffer = buffers.back();
      if (!arg.isOutput) {
        auto bound = bounds.find(inputs.size());
        if (bound == bounds.end())
          fillRandomInput(buffer, rng, largest);
        else
          fillRandomInput(buffer, rng, std::min(largest, bound->second.max),
                          bound->second.sorted);
        inputs.push_back(buffer.values);
      }
    }
    if (mlir::failed(call(entry, buffers)))
      return mlir::failure();
    double largestScore = 0;
    mlir::FailureOr<std::vector<HostTensor>> expected =
        interpretSpec(func, inputs, /*roundResults=*/true, &largestScore);
    if (mlir::failed(expected))
      return mlir::failure();
    // The kernels add a score_mod's bias to the scores in f32: each score
    // is off by up to u |s| (u = 2^-24), which moves O by up to 2 u max|s|
    // of V's scale (a bias of 5000, ALiBi over 5000 keys with a slope of
    // 1, read 2.65e-4 in a correct f32 kernel): outputs are allowed twice
    // that too.
    double scoreRounding = 4 * 0x1p-24 * largestScore;
    size_t resultIndex = 0;
    for (Buffer &buffer : buffers) {
      if (!buffer.spec.isOutput)
        continue;
      buffer.unpack();
      double floor = errorFloorOf(func, resultIndex);
      const HostTensor &want = (*expected)[resultIndex++];
      forwardHasNaN = forwardHasNaN || llvm::any_of(want.data, [](double x) {
                        return std::isnan(x);
                      });
      double err = ref::maxRelativeError(
          buffer.values.data.data(), want.data.data(), want.data.size(), floor);
      report("forward", buffer.spec, err, std::nullopt, 0, scoreRounding);
    }
    return mlir::success();
  }

  /// Checks <f>_bwd against central differences of the float64 reference
  /// along a random direction of each float input. A gradient that is a
  /// sum of many cancelling terms (a per-row bias's, which is 0 in exact
  /// arithmetic) is only as exact as the rounding of those terms, which
  /// neither its size nor the largest gradient tells: the check measures
  /// it, from a second run on inputs moved a little, where the rounding
  /// errors come out anew while a wrong gradient stays as wrong. The
  /// difference of the two runs' errors (against the reference at each's
  /// inputs) is the noise the tolerance allows, 4 times over.
  mlir::LogicalResult checkGradients(mlir::func::FuncOp func,
                                     const jit::EntryPoint &entry,
                                     const jit::EntryPoint &fwd,
                                     const jit::EntryPoint &bwd,
                                     const std::vector<Buffer> &buffers,
                                     const std::vector<HostTensor> &inputs) {
    std::vector<HostTensor> cotangents;
    // The inputs moved by up to 2^-12 of themselves (at least an ulp of
    // bf16): enough for every rounding error to come out anew.
    std::vector<Buffer> moved = buffers;
    for (Buffer &buffer : moved) {
      if (buffer.spec.isOutput || !isFloat(buffer.spec.dtype))
        continue;
      double step = buffer.spec.dtype == DType::BF16 ? 0x1p-7 : 0x1p-12;
      for (double &x : buffer.values.data)
        x *= 1 + step * randomUniform(rng);
      buffer.pack();
      buffer.unpack();
    }
    mlir::FailureOr<std::vector<Buffer>> bwdBuffers = runBackward(
        fwd, bwd, buffers, cotangents, /*fresh=*/true, constantResults(func));
    if (mlir::failed(bwdBuffers))
      return mlir::failure();
    mlir::FailureOr<std::vector<Buffer>> movedBwd =
        runBackward(fwd, bwd, moved, cotangents, /*fresh=*/false);
    if (mlir::failed(movedBwd))
      return mlir::failure();
    std::vector<HostTensor> movedInputs;
    for (const Buffer &buffer : moved)
      if (!buffer.spec.isOutput)
        movedInputs.push_back(buffer.values);
    // Specs that are one plain attn.attention: the float64 gradients, to
    // compare element by element.
    std::vector<std::vector<double>> exact;
    if (std::optional<PlainAttention> plain = plainAttentionOf(func))
      exact = plainAttentionGradients(*plain, inputs, cotangents[0].data);
    // A gradient that is zero in exact arithmetic (dQ and dK where every
    // row sees one key) comes out as rounding noise, which a relative error
    // against its own zero cannot judge: each is judged against 1e-3 of the
    // largest exact gradient element too, as the directional check is.
    double largestExact = 0;
    for (const std::vector<double> &gradient : exact)
      for (double g : gradient)
        if (std::isfinite(g))
          largestExact = std::max(largestExact, std::fabs(g));
    ReferenceLoss loss(func, std::move(cotangents));
    // The outputs of <f>_bwd: one gradient per float input, in order.
    std::vector<std::pair<Buffer *, Buffer *>> gradients;
    double largestGradient = 0;
    for (size_t k = 0; k < bwd.args.size(); ++k) {
      if (!bwd.args[k].isOutput)
        continue;
      Buffer &grad = (*bwdBuffers)[k], &movedGrad = (*movedBwd)[k];
      grad.unpack();
      movedGrad.unpack();
      for (double g : grad.values.data)
        largestGradient = std::max(largestGradient, std::fabs(g));
      gradients.push_back({&grad, &movedGrad});
    }
    auto nextGradient = gradients.begin();
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!isFloat(entry.args[k].dtype))
        continue;
      auto [grad, movedGrad] = *nextGradient++;
      std::vector<double> direction(inputs[k].data.size());
      for (double &x : direction)
        x = randomUniform(rng);
      auto numericAt = [&](const std::vector<HostTensor> &at) {
        const double h = 1e-6;
        std::vector<HostTensor> plus = at, minus = at;
        for (size_t i = 0; i < direction.size(); ++i) {
          plus[k].data[i] += h * direction[i];
          minus[k].data[i] -= h * direction[i];
        }
        return (loss(plus) - loss(minus)) / (2 * h);
      };
      double numeric = numericAt(inputs);
      double err = directionalError(grad->values.data, direction, numeric,
                                    largestGradient);
      double movedErr =
          directionalError(movedGrad->values.data, direction,
                           numericAt(movedInputs), largestGradient);
      std::optional<double> elementwise;
      if (k < exact.size() && !exact[k].empty())
        elementwise =
            ref::maxRelativeError(grad->values.data.data(), exact[k].data(),
                                  exact[k].size(), 1e-3 * largestExact);
      report("gradient", grad->spec, elementwise, std::fabs(err),
             4 * std::fabs(err - movedErr));
      anyGradient = true;
    }
    return mlir::success();
  }

  /// Calls `entry` on `buffers`; says why when it fails.
  mlir::LogicalResult call(const jit::EntryPoint &entry,
                           std::vector<Buffer> &buffers) {
    jit::Result result = callWith(module, entry.name, buffers);
    if (result.ok())
      return mlir::success();
    errs << "attnc: error: @" << entry.name << " failed: "
         << (result.error.empty()
                 ? "status " + std::to_string(result.status) + " (" +
                       attnc_status_string(result.status) + ")"
                 : result.error)
         << "\n";
    return mlir::failure();
  }

  /// Runs <f>_fwd on @f's inputs, then <f>_bwd on its inputs, results and
  /// saved values and cotangents of @f's float results: random ones
  /// (`fresh`, returned in `cotangents`), or those given. Returns <f>_bwd's
  /// buffers.
  /// Whether each float result of `func` is one the backward treats as a
  /// constant (the pooled maps and similarities of attn.attention_stats):
  /// the check gives it a cotangent of 0.
  static std::vector<bool> constantResults(mlir::func::FuncOp func) {
    std::vector<bool> constant;
    auto ret = llvm::cast<mlir::func::ReturnOp>(
        func.getBody().front().getTerminator());
    for (mlir::Value result : ret.getOperands()) {
      if (!llvm::isa<mlir::FloatType>(mlir::getElementTypeOrSelf(result)))
        continue;
      auto stats = result.getDefiningOp<attn::AttentionStatsOp>();
      constant.push_back(stats && (result == stats.getPooled() ||
                                   result == stats.getSimilarity()));
    }
    return constant;
  }

  mlir::FailureOr<std::vector<Buffer>>
  runBackward(const jit::EntryPoint &fwd, const jit::EntryPoint &bwd,
              const std::vector<Buffer> &buffers,
              std::vector<HostTensor> &cotangents, bool fresh,
              const std::vector<bool> &constant = {}) {
    std::vector<Buffer> fwdBuffers;
    size_t input = 0;
    for (const jit::TensorSpec &arg : fwd.args) {
      fwdBuffers.emplace_back(arg);
      if (!arg.isOutput)
        fwdBuffers.back() = buffers[input++];
    }
    if (mlir::failed(call(fwd, fwdBuffers)))
      return mlir::failure();
    std::vector<Buffer> bwdBuffers;
    size_t next = 0; // the next given cotangent
    for (size_t k = 0; k < bwd.args.size(); ++k) {
      const jit::TensorSpec &arg = bwd.args[k];
      if (k < fwdBuffers.size()) {
        bwdBuffers.push_back(fwdBuffers[k]);
      } else {
        bwdBuffers.emplace_back(arg);
        if (!arg.isOutput) {
          Buffer &cotangent = bwdBuffers.back();
          if (fresh) {
            size_t result = cotangents.size();
            bool zero = result < constant.size() && constant[result];
            for (double &x : cotangent.values.data)
              x = zero ? 0.0 : randomUniform(rng);
            cotangent.pack();
            cotangents.push_back(cotangent.values);
          } else {
            cotangent.values = cotangents[next++];
            cotangent.pack();
          }
        }
      }
    }
    if (mlir::failed(call(bwd, bwdBuffers)))
      return mlir::failure();
    return bwdBuffers;
  }

  /// Prints one line of the report: the per-element error and, for a
  /// gradient, the directional one, each judged by the tolerance of
  /// `spec`'s dtype or the spec's compute tolerance (the per-element error
  /// also by the scores' rounding `scoreRounding`, the directional one by
  /// its measured rounding `noise`), whichever is larger.
  void report(llvm::StringRef kind, const jit::TensorSpec &spec,
              std::optional<double> elementwise,
              std::optional<double> directional, double noise = 0,
              double scoreRounding = 0) {
    double tolerance = std::max(toleranceFor(spec.dtype), computeTolerance);
    bool ok =
        (!elementwise || *elementwise <= std::max(tolerance, scoreRounding)) &&
        (!directional || *directional <= std::max(tolerance, noise));
    allOk &= ok;
    outs << "  " << llvm::left_justify(kind, 10)
         << llvm::left_justify(spec.name, 12) << " "
         << llvm::left_justify(elementwise ? scientific(*elementwise) : "n/a",
                               directional ? 13 : 0);
    if (directional)
      outs << scientific(*directional);
    outs << (options.check && !ok ? "  FAILED" : "") << "\n";
  }

  const jit::Module &module;
  const RunOptions &options;
  llvm::raw_ostream &outs;
  llvm::raw_ostream &errs;
  std::mt19937_64 rng;
  double computeTolerance = 0;
  bool allOk = true;
  bool forwardHasNaN = false;
  bool anyGradient = false;
};

/// Inlines @f's calls: the interpreter evaluates one function body.
mlir::LogicalResult inlineCalls(LoadedSpec &loaded, Spec &spec) {
  mlir::PassManager inliner(&loaded.getContext());
  inliner.addPass(mlir::createInlinerPass());
  return inliner.run(*spec.module);
}

} // namespace

int runSpec(const std::string &path, const RunOptions &options,
            llvm::raw_ostream &outs, llvm::raw_ostream &errs) {
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!file) {
    errs << "attnc: error: cannot read '" << path
         << "': " << file.getError().message() << "\n";
    return 1;
  }
  std::string text = (*file)->getBuffer().str();

  // The spec as the float64 reference sees it.
  LoadedSpec loaded(std::move(*file), errs);
  mlir::FailureOr<Spec> spec = loaded.parseAtBatch(options.batch, errs);
  if (mlir::failed(spec) || mlir::failed(inlineCalls(loaded, *spec)))
    return 1;

  jit::Options jitOptions;
  jitOptions.backward = options.backward;
  jitOptions.target = options.target;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  auto module = path == "-"
                    ? jit::Module::compile(text, jitOptions, &error)
                    : jit::Module::compileFile(path, jitOptions, &error);
  double compileMs = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  if (!module) {
    // The JIT names its buffer spec.mlir; diagnostics are already located.
    errs << error;
    return 1;
  }

  KernelChecker checker(*module, options, outs, errs);
  for (const KernelSignature &kernel : spec->kernels) {
    const jit::EntryPoint *entry = module->find(kernel.name);
    auto func = spec->module->lookupSymbol<mlir::func::FuncOp>(kernel.name);
    if (!entry || !func)
      continue;
    outs << "@" << kernel.name << ": compiled in "
         << llvm::format("%.0f", compileMs)
         << (module->fromDiskCache() ? " ms (disk cache)" : " ms") << "\n"
         << (options.backward ? KernelChecker::kHeader
                              : KernelChecker::kForwardHeader);
    if (mlir::failed(checker.check(func, entry->atBatch(options.batch))))
      return 1;
  }
  outs << KernelChecker::kElementwiseLegend;
  if (checker.checkedGradients())
    outs << KernelChecker::kDirectionalLegend;
  if (options.check)
    outs << (checker.passed() ? "check passed\n" : "check FAILED\n");
  return options.check && !checker.passed() ? 1 : 0;
}

} // namespace attnc
