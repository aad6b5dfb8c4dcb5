// In-process compilation with the MLIR ExecutionEngine (see Jit.h).
#include "codegen/Jit.h"

#include "codegen/Passes.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"

namespace attnc::jit {

Kernels::~Kernels() = default;

llvm::Expected<std::unique_ptr<Kernels>>
Kernels::compile(llvm::StringRef specText, const Options &options) {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;

  std::unique_ptr<Kernels> result(new Kernels());
  mlir::DialectRegistry registry;
  registerAttncDialects(registry);
  result->context = std::make_unique<mlir::MLIRContext>(registry);
  mlir::MLIRContext &context = *result->context;
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(specText, "spec.mlir"),
      llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context,
                                           diagnosticStream);
  auto failure = [&]() {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   diagnostics);
  };

  mlir::FailureOr<Spec> spec = parseSpec(sourceMgr, context);
  if (mlir::failed(spec))
    return failure();
  if (options.backward && mlir::failed(deriveBackward(*spec)))
    return failure();
  mlir::PassManager pm(&context);
  buildCpuPipeline(pm);
  if (mlir::failed(pm.run(*spec->module)))
    return failure();

  mlir::ExecutionEngineOptions engineOptions;
  auto transformer = mlir::makeOptimizingTransformer(options.optLevel,
                                                     /*sizeLevel=*/0, nullptr);
  engineOptions.transformer = transformer;
  auto engine = mlir::ExecutionEngine::create(*spec->module, engineOptions);
  if (!engine)
    return engine.takeError();
  result->engine = std::move(*engine);
  result->kernels = std::move(spec->kernels);
  return result;
}

const KernelSignature *Kernels::find(llvm::StringRef name) const {
  for (const KernelSignature &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

llvm::Expected<int32_t> Kernels::call(llvm::StringRef name,
                                      llvm::ArrayRef<void *> buffers) const {
  const KernelSignature *kernel = find(name);
  if (!kernel)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no kernel named '" + name + "'");
  if (buffers.size() != kernel->args.size())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "kernel '" + name + "' takes " + llvm::Twine(kernel->args.size()) +
            " buffers, got " + llvm::Twine(buffers.size()));
  // The packed interface takes a pointer to each argument and to the result.
  std::vector<void *> buffersCopy(buffers.begin(), buffers.end());
  int32_t status = -1;
  llvm::SmallVector<void *> packed;
  for (void *&buffer : buffersCopy)
    packed.push_back(&buffer);
  packed.push_back(&status);
  if (llvm::Error error = engine->invokePacked(name, packed))
    return std::move(error);
  return status;
}

} // namespace attnc::jit
