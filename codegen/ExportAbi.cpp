// attn-export-abi: C entry points returning an attnc status code.
#include "codegen/Passes.h"
#include "dialect/AttnDialect.h"

#include "attnc/runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNEXPORTABI
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kImplPrefix = "__attnc_impl_";
constexpr llvm::StringLiteral kCheckPrefix = "__attnc_check_";

struct AttnExportAbiPass : attnc::impl::AttnExportAbiBase<AttnExportAbiPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!gpuFinish.empty()) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      finish = func::FuncOp::create(
          b, module.getLoc(), gpuFinish,
          FunctionType::get(&getContext(),
                            {LLVM::LLVMPointerType::get(&getContext())},
                            {b.getI32Type()}));
      finish.setPrivate();
    }
    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isPublic() && !func.isExternal())
        entries.push_back(func);
      else if (func.isPrivate() && !func.isExternal())
        setInternalLinkage(func);
    }
    // attn-lower-cpu marks modules whose kernels use AMX tiles.
    if (module->hasAttr(
            attnc::attn::AttnDialect::UsesAmxAttrHelper::getNameStr())) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      amxInit = func::FuncOp::create(
          b, module.getLoc(), "attnc_amx_init",
          FunctionType::get(&getContext(), {}, {b.getI32Type()}));
      amxInit.setPrivate();
    }
    if (!entries.empty())
      declareKernelFrameFunctions(module);
    for (func::FuncOp impl : entries)
      if (failed(exportEntry(impl)))
        return signalPassFailure();
    for (func::FuncOp fwd : entries)
      if (auto bytes = fwd->getAttrOfType<IntegerAttr>(
              attnc::attn::AttnDialect::SavedBytesAttrHelper::getNameStr()))
        if (failed(exportSizeQueries(fwd, bytes.getInt())))
          return signalPassFailure();
  }

  /// Whether some entry of an argument attn-mark-length-bounds marked
  /// (the lengths of a KV cache, a paged one's block table, varlen's
  /// offsets) is negative, past its attn.max_value or, with
  /// attn.nondecreasing, below the entry before it,
  /// as an i1 built at b over the entry's arguments (the marks are taken
  /// off `impl`); null when none is marked.
  Value anyLengthOutOfBounds(OpBuilder &b, func::FuncOp impl, Block *block,
                             bool keepMarks = false) {
    Location loc = impl.getLoc();
    StringRef name = attnc::attn::AttnDialect::MaxValueAttrHelper::getNameStr();
    StringRef sortedName =
        attnc::attn::AttnDialect::NondecreasingAttrHelper::getNameStr();
    Value any;
    for (unsigned i = 0, e = impl.getNumArguments(); i < e; ++i) {
      auto bound = impl.getArgAttrOfType<IntegerAttr>(i, name);
      if (!bound)
        continue;
      bool sorted = bool(impl.getArgAttr(i, sortedName));
      // Checked here, they have nothing to tell LLVM.
      if (!keepMarks) {
        impl.removeArgAttr(i, name);
        impl.removeArgAttr(i, sortedName);
      }
      // (Every entry, as one dimension: a block table is [B, M].)
      Value arg = block->getArgument(i);
      auto type = cast<MemRefType>(arg.getType());
      if (type.getRank() != 1) {
        ReassociationIndices all =
            llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
        arg = memref::CollapseShapeOp::create(
            b, loc, arg, ArrayRef<ReassociationIndices>{all});
      }
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      // (acc: whether an entry was out of bounds, and the entry before, 0
      // at the first: below it is out of order, or negative.)
      auto loop = scf::ForOp::create(
          b, loc, zero,
          arith::ConstantIndexOp::create(b, loc, type.getNumElements()),
          arith::ConstantIndexOp::create(b, loc, 1),
          ValueRange{arith::ConstantOp::create(b, loc, b.getBoolAttr(false)),
                     arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0))},
          [&](OpBuilder &nb, Location, Value e, ValueRange acc) {
            Value x = memref::LoadOp::create(nb, loc, arg, e);
            if (!x.getType().isInteger(64))
              x = arith::ExtSIOp::create(nb, loc, nb.getI64Type(), x);
            Value low = arith::CmpIOp::create(
                nb, loc, arith::CmpIPredicate::slt, x,
                sorted ? acc[1]
                       : arith::ConstantOp::create(nb, loc,
                                                   nb.getI64IntegerAttr(0)));
            Value high = arith::CmpIOp::create(
                nb, loc, arith::CmpIPredicate::sgt, x,
                arith::ConstantOp::create(nb, loc, bound));
            scf::YieldOp::create(
                nb, loc,
                ValueRange{arith::OrIOp::create(
                               nb, loc, acc[0],
                               arith::OrIOp::create(nb, loc, low, high)),
                           x});
          });
      any =
          any ? arith::OrIOp::create(b, loc, any, loop.getResult(0)).getResult()
              : loop.getResult(0);
    }
    return any;
  }

  /// int64_t f_saved_bytes(void) and f_workspace_bytes(void) for a derived
  /// @f_fwd: the bytes of what f_fwd saves for f_bwd, and of the workspace
  /// a caller must provide (0: kernels allocate their own scratch). With a
  /// dynamic batch they take it, int64_t f_saved_bytes(int64_t batch)
  /// (0 for a negative one).
  LogicalResult exportSizeQueries(func::FuncOp fwd, int64_t savedBytes) {
    StringRef name = fwd.getSymName();
    name.consume_front(kImplPrefix);
    auto entry = getOperation().lookupSymbol<func::FuncOp>(name);
    if (!name.consume_back("_fwd"))
      return success();
    bool batched =
        entry &&
        entry->hasAttr(
            attnc::attn::AttnDialect::BatchSlicesAttrHelper::getNameStr());
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(fwd);
    for (auto [suffix, value] :
         {std::pair<StringRef, int64_t>{"_saved_bytes", savedBytes},
          {"_workspace_bytes", 0}}) {
      std::string query = (name + suffix).str();
      if (SymbolTable::lookupSymbolIn(getOperation(), query))
        return fwd.emitError() << "cannot export the size query @" << query
                               << ": a symbol of that name exists";
      SmallVector<Type> inputs;
      if (batched)
        inputs.push_back(b.getI64Type());
      auto fn = func::FuncOp::create(
          b, fwd.getLoc(), query,
          FunctionType::get(&getContext(), inputs, {b.getI64Type()}));
      OpBuilder body = OpBuilder::atBlockBegin(fn.addEntryBlock());
      Location loc = fwd.getLoc();
      Value bytes =
          arith::ConstantOp::create(body, loc, body.getI64IntegerAttr(value));
      if (batched)
        bytes = arith::MulIOp::create(
            body, loc, bytes,
            arith::MaxSIOp::create(body, loc, fn.getArgument(0),
                                   arith::ConstantOp::create(
                                       body, loc, body.getI64IntegerAttr(0))));
      func::ReturnOp::create(body, loc, bytes);
    }
    return success();
  }

  /// Whether some buffer argument of `block` is null (an i1 built at b):
  /// every memref, and of the pointers only the first (the GPU runtime's
  /// context; a null stream is the default stream).
  Value anyNullArgument(OpBuilder &b, Location loc, Block *block) {
    Value anyNull = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    for (Value arg : block->getArguments()) {
      if (isa<LLVM::LLVMPointerType>(arg.getType())) {
        if (arg != block->getArgument(0))
          continue;
        Value null = LLVM::ZeroOp::create(b, loc, arg.getType());
        anyNull = arith::OrIOp::create(
            b, loc, anyNull,
            LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, arg, null));
        continue;
      }
      Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arg);
      Value isNull =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ptr, zero);
      anyNull = arith::OrIOp::create(b, loc, anyNull, isNull);
    }
    return anyNull;
  }

  /// For a kernel with a dynamic batch: @__attnc_check_f(buffers...) -> i32,
  /// what @f checks before it writes anything (null buffers, lengths out of
  /// bounds) as its status, which attn-batch-entries runs on every batch
  /// entry before the first one is computed.
  void exportCheck(func::FuncOp impl, func::FuncOp entry) {
    Location loc = impl.getLoc();
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(entry);
    auto check = func::FuncOp::create(
        b, loc, (kCheckPrefix + entry.getSymName()).str(),
        FunctionType::get(&getContext(), entry.getArgumentTypes(),
                          {b.getI32Type()}));
    check.setPrivate();
    setInternalLinkage(check);
    Block *block = check.addEntryBlock();
    b.setInsertionPointToStart(block);
    auto status = [&](int32_t code) {
      return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(code));
    };
    Value code = status(ATTNC_STATUS_OK);
    if (Value bad = anyLengthOutOfBounds(b, impl, block, /*keepMarks=*/true))
      code = arith::SelectOp::create(b, loc, bad, status(ATTNC_STATUS_BAD_SIZE),
                                     code);
    code = arith::SelectOp::create(b, loc, anyNullArgument(b, loc, block),
                                   status(ATTNC_STATUS_NULL_ARGUMENT), code);
    func::ReturnOp::create(b, loc, code);
  }

  /// For output `k` of a kernel with a dynamic batch that is summed over
  /// its entries (attn.batch_sums, `bytes` of f32): @__attnc_sum_f_k(part,
  /// acc), acc += part in f32, and @__attnc_store_f_k(acc, out), out = acc
  /// rounded to out's type, which attn-batch-entries calls around the
  /// entries.
  LogicalResult exportSumHelpers(func::FuncOp entry, unsigned k,
                                 int64_t bytes) {
    Location loc = entry.getLoc();
    auto out = dyn_cast<MemRefType>(entry.getArgumentTypes()[k]);
    Type f32 = Float32Type::get(&getContext());
    if (!out || !isa<FloatType>(out.getElementType()) ||
        out.getNumElements() * 4 != bytes)
      return entry.emitError()
             << "'"
             << attnc::attn::AttnDialect::BatchSumsAttrHelper::getNameStr()
             << "' must give the bytes of an f32 copy of a float buffer";
    int64_t n = out.getNumElements();
    auto accType = MemRefType::get({n}, f32);
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(entry);
    // One dimension of n elements, as `memref` holds them.
    auto flat = [&](Value memref) -> Value {
      auto type = cast<MemRefType>(memref.getType());
      if (type.getRank() == 1)
        return memref;
      if (type.getRank() == 0)
        return memref::ExpandShapeOp::create(
            b, loc, MemRefType::get({1}, type.getElementType()), memref,
            ArrayRef<ReassociationIndices>{});
      ReassociationIndices all =
          llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
      return memref::CollapseShapeOp::create(
          b, loc, memref, ArrayRef<ReassociationIndices>{all});
    };
    auto helper = [&](StringRef prefix, TypeRange args,
                      function_ref<void(Value, Value, Value)> body) {
      OpBuilder::InsertionGuard guard(b);
      auto fn = func::FuncOp::create(
          b, loc, (prefix + entry.getSymName() + "_" + Twine(k)).str(),
          FunctionType::get(&getContext(), args, {}));
      fn.setPrivate();
      setInternalLinkage(fn);
      b.setInsertionPointToStart(fn.addEntryBlock());
      Value from = flat(fn.getArgument(0)), to = flat(fn.getArgument(1));
      scf::ForOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, 0),
          arith::ConstantIndexOp::create(b, loc, n),
          arith::ConstantIndexOp::create(b, loc, 1), ValueRange(),
          [&](OpBuilder &nb, Location, Value e, ValueRange) {
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
            body(from, to, e);
            scf::YieldOp::create(b, loc);
          });
      func::ReturnOp::create(b, loc);
    };
    helper("__attnc_sum_", {out, accType}, [&](Value part, Value acc, Value e) {
      Value x = memref::LoadOp::create(b, loc, part, e);
      if (x.getType() != f32)
        x = arith::ExtFOp::create(b, loc, f32, x);
      memref::StoreOp::create(
          b, loc,
          arith::AddFOp::create(b, loc, memref::LoadOp::create(b, loc, acc, e),
                                x),
          acc, e);
    });
    helper("__attnc_store_", {accType, out}, [&](Value acc, Value to, Value e) {
      Value x = memref::LoadOp::create(b, loc, acc, e);
      if (out.getElementType() != f32)
        x = arith::TruncFOp::create(b, loc, out.getElementType(), x);
      memref::StoreOp::create(b, loc, x, to, e);
    });
    return success();
  }

  /// Keeps a function out of the object's exported symbols.
  static void setInternalLinkage(func::FuncOp func) {
    func->setAttr(
        "llvm.linkage",
        LLVM::LinkageAttr::get(func.getContext(), LLVM::Linkage::Internal));
  }

  func::FuncOp amxInit; // the runtime's attnc_amx_init, when needed
  func::FuncOp finish;  // the GPU runtime's gpu-finish, for GPU targets
  // The runtime's kernel frame, and libc's _setjmp.
  func::FuncOp kernelEnter, kernelLeave;
  LLVM::LLVMFuncOp setJmp;

  /// Declares the functions every entry point calls.
  void declareKernelFrameFunctions(ModuleOp module) {
    MLIRContext *ctx = &getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto type = FunctionType::get(ctx, {ptrType}, {});
    kernelEnter =
        func::FuncOp::create(b, module.getLoc(), "attnc_kernel_enter", type);
    kernelLeave =
        func::FuncOp::create(b, module.getLoc(), "attnc_kernel_leave", type);
    kernelEnter.setPrivate();
    kernelLeave.setPrivate();
    setJmp = LLVM::LLVMFuncOp::create(
        b, module.getLoc(), "_setjmp",
        LLVM::LLVMFunctionType::get(b.getI32Type(), {ptrType}));
    // It returns twice: LLVM keeps what lives across it out of registers
    // the second return would not restore.
    setJmp.setPassthroughAttr(
        b.getArrayAttr({b.getStringAttr("returns_twice")}));
  }

  LogicalResult exportEntry(func::FuncOp impl) {
    MLIRContext *ctx = &getContext();
    Location loc = impl.getLoc();
    FunctionType type = impl.getFunctionType();
    if (type.getNumResults() != 0)
      return impl.emitError("attn-export-abi expects results passed as "
                            "out-parameters (run buffer-results-to-out-params "
                            "first)");
    ArrayRef<Type> buffers = type.getInputs();
    if (finish) {
      if (buffers.empty() || !isa<LLVM::LLVMPointerType>(buffers.front()))
        return impl.emitError("GPU kernels take the runtime context first "
                              "(run attn-gpu-host-context first)");
      // The context, and the stream where the target has one.
      while (!buffers.empty() && isa<LLVM::LLVMPointerType>(buffers.front()))
        buffers = buffers.drop_front();
    }
    for (Type input : buffers) {
      auto memref = dyn_cast<MemRefType>(input);
      if (!memref || !memref.hasStaticShape() ||
          !memref.getLayout().isIdentity())
        return impl.emitError("kernel arguments must be statically shaped, "
                              "row-major buffers; got ")
               << input;
    }

    std::string name = impl.getSymName().str();
    // Calls between kernels keep calling the implementation.
    auto implName = StringAttr::get(ctx, kImplPrefix.str() + name);
    if (failed(
            SymbolTable::replaceAllSymbolUses(impl, implName, getOperation())))
      return impl.emitError("cannot rename kernel @") << name;
    impl.setSymName(implName);
    impl.setPrivate();
    setInternalLinkage(impl);
    // Not inlined into the entry point, whose setjmp would restrict how
    // LLVM optimizes the whole kernel.
    impl->setAttr("passthrough",
                  ArrayAttr::get(ctx, {StringAttr::get(ctx, "noinline")}));

    OpBuilder b(ctx);
    b.setInsertionPointAfter(impl);
    auto entry = func::FuncOp::create(
        b, loc, name,
        FunctionType::get(ctx, type.getInputs(), {b.getI32Type()}));
    auto noalias =
        StringAttr::get(ctx, LLVM::LLVMDialect::getNoAliasAttrName());
    for (unsigned i = 0, e = type.getNumInputs(); i < e; ++i) {
      entry.setArgAttr(i, noalias, UnitAttr::get(ctx));
      impl.setArgAttr(i, noalias, UnitAttr::get(ctx));
    }
    // A kernel of one batch entry: attn-batch-entries loops over them.
    StringRef slices =
        attnc::attn::AttnDialect::BatchSlicesAttrHelper::getNameStr();
    if (Attribute attr = impl->removeAttr(slices)) {
      if (cast<DenseI64ArrayAttr>(attr).size() != type.getNumInputs())
        return impl.emitError()
               << "'" << slices << "' must give one size per buffer";
      entry->setAttr(slices, attr);
      StringRef uneven =
          attnc::attn::AttnDialect::BatchUnevenAttrHelper::getNameStr();
      if (Attribute unit = impl->removeAttr(uneven))
        entry->setAttr(uneven, unit);
      exportCheck(impl, entry);
      StringRef sums =
          attnc::attn::AttnDialect::BatchSumsAttrHelper::getNameStr();
      if (auto bytes =
              dyn_cast_or_null<DenseI64ArrayAttr>(impl->removeAttr(sums))) {
        if (bytes.size() != type.getNumInputs())
          return impl.emitError()
                 << "'" << sums << "' must give one size per buffer";
        for (auto [k, n] : llvm::enumerate(bytes.asArrayRef()))
          if (n && failed(exportSumHelpers(entry, k, n)))
            return failure();
        entry->setAttr(sums, bytes);
      }
    }

    Block *block = entry.addEntryBlock();
    b.setInsertionPointToStart(block);
    auto status = [&](OpBuilder &nb, int32_t code) {
      return arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(code))
          .getResult();
    };
    // The kernel frame (runtime.h's attnc_kernel_enter): the target a
    // failed allocation jumps back to, when the kernel returns
    // OUT_OF_MEMORY, and the floating-point mode of the work.
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    Value frame = LLVM::AllocaOp::create(
        b, loc, ptrType, b.getI8Type(),
        LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                 ATTNC_KERNEL_FRAME_BYTES),
        /*alignment=*/16);
    func::CallOp::create(b, loc, kernelEnter, ValueRange{frame});
    Value jumped = LLVM::ICmpOp::create(
        b, loc, LLVM::ICmpPredicate::ne,
        LLVM::CallOp::create(b, loc, setJmp, ValueRange{frame}).getResult(),
        LLVM::ConstantOp::create(b, loc, b.getI32Type(), 0));
    auto inFrame = scf::IfOp::create(b, loc, b.getI32Type(), jumped,
                                     /*withElseRegion=*/true);
    b.setInsertionPointToStart(inFrame.thenBlock());
    scf::YieldOp::create(b, loc, status(b, ATTNC_STATUS_OUT_OF_MEMORY));
    b.setInsertionPointToStart(inFrame.elseBlock());
    Value anyNull = anyNullArgument(b, loc, block);
    // Calls the implementation and yields its status at nb.
    auto runImpl = [&](OpBuilder &nb) {
      if (finish) {
        // The work the implementation recorded runs, and its first
        // error is the status.
        func::CallOp::create(nb, loc, impl, block->getArguments());
        scf::YieldOp::create(
            nb, loc,
            func::CallOp::create(nb, loc, finish, block->getArgument(0))
                .getResult(0));
        return;
      }
      if (!amxInit) {
        func::CallOp::create(nb, loc, impl, block->getArguments());
        scf::YieldOp::create(nb, loc, status(nb, ATTNC_STATUS_OK));
        return;
      }
      // Kernels with AMX tiles first ask the OS for their state.
      Value granted = arith::CmpIOp::create(
          nb, loc, arith::CmpIPredicate::eq,
          func::CallOp::create(nb, loc, amxInit, ValueRange()).getResult(0),
          arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(0)));
      auto amxIf = scf::IfOp::create(
          nb, loc, granted,
          [&](OpBuilder &ib, Location) {
            func::CallOp::create(ib, loc, impl, block->getArguments());
            scf::YieldOp::create(ib, loc, status(ib, ATTNC_STATUS_OK));
          },
          [&](OpBuilder &ib, Location) {
            scf::YieldOp::create(ib, loc, status(ib, ATTNC_STATUS_NO_AMX));
          });
      scf::YieldOp::create(nb, loc, amxIf.getResult(0));
    };
    auto ifOp = scf::IfOp::create(
        b, loc, anyNull,
        [&](OpBuilder &nb, Location) {
          scf::YieldOp::create(nb, loc, status(nb, ATTNC_STATUS_NULL_ARGUMENT));
        },
        [&](OpBuilder &ob, Location) {
          // A KV cache's lengths past its capacity (or negative): the
          // kernel writes nothing (CPU kernels: GPU buffers live on the
          // device).
          Value badLengths =
              finish ? Value() : anyLengthOutOfBounds(ob, impl, block);
          if (!badLengths) {
            runImpl(ob);
            return;
          }
          auto check = scf::IfOp::create(
              ob, loc, badLengths,
              [&](OpBuilder &nb, Location) {
                scf::YieldOp::create(nb, loc,
                                     status(nb, ATTNC_STATUS_BAD_SIZE));
              },
              [&](OpBuilder &nb, Location) { runImpl(nb); });
          scf::YieldOp::create(ob, loc, check.getResult(0));
        });
    scf::YieldOp::create(b, loc, ifOp.getResult(0));
    b.setInsertionPointAfter(inFrame);
    func::CallOp::create(b, loc, kernelLeave, ValueRange{frame});
    func::ReturnOp::create(b, loc, inFrame.getResult(0));
    return success();
  }
};

} // namespace
