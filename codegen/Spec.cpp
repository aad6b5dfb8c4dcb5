// Parsing and validating a spec (see Spec.h).
#include "codegen/Spec.h"

#include "dialect/AttnOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace attnc {

void registerAttncDialects(DialectRegistry &registry) {
  registry.insert<attn::AttnDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

namespace {

std::optional<std::string> dtypeOf(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return std::nullopt;
}

bool isCIdentifier(StringRef name) {
  if (name.empty() || !(isalpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name, [](char c) { return isalnum(c) || c == '_'; });
}

/// A C identifier from an SSA name such as "%x" or "%q.1"; `fallback`
/// when nothing usable is left.
std::string identifierFrom(StringRef ssaName, const std::string &fallback) {
  std::string name;
  for (char c : ssaName.drop_front(ssaName.starts_with("%") ? 1 : 0))
    name.push_back(isalnum(c) ? c : '_');
  if (name.empty() || isdigit(name[0]))
    return fallback;
  return name;
}

LogicalResult checkKernelType(Operation *op, Type type, const Twine &what,
                              KernelArg &arg) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  std::optional<std::string> dtype =
      tensor ? dtypeOf(tensor.getElementType()) : std::nullopt;
  if (!tensor || !tensor.hasStaticShape() || !dtype)
    return op->emitError() << what
                           << " must be a statically shaped tensor of f32, "
                              "f16, bf16, i32 or i64, got "
                           << type;
  arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  arg.dtype = *dtype;
  return success();
}

/// Only graph-level ops may appear in a kernel body: attn, func.return and
/// func.call, and constants and casts from arith/math/tensor.
LogicalResult checkBody(func::FuncOp func) {
  for (Operation &op : func.getBody().getOps()) {
    Dialect *dialect = op.getDialect();
    if (dialect && (isa<attn::AttnDialect, arith::ArithDialect,
                        math::MathDialect, tensor::TensorDialect>(dialect) ||
                    isa<func::ReturnOp, func::CallOp>(op)))
      continue;
    return op.emitError() << "'" << op.getName()
                          << "' is not supported in an attnc spec; use attn, "
                             "arith, math and tensor ops";
  }
  return success();
}

} // namespace

FailureOr<Spec> parseSpec(llvm::SourceMgr &sourceMgr, MLIRContext &context) {
  Spec spec;
  AsmParserState asmState;
  Block block;
  ParserConfig config(&context, /*verifyAfterParse=*/false);
  if (failed(parseAsmSourceFile(sourceMgr, &block, config, &asmState)))
    return failure();
  if (!llvm::hasSingleElement(block) || !isa<ModuleOp>(block.front())) {
    if (block.empty())
      return emitError(UnknownLoc::get(&context), "the spec is empty");
    // Top-level ops without a module: wrap them as the parser would.
    OpBuilder b(&context);
    auto module = ModuleOp::create(b, block.front().getLoc());
    module.getBody()->getOperations().splice(
        module.getBody()->begin(), block.getOperations());
    spec.module = module;
  } else {
    auto module = cast<ModuleOp>(block.front());
    module->remove();
    spec.module = module;
  }
  if (failed(verify(*spec.module)))
    return failure();

  bool anyKernel = false;
  for (Operation &op : spec.module->getBody()->getOperations()) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (!func)
      return op.emitError() << "'" << op.getName()
                            << "' is not supported at the top level of an "
                               "attnc spec; use func.func";
    if (func.isExternal())
      return func.emitError("a spec function must have a body");
    if (failed(checkBody(func)))
      return failure();
    if (!func.isPublic())
      continue;
    anyKernel = true;
    KernelSignature kernel;
    kernel.name = func.getSymName().str();
    if (!isCIdentifier(kernel.name) || kernel.name.rfind("__attnc", 0) == 0)
      return func.emitError() << "kernel name '" << kernel.name
                              << "' must be a C identifier not starting "
                                 "with __attnc";
    llvm::StringSet<> used;
    auto unique = [&](std::string name) {
      std::string candidate = name;
      for (int k = 1; !used.insert(candidate).second; ++k)
        candidate = name + "_" + std::to_string(k);
      return candidate;
    };
    const AsmParserState::BlockDefinition *blockDef =
        asmState.getBlockDef(&func.getBody().front());
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      KernelArg arg;
      if (failed(checkKernelType(func, type,
                                 "argument " + Twine(i) + " of @" +
                                     kernel.name,
                                 arg)))
        return failure();
      std::string fallback = "arg" + std::to_string(i);
      arg.name = fallback;
      if (blockDef && i < blockDef->arguments.size()) {
        llvm::SMRange range = blockDef->arguments[i].loc;
        arg.name = identifierFrom(
            StringRef(range.Start.getPointer(),
                      range.End.getPointer() - range.Start.getPointer()),
            fallback);
      }
      arg.name = unique(arg.name);
      kernel.args.push_back(std::move(arg));
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      KernelArg arg;
      arg.isOutput = true;
      if (failed(checkKernelType(func, type,
                                 "result " + Twine(i) + " of @" + kernel.name,
                                 arg)))
        return failure();
      std::string fallback = "result" + std::to_string(i);
      arg.name = fallback;
      Value returned = ret.getOperand(i);
      if (Operation *def = returned.getDefiningOp())
        if (const AsmParserState::OperationDefinition *opDef =
                asmState.getOpDef(def))
          if (!opDef->resultGroups.empty() &&
              opDef->resultGroups.size() == def->getNumResults()) {
            llvm::SMRange range =
                opDef->resultGroups[cast<OpResult>(returned).getResultNumber()]
                    .definition.loc;
            arg.name = identifierFrom(
                StringRef(range.Start.getPointer(),
                          range.End.getPointer() - range.Start.getPointer()),
                fallback);
          }
      arg.name = unique(arg.name);
      kernel.args.push_back(std::move(arg));
    }
    spec.kernels.push_back(std::move(kernel));
  }
  if (!anyKernel)
    return emitError(spec.module->getLoc(),
                     "the spec has no public function to compile");
  return spec;
}

std::string cTypeOf(const std::string &dtype) {
  if (dtype == "f32")
    return "float";
  if (dtype == "i32")
    return "int32_t";
  if (dtype == "i64")
    return "int64_t";
  return "uint16_t"; // f16 and bf16 bits
}

} // namespace attnc
