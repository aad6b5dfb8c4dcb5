// attnc run (see Run.h).
#include "tools/attnc/Run.h"

#include "attnc/jit.h"
#include "codegen/Spec.h"
#include "tools/attnc/HostBuffer.h"
#include "tools/attnc/LoadedSpec.h"
#include "tools/reference/Reference.h"
#include "tools/reference/SpecInterpreter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SourceMgr.h"

#include <chrono>
#include <cmath>
#include <cstring>
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
  auto consider = [&](mlir::Type type) {
    auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
    if (!tensor)
      return;
    mlir::Type element = tensor.getElementType();
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

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
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

  // The spec as the float64 reference sees it (calls inlined).
  LoadedSpec loaded(std::move(*file), errs);
  mlir::FailureOr<Spec> spec = loaded.parse();
  if (mlir::failed(spec))
    return 1;
  mlir::PassManager inliner(&loaded.getContext());
  inliner.addPass(mlir::createInlinerPass());
  if (mlir::failed(inliner.run(*spec->module)))
    return 1;

  jit::Options jitOptions;
  jitOptions.backward = options.backward;
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

  std::mt19937_64 rng(options.seed);
  bool allOk = true;
  for (const KernelSignature &kernel : spec->kernels) {
    const jit::EntryPoint *entry = module->find(kernel.name);
    auto func = spec->module->lookupSymbol<mlir::func::FuncOp>(kernel.name);
    if (!entry || !func)
      continue;
    outs << "@" << kernel.name << ": compiled in "
         << llvm::format("%.0f", compileMs)
         << (module->fromDiskCache() ? " ms (disk cache)" : " ms") << "\n";

    // Random inputs: floats in [-1, 1); integers (lengths, ids) in
    // [0, the largest dimension].
    int64_t largest = 1;
    for (const jit::TensorSpec &arg : entry->args)
      for (int64_t d : arg.shape)
        largest = std::max(largest, d);
    std::vector<Buffer> buffers;
    std::vector<HostTensor> inputs;
    for (const jit::TensorSpec &arg : entry->args) {
      buffers.emplace_back(arg);
      Buffer &buffer = buffers.back();
      if (!arg.isOutput) {
        fillRandomInput(buffer, rng, largest);
        inputs.push_back(buffer.values);
      }
    }
    std::vector<void *> pointers;
    for (Buffer &buffer : buffers)
      pointers.push_back(buffer.bytes.data());
    jit::Result result = module->callUnchecked(kernel.name, pointers);
    if (!result.ok()) {
      errs << "attnc: error: @" << kernel.name << " failed: "
           << (result.error.empty() ? "status " + std::to_string(result.status)
                                    : result.error)
           << "\n";
      return 1;
    }
    // The forward against the spec's own roundings of f16/bf16 results.
    mlir::FailureOr<std::vector<HostTensor>> expected =
        interpretSpec(func, inputs, /*roundResults=*/true);
    if (mlir::failed(expected))
      return 1;

    const double computeTolerance = computeToleranceOf(func);
    size_t resultIndex = 0;
    for (Buffer &buffer : buffers) {
      if (!buffer.spec.isOutput)
        continue;
      buffer.unpack();
      const HostTensor &want = (*expected)[resultIndex++];
      double err = ref::maxRelativeError(buffer.values.data.data(),
                                         want.data.data(), want.data.size());
      bool ok =
          err <= std::max(toleranceFor(buffer.spec.dtype), computeTolerance);
      allOk &= ok;
      outs << "  forward   " << llvm::left_justify(buffer.spec.name, 12)
           << " max relative error " << llvm::format("%.2e", err)
           << (options.check && !ok ? "  FAILED" : "") << "\n";
    }

    // Gradients: <f>_bwd against central differences of the float64
    // reference along a random direction of each float input.
    const jit::EntryPoint *fwd = module->find(kernel.name + "_fwd");
    const jit::EntryPoint *bwd = module->find(kernel.name + "_bwd");
    if (!options.backward || !fwd || !bwd)
      continue;
    std::vector<Buffer> fwdBuffers;
    std::vector<void *> fwdPointers;
    size_t input = 0;
    for (const jit::TensorSpec &arg : fwd->args) {
      fwdBuffers.emplace_back(arg);
      if (!arg.isOutput)
        fwdBuffers.back() = buffers[input++];
      fwdPointers.push_back(fwdBuffers.back().bytes.data());
    }
    result = module->callUnchecked(fwd->name, fwdPointers);
    if (!result.ok()) {
      errs << "attnc: error: @" << fwd->name << " failed\n";
      return 1;
    }
    std::vector<Buffer> bwdBuffers;
    std::vector<void *> bwdPointers;
    std::vector<HostTensor> cotangents;
    for (size_t k = 0; k < bwd->args.size(); ++k) {
      const jit::TensorSpec &arg = bwd->args[k];
      if (k < fwdBuffers.size()) {
        bwdBuffers.push_back(fwdBuffers[k]);
      } else {
        bwdBuffers.emplace_back(arg);
        if (!arg.isOutput) {
          for (double &x : bwdBuffers.back().values.data)
            x = double(rng() >> 11) / double(1ull << 53) * 2 - 1;
          bwdBuffers.back().pack();
          cotangents.push_back(bwdBuffers.back().values);
        }
      }
    }
    for (Buffer &buffer : bwdBuffers)
      bwdPointers.push_back(buffer.bytes.data());
    result = module->callUnchecked(bwd->name, bwdPointers);
    if (!result.ok()) {
      errs << "attnc: error: @" << bwd->name << " failed\n";
      return 1;
    }

    // L(x) = sum over float results of <result, cotangent>.
    std::vector<size_t> floatResults;
    for (size_t r = 0, e = func.getNumResults(); r < e; ++r)
      if (mlir::isa<mlir::FloatType>(
              mlir::cast<mlir::RankedTensorType>(func.getResultTypes()[r])
                  .getElementType()))
        floatResults.push_back(r);
    // Non-finite results (the -inf LSE of a row the mask empties) are
    // constants of the inputs: they add nothing.
    auto loss = [&](const std::vector<HostTensor> &x) -> double {
      mlir::FailureOr<std::vector<HostTensor>> y = interpretSpec(func, x);
      double total = 0;
      for (size_t c = 0; c < floatResults.size(); ++c) {
        const std::vector<double> &values = (*y)[floatResults[c]].data;
        for (size_t i = 0; i < values.size(); ++i)
          if (std::isfinite(values[i]))
            total += values[i] * cotangents[c].data[i];
      }
      return total;
    };
    // The outputs of <f>_bwd: one gradient per float input, in order.
    std::vector<Buffer *> gradients;
    for (size_t k = 0; k < bwd->args.size(); ++k)
      if (bwd->args[k].isOutput)
        gradients.push_back(&bwdBuffers[k]);
    // The largest gradient element: a gradient that is zero in exact
    // arithmetic (dQ and dK when every row sees one key) comes out as
    // rounding noise, which its own magnitude cannot judge; errors are
    // also judged against 1e-3 of this.
    double largestGradient = 0;
    for (Buffer *grad : gradients) {
      grad->unpack();
      for (double g : grad->values.data)
        largestGradient = std::max(largestGradient, std::fabs(g));
    }
    auto nextGradient = gradients.begin();
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!isFloat(entry->args[k].dtype))
        continue;
      Buffer &grad = **nextGradient++;
      std::vector<double> direction(inputs[k].data.size());
      for (double &x : direction)
        x = double(rng() >> 11) / double(1ull << 53) * 2 - 1;
      const double h = 1e-6;
      std::vector<HostTensor> plus = inputs, minus = inputs;
      for (size_t i = 0; i < direction.size(); ++i) {
        plus[k].data[i] += h * direction[i];
        minus[k].data[i] -= h * direction[i];
      }
      double numeric = (loss(plus) - loss(minus)) / (2 * h);
      double analytic = dot(grad.values.data, direction), scale = 1e-30,
             floor = 0;
      for (size_t i = 0; i < direction.size(); ++i) {
        scale += std::fabs(grad.values.data[i] * direction[i]);
        floor += 1e-3 * largestGradient * std::fabs(direction[i]);
      }
      scale = std::max(scale, floor);
      double err = std::fabs(analytic - numeric) / std::max(scale, std::fabs(numeric));
      bool ok =
          err <= std::max(toleranceFor(grad.spec.dtype), computeTolerance);
      allOk &= ok;
      outs << "  gradient  " << llvm::left_justify(grad.spec.name, 12)
           << " relative error " << llvm::format("%.2e", err)
           << " (directional, central differences of the float64 reference)"
           << (options.check && !ok ? "  FAILED" : "") << "\n";
    }
  }
  if (options.check)
    outs << (allOk ? "check passed\n" : "check FAILED\n");
  return options.check && !allOk ? 1 : 0;
}

} // namespace attnc
