// Parsing and validating a spec (see Spec.h).
#include "codegen/Spec.h"
#include "codegen/DynamicBatch.h"
#include "codegen/SourceGuards.h"

#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/AsmParser/AsmParserState.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace attnc {

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

/// C and C++ keywords and the types the header uses: not usable as names in
/// a header that must compile as both.
bool isReservedInHeader(StringRef name) {
  static const llvm::StringSet<> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand",
      "bitor", "bool", "break", "case", "catch", "char", "char8_t",
      "char16_t", "char32_t", "class", "compl", "concept", "const",
      "consteval", "constexpr", "constinit", "const_cast", "continue",
      "co_await", "co_return", "co_yield", "decltype", "default", "delete",
      "do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "inline",
      "int", "long", "mutable", "namespace", "new", "noexcept", "not",
      "not_eq", "nullptr", "operator", "or", "or_eq", "private",
      "protected", "public", "register", "reinterpret_cast", "requires",
      "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template",
      "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
      "typename", "union", "unsigned", "using", "virtual", "void",
      "volatile", "wchar_t", "while", "xor", "xor_eq", "int8_t", "int16_t",
      "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
      "size_t", "NULL"};
  return words.contains(name) || name.starts_with("_Bool") ||
         name.starts_with("_Complex");
}

/// Symbols a kernel object links against or that every program has: a
/// kernel of that name would replace them for the whole program.
bool isReservedSymbol(StringRef name) {
  static const llvm::StringSet<> symbols = {"main",
                                            "malloc",
                                            "free",
                                            "calloc",
                                            "realloc",
                                            "aligned_alloc",
                                            "memcpy",
                                            "memmove",
                                            "memset",
                                            "abort",
                                            "exit",
                                            "printf",
                                            "_mlir_memref_to_llvm_alloc",
                                            "_mlir_memref_to_llvm_free"};
  static const llvm::StringSet<> mathRoots = {
      "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow",
      "sqrt", "cbrt", "sin", "cos", "tan", "asin", "acos", "atan",
      "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
      "erfc", "fabs", "floor", "ceil", "round", "roundeven", "trunc",
      "rint", "fmod", "fma", "fmin", "fmax", "copysign", "hypot",
      "ldexp", "frexp", "modf", "nearbyint", "tgamma", "lgamma"};
  if (symbols.contains(name) || mathRoots.contains(name))
    return true;
  // The float and long double variants of <math.h> (expf, tanhl, ...).
  return (name.ends_with("f") || name.ends_with("l")) &&
         mathRoots.contains(name.drop_back());
}

/// A C identifier from the SSA name such as "%x" or "%q.1" that `range`
/// covers in the source; `fallback` when nothing usable is left.
std::string identifierFrom(llvm::SMRange range, const std::string &fallback) {
  StringRef ssaName(range.Start.getPointer(),
                    range.End.getPointer() - range.Start.getPointer());
  std::string name;
  for (char c : ssaName.drop_front(ssaName.starts_with("%") ? 1 : 0))
    name.push_back(isalnum(c) ? c : '_');
  if (name.empty() || isdigit(name[0]))
    return fallback;
  if (isReservedInHeader(name))
    name += "_";
  return name;
}

/// The largest tensor a kernel may touch, in bytes: far beyond any machine,
/// and far enough below 2^63 that no size computation overflows.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 46;

/// Checks that a tensor of `shape` stays below kMaxTensorBytes.
LogicalResult checkSize(Location loc, ArrayRef<int64_t> shape,
                        const Twine &what) {
  int64_t bytes = 4;
  for (int64_t dim : shape) {
    if (dim > 0 && bytes > kMaxTensorBytes / dim)
      return emitError(loc) << what << ": too large (over 2^46 bytes)";
    bytes *= std::max<int64_t>(dim, 1);
  }
  return success();
}

LogicalResult checkKernelType(Location loc, Type type, const Twine &what,
                              KernelArg &arg) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  std::optional<std::string> dtype =
      tensor ? dtypeOf(tensor.getElementType()) : std::nullopt;
  if (!tensor || !tensor.hasStaticShape() || !dtype)
    return emitError(loc) << what
                          << " must be a ranked tensor of f32, f16, bf16, "
                             "i32 or i64 (static sizes, the first may be `?`: "
                             "a dynamic batch), got "
                          << type;
  arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  arg.dtype = *dtype;
  return checkSize(loc, tensor.getShape(), what);
}

/// The flash kernels' code grows with the head dimension (parts of them are
/// unrolled over its vectors): D = 4096 compiled in 1.1 s, D = 65536 in
/// over a minute, and 2^31 exhausted memory.
constexpr int64_t kMaxHeadDim = 4096;

LogicalResult checkHeadDim(Operation &op, int64_t dim, StringRef of) {
  if (dim <= kMaxHeadDim)
    return success();
  return op.emitError() << "the head dimension of the " << of << ", " << dim
                        << ", is above " << kMaxHeadDim
                        << ", the largest attnc compiles";
}

/// attn.append writes into its cache's buffer: the cache must be an
/// argument of a kernel that nothing else reads (so that bufferization
/// writes the caller's memory and copies nothing), and its result must be
/// read (an unread append would be erased).
LogicalResult checkAppend(func::FuncOp func, attn::AppendOp append) {
  auto arg = dyn_cast<BlockArgument>(append.getCache());
  if (!func.isPublic() || !arg || arg.getOwner() != &func.getBody().front())
    return append.emitError()
           << "attn.append writes into the caller's KV cache: its cache must "
              "be an argument of a public function (a kernel)";
  if (!arg.hasOneUse())
    return append.emitError()
           << "the cache argument of attn.append is updated in place, so "
              "nothing else may read it; read the append's result instead";
  if (append.getResult().use_empty())
    return append.emitError()
           << "the result of attn.append is never read; pass it to the "
              "attn.attention that reads the cache";
  return success();
}

/// Only graph-level ops may appear in a function body: attn ops, constants,
/// func.call and func.return; every tensor they touch has a sane size.
LogicalResult checkBody(func::FuncOp func) {
  for (Operation &op : func.getBody().getOps()) {
    if (!op.getDialect() ||
        !(isa<attn::AttnDialect>(op.getDialect()) ||
          isa<arith::ConstantOp, func::ReturnOp, func::CallOp>(op)))
      return op.emitError() << "'" << op.getName()
                            << "' is not supported in the body of an attnc "
                               "spec function; use attn ops, arith.constant "
                               "and func.call";
    for (Type type : op.getResultTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(type))
        if (failed(checkSize(op.getLoc(), tensor.getShape(),
                             "the result of '" + op.getName().getStringRef() +
                                 "'")))
          return failure();
    // The fused op is lowered through its Sq x Skv scores for now.
    if (auto attention = dyn_cast<attn::AttentionOp>(op)) {
      auto q = attention.getQuery().getType().getShape();
      if (failed(checkSize(op.getLoc(),
                           {q[0], q[1], q[2], attn::keyCountOf(attention)},
                           "the Sq x Skv scores of 'attn.attention'")) ||
          failed(checkHeadDim(op, q[3], "query and key")) ||
          failed(checkHeadDim(op, shapeOf(attention.getValue())[3], "value")))
        return failure();
    }
    if (auto stats = dyn_cast<attn::AttentionStatsOp>(op)) {
      auto q = stats.getQuery().getType().getShape();
      auto k = stats.getKey().getType().getShape();
      if (failed(checkSize(op.getLoc(), {q[0], q[1], q[2], k[2]},
                           "the Sq x Skv scores of 'attn.attention_stats'")) ||
          failed(checkHeadDim(op, q[3], "query and key")))
        return failure();
    }
    if (auto distill = dyn_cast<attn::DistillOp>(op)) {
      auto q = distill.getQuery().getType().getShape();
      auto k = distill.getKey().getType().getShape();
      if (failed(checkSize(op.getLoc(), {q[0], q[1], q[2], k[2]},
                           "the Sq x Skv scores of 'attn.distill'")) ||
          failed(checkHeadDim(op, q[3], "student's query and key")) ||
          failed(checkHeadDim(op, shapeOf(distill.getTeacherQuery())[3],
                              "teacher's query and key")))
        return failure();
    }
    if (auto append = dyn_cast<attn::AppendOp>(op))
      if (failed(checkAppend(func, append)))
        return failure();
    if (auto call = dyn_cast<func::CallOp>(op))
      if (auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
              call, call.getCalleeAttr());
          callee && !callee.getOps<attn::AppendOp>().empty())
        return call.emitError()
               << "@" << call.getCallee()
               << " appends to a KV cache in place (attn.append), so it "
                  "cannot be called: call it from the host";
    if (auto scores = dyn_cast<attn::ScoresOp>(op))
      if (failed(
              checkHeadDim(op, shapeOf(scores.getQuery())[3], "query and key")))
        return failure();
    if (auto apply = dyn_cast<attn::ApplyOp>(op))
      if (failed(checkHeadDim(op, shapeOf(apply.getValue())[3], "value")))
        return failure();
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::SmallPtrSet<Value, 4> returned;
  for (Value value : ret.getOperands())
    if (!returned.insert(value).second)
      return ret.emitError("returns the same value twice; return it once");
  return success();
}

/// Kernels run on fixed stacks: reject recursion through func.call.
LogicalResult checkNoRecursion(ModuleOp module) {
  SymbolTable symbols(module);
  DenseMap<Operation *, int> state; // 1: on the path, 2: done
  std::function<LogicalResult(func::FuncOp)> visit =
      [&](func::FuncOp func) -> LogicalResult {
    int &s = state[func];
    if (s == 2)
      return success();
    s = 1;
    for (auto call : func.getBody().getOps<func::CallOp>()) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee)
        continue; // the verifier reports unknown callees
      if (state.lookup(callee) == 1)
        return call.emitError() << "recursive call of @" << call.getCallee()
                                << " is not supported";
      if (failed(visit(callee)))
        return failure();
    }
    state[func] = 2;
    return success();
  };
  for (auto func : module.getOps<func::FuncOp>())
    if (failed(visit(func)))
      return failure();
  return success();
}

/// The spec's module: the parsed one, or its top-level ops wrapped in one
/// as the parser would; its dynamic batch made `batch`, then verified.
FailureOr<OwningOpRef<ModuleOp>> parseModule(llvm::SourceMgr &sourceMgr,
                                             MLIRContext &context,
                                             AsmParserState &asmState,
                                             int64_t batch) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  auto locationOf = [&](const char *at) -> Location {
    auto [line, column] =
        sourceMgr.getLineAndColumn(llvm::SMLoc::getFromPointer(at));
    return FileLineColLoc::get(&context, buffer->getBufferIdentifier(), line,
                               column);
  };
  if (std::optional<SourceHazard> hazard =
          findSourceHazard(buffer->getBuffer()))
    return emitError(locationOf(hazard->at)) << hazard->message;
  auto block = std::make_unique<Block>();
  ParserConfig config(&context, /*verifyAfterParse=*/false);
  // MLIR 22's parser may crash on inputs not yet known (a known one is
  // refused above). Where the tool has enabled crash recovery (attnc,
  // attnc-opt), such a crash becomes this error; without it (a JIT host's
  // process) RunSafely simply calls the parser.
  LogicalResult parsed = failure();
  llvm::CrashRecoveryContext recovery;
  if (!recovery.RunSafely([&] {
        parsed = parseAsmSourceFile(sourceMgr, block.get(), config, &asmState);
      })) {
    // What the parser left is in an unknown state: leaked, not destroyed.
    (void)block.release();
    return emitError(locationOf(buffer->getBufferStart()))
           << "the MLIR parser crashed on this spec (a bug in MLIR 22's "
              "parser, reached by invalid input)";
  }
  if (failed(parsed))
    return failure();
  OwningOpRef<ModuleOp> module;
  if (!llvm::hasSingleElement(*block) || !isa<ModuleOp>(block->front())) {
    if (block->empty())
      return emitError(locationOf(buffer->getBufferStart()),
                       "the spec is empty");
    OpBuilder b(&context);
    module = ModuleOp::create(b, block->front().getLoc());
    module->getBody()->getOperations().splice(module->getBody()->begin(),
                                              block->getOperations());
  } else {
    module = cast<ModuleOp>(block->front());
    (*module)->remove();
  }
  FailureOr<bool> batched = specializeBatch(*module, batch);
  if (failed(batched))
    return failure();
  if (failed(verify(*module))) {
    if (*batched)
      emitRemark(module->getLoc())
          << "the spec's dynamic batch (`?`) was checked as a batch of "
          << batch << ": every tensor with the batch needs `?` first";
    return failure();
  }
  return module;
}

/// Private helpers are called with the same kinds of tensors as kernels.
LogicalResult checkHelperTypes(func::FuncOp func) {
  KernelArg ignored;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (failed(checkKernelType(
            func.getArgument(i).getLoc(), type,
            "argument " + Twine(i) + " of @" + func.getSymName(), ignored)))
      return failure();
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (failed(checkKernelType(
            func.getLoc(), type,
            "result " + Twine(i) + " of @" + func.getSymName(), ignored)))
      return failure();
  return success();
}

/// The entry point of public `func`: its name checked, its arguments
/// named after their SSA names in the source and its results after the
/// values it returns (unique, C identifiers).
FailureOr<KernelSignature> kernelSignature(func::FuncOp func,
                                           AsmParserState &asmState) {
  KernelSignature kernel;
  kernel.name = func.getSymName().str();
  if (!isCIdentifier(kernel.name) || kernel.name.rfind("__attnc", 0) == 0)
    return func.emitError() << "kernel name '" << kernel.name
                            << "' must be a C identifier not starting "
                               "with __attnc";
  if (isReservedInHeader(kernel.name) || isReservedSymbol(kernel.name))
    return func.emitError()
           << "kernel name '" << kernel.name
           << "' is reserved (a C/C++ keyword or type, or a C library "
              "function kernels call); rename the function";
  llvm::StringSet<> used;
  auto unique = [&](std::string name) {
    std::string candidate = name;
    for (int k = 1; !used.insert(candidate).second; ++k)
      candidate = name + "_" + std::to_string(k);
    return candidate;
  };
  const AsmParserState::BlockDefinition *blockDef =
      asmState.getBlockDef(&func.getBody().front());
  ArrayRef<int64_t> slices;
  if (auto attr = func->getAttrOfType<DenseI64ArrayAttr>(
          attn::AttnDialect::BatchSlicesAttrHelper::getNameStr()))
    slices = attr.asArrayRef();
  auto batched = [&](size_t n) { return n < slices.size() && slices[n]; };
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    KernelArg arg;
    if (failed(checkKernelType(func.getArgument(i).getLoc(), type,
                               "argument " + Twine(i) + " of @" + kernel.name,
                               arg)))
      return failure();
    arg.updatedInPlace = attn::AppendOp::isAppendedTo(func.getArgument(i));
    arg.batched = batched(i);
    std::string fallback = "arg" + std::to_string(i);
    arg.name = fallback;
    if (blockDef && i < blockDef->arguments.size())
      arg.name = identifierFrom(blockDef->arguments[i].loc, fallback);
    arg.name = unique(arg.name);
    kernel.args.push_back(std::move(arg));
  }
  for (auto [n, bound] : integerInputBounds(func)) {
    kernel.args[n].maxValue = bound.max;
    kernel.args[n].nondecreasing = bound.sorted;
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    KernelArg arg;
    arg.isOutput = true;
    if (failed(checkKernelType(func.getLoc(), type,
                               "result " + Twine(i) + " of @" + kernel.name,
                               arg)))
      return failure();
    arg.batched = batched(func.getNumArguments() + i);
    std::string fallback = "result" + std::to_string(i);
    arg.name = fallback;
    Value returned = ret.getOperand(i);
    if (Operation *def = returned.getDefiningOp())
      if (const AsmParserState::OperationDefinition *opDef =
              asmState.getOpDef(def))
        if (!opDef->resultGroups.empty() &&
            opDef->resultGroups.size() == def->getNumResults()) {
          arg.name = identifierFrom(
              opDef->resultGroups[cast<OpResult>(returned).getResultNumber()]
                  .definition.loc,
              fallback);
        }
    arg.name = unique(arg.name);
    kernel.args.push_back(std::move(arg));
  }
  return kernel;
}

} // namespace

FailureOr<Spec> parseSpec(llvm::SourceMgr &sourceMgr, MLIRContext &context,
                          int64_t batch) {
  AsmParserState asmState;
  FailureOr<OwningOpRef<ModuleOp>> module =
      parseModule(sourceMgr, context, asmState, batch);
  if (failed(module) || failed(checkNoRecursion(**module)))
    return failure();
  Spec spec;
  spec.module = std::move(*module);
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
    if (!func.isPublic()) {
      if (failed(checkHelperTypes(func)))
        return failure();
      continue;
    }
    FailureOr<KernelSignature> kernel = kernelSignature(func, asmState);
    if (failed(kernel))
      return failure();
    spec.kernels.push_back(std::move(*kernel));
  }
  if (spec.kernels.empty())
    return emitError(spec.module->getLoc(),
                     "the spec has no public function to compile");
  return spec;
}

/// What saved value `value` of @f_fwd is, for the header: attn-derive-backward
/// saves the results of attn.projection and the O and LSE of attn.attention
/// that @f does not return (DeriveBackward.cpp, savedValues), in the order
/// of @f_fwd's ops. An op is named by its rank among the ops of its kind in
/// @f_fwd and by its line in the spec (the first op of a fused chain).
static std::string describeSaved(func::FuncOp fwd, Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getParentOp() != fwd)
    return "";
  std::string where;
  if (auto file = def->getLoc()->findInstanceOf<FileLineColRange>())
    where = (" (" + llvm::sys::path::filename(file.getFilename().getValue()) +
             ":" + Twine(file.getStartLine()) + ")")
                .str();
  auto rank = [&](auto op) {
    unsigned n = 0;
    for (auto other : fwd.getBody().getOps<decltype(op)>()) {
      if (other == op)
        break;
      ++n;
    }
    return n;
  };
  if (auto attention = dyn_cast<attn::AttentionOp>(def))
    return (value == attention.getLse()
                ? "the LSE (log-sum-exp of each query row's scores) of "
                  "attention #" +
                      Twine(rank(attention)) + where
                : "the output O of attention #" + Twine(rank(attention)) +
                      where)
        .str();
  if (auto projection = dyn_cast<attn::ProjectionOp>(def)) {
    std::string text =
        ("the result of projection #" + Twine(rank(projection)) + where).str();
    // Its role in the first attention it feeds.
    for (Operation *user : projection->getUsers())
      if (auto attention = dyn_cast<attn::AttentionOp>(user)) {
        StringRef role = value == attention.getQuery()   ? "Q"
                         : value == attention.getKey()   ? "K"
                         : value == attention.getValue() ? "V"
                                                         : "";
        if (!role.empty()) {
          text += (", the " + role + " of attention #" + Twine(rank(attention)))
                      .str();
          break;
        }
      }
    return text;
  }
  return "";
}

bool hasDynamicBatch(const Spec &spec) {
  for (const KernelSignature &kernel : spec.kernels)
    for (const KernelArg &arg : kernel.args)
      if (arg.batched)
        return true;
  return false;
}

/// Marks `func` with attn.batch_slices for the batched arguments of
/// `kernel` (its entry point's), attn.batch_sums for its outputs summed over
/// the batch, and attn.batch_uneven where integer inputs have the batch.
static void markBatchSlices(func::FuncOp func, const KernelSignature &kernel) {
  SmallVector<Type> types(func.getArgumentTypes());
  llvm::append_range(types, func.getResultTypes());
  SmallVector<int64_t> slices, sums;
  for (auto [arg, type] : llvm::zip_equal(kernel.args, types)) {
    slices.push_back(arg.batched ? batchSliceBytes(type) : 0);
    sums.push_back(
        arg.summedOverBatch ? 4 * cast<ShapedType>(type).getNumElements() : 0);
  }
  MLIRContext *ctx = func.getContext();
  func->setAttr(attn::AttnDialect::BatchSlicesAttrHelper::getNameStr(),
                DenseI64ArrayAttr::get(ctx, slices));
  bool summed = llvm::any_of(sums, [](int64_t n) { return n > 0; });
  if (summed)
    func->setAttr(attn::AttnDialect::BatchSumsAttrHelper::getNameStr(),
                  DenseI64ArrayAttr::get(ctx, sums));
  // (As specializeBatch marks @f.)
  if (llvm::any_of(kernel.args, [](const KernelArg &arg) {
        return arg.batched && !arg.isOutput &&
               (arg.dtype == "i32" || arg.dtype == "i64");
      }))
    func->setAttr(attn::AttnDialect::BatchUnevenAttrHelper::getNameStr(),
                  UnitAttr::get(ctx));
}

void appendDerivedSignatures(Spec &spec) {
  ModuleOp module = *spec.module;
  auto argOf = [](Type type, std::string name, bool isOutput) {
    KernelArg arg;
    auto tensor = cast<RankedTensorType>(type);
    arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    arg.dtype = *dtypeOf(tensor.getElementType());
    arg.name = std::move(name);
    arg.isOutput = isOutput;
    return arg;
  };
  std::vector<KernelSignature> derived;
  for (const KernelSignature &kernel : spec.kernels) {
    auto fwd = module.lookupSymbol<func::FuncOp>(kernel.name + "_fwd");
    auto bwd = module.lookupSymbol<func::FuncOp>(kernel.name + "_bwd");
    if (!fwd || !bwd)
      continue;
    bool batched = llvm::any_of(
        kernel.args, [](const KernelArg &arg) { return arg.batched; });
    std::vector<KernelArg> inputs, results;
    for (const KernelArg &arg : kernel.args)
      (arg.isOutput ? results : inputs).push_back(arg);
    // Derived names (saved<k>, d_<name>) must not collide with the spec's.
    llvm::StringSet<> taken;
    for (const KernelArg &arg : kernel.args)
      taken.insert(arg.name);
    auto fresh = [&](std::string name) {
      std::string candidate = name;
      for (int k = 1; taken.contains(candidate); ++k)
        candidate = name + "_" + std::to_string(k);
      taken.insert(candidate);
      return candidate;
    };
    std::vector<std::string> savedNames;
    for (size_t k = results.size(); k < fwd.getNumResults(); ++k)
      savedNames.push_back(fresh("saved" + std::to_string(k - results.size())));
    auto savedName = [&](size_t k) { return savedNames[k]; };
    std::vector<std::string> resultGradNames, inputGradNames;
    for (const KernelArg &arg : results)
      resultGradNames.push_back(fresh("d_" + arg.name));
    for (const KernelArg &arg : inputs)
      inputGradNames.push_back(fresh("d_" + arg.name));

    KernelSignature forward{fwd.getSymName().str(), kernel.args};
    TypeRange fwdResults = fwd.getResultTypes();
    auto fwdReturn = cast<func::ReturnOp>(fwd.getBody().back().getTerminator());
    std::vector<std::string> savedDescriptions;
    for (size_t k = results.size(); k < fwdResults.size(); ++k) {
      forward.args.push_back(
          argOf(fwdResults[k], savedName(k - results.size()), true));
      forward.args.back().description =
          describeSaved(fwd, fwdReturn.getOperand(k));
      // (Projections' results, O and LSE: each has the batch.)
      forward.args.back().batched = batched;
      savedDescriptions.push_back(forward.args.back().description);
    }

    // Inputs, results and saved values come in; gradients go out.
    KernelSignature backward{bwd.getSymName().str(), {}};
    TypeRange bwdInputs = bwd.getArgumentTypes();
    size_t next = 0;
    for (const KernelArg &arg : inputs) {
      backward.args.push_back(argOf(bwdInputs[next++], arg.name, false));
      backward.args.back().batched = arg.batched;
      backward.args.back().maxValue = arg.maxValue;
      backward.args.back().nondecreasing = arg.nondecreasing;
    }
    for (const KernelArg &arg : results) {
      backward.args.push_back(argOf(bwdInputs[next++], arg.name, false));
      backward.args.back().batched = arg.batched;
    }
    for (size_t k = 0; k + results.size() < fwdResults.size(); ++k) {
      backward.args.push_back(argOf(bwdInputs[next++], savedName(k), false));
      backward.args.back().description = savedDescriptions[k];
      backward.args.back().batched = batched;
    }
    for (auto [k, arg] : llvm::enumerate(results))
      if (arg.dtype != "i32" && arg.dtype != "i64") {
        backward.args.push_back(
            argOf(bwdInputs[next++], resultGradNames[k], false));
        backward.args.back().batched = arg.batched;
      }
    size_t output = 0;
    for (auto [k, arg] : llvm::enumerate(inputs))
      if (arg.dtype != "i32" && arg.dtype != "i64") {
        backward.args.push_back(argOf(bwd.getResultTypes()[output++],
                                      inputGradNames[k], true));
        backward.args.back().batched = arg.batched;
        backward.args.back().summedOverBatch = batched && !arg.batched;
      }
    if (batched) {
      markBatchSlices(fwd, forward);
      markBatchSlices(bwd, backward);
    }
    derived.push_back(std::move(forward));
    derived.push_back(std::move(backward));
  }
  llvm::append_range(spec.kernels, derived);
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
