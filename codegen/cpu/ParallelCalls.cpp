// attn-lower-parallel-calls: calls of outlined task loops -> the runtime's
// attnc_parallel_for, in the LLVM dialect.
//
// By hand because upstream's parallel lowerings target OpenMP or the async
// runtime, and kernels must only need libattnc_rt: the runtime's pool takes
// a C function pointer and a context, which only exist in the LLVM dialect.
#include "codegen/Passes.h"
#include "dialect/AttnDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNLOWERPARALLELCALLS
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kParallelFor = "attnc_parallel_for";
constexpr llvm::StringLiteral kParallelForThreads =
    "attnc_parallel_for_threads";

struct AttnLowerParallelCallsPass
    : attnc::impl::AttnLowerParallelCallsBase<AttnLowerParallelCallsPass> {
  using AttnLowerParallelCallsBase::AttnLowerParallelCallsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto voidType = LLVM::LLVMVoidType::get(ctx);
    OpBuilder b(ctx);

    SmallVector<LLVM::LLVMFuncOp> taskFunctions;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (fn->hasAttr(
              attnc::attn::AttnDialect::ParallelTasksAttrHelper::getNameStr()))
        taskFunctions.push_back(fn);
    if (taskFunctions.empty())
      return;

    auto i32 = IntegerType::get(ctx, 32);
    bool limited = threads > 0;
    StringRef runtimeName = limited ? kParallelForThreads : kParallelFor;
    auto parallelFor = module.lookupSymbol<LLVM::LLVMFuncOp>(runtimeName);
    if (!parallelFor) {
      b.setInsertionPointToStart(module.getBody());
      SmallVector<Type> params = {i64, ptr, ptr};
      if (limited)
        params.push_back(i32);
      parallelFor = LLVM::LLVMFuncOp::create(
          b, module.getLoc(), runtimeName,
          LLVM::LLVMFunctionType::get(voidType, params));
    }

    for (LLVM::LLVMFuncOp fn : taskFunctions) {
      // The calls to rewrite, before the packed function adds its own.
      SmallVector<LLVM::CallOp> calls;
      module.walk([&](LLVM::CallOp call) {
        if (call.getCallee() == fn.getName())
          calls.push_back(call);
      });
      auto type = fn.getFunctionType();
      unsigned numPointers = type.getNumParams() - 2;
      // void packed(ptr ctx, i64 begin, i64 end): ctx holds the pointers.
      b.setInsertionPointAfter(fn);
      auto packed = LLVM::LLVMFuncOp::create(
          b, fn.getLoc(), (fn.getName() + "_packed").str(),
          LLVM::LLVMFunctionType::get(voidType, {ptr, i64, i64}),
          LLVM::Linkage::Internal);
      Block *entry = packed.addEntryBlock(b);
      b.setInsertionPointToStart(entry);
      SmallVector<Value> args;
      for (unsigned k = 0; k < numPointers; ++k) {
        Value slot = LLVM::GEPOp::create(b, fn.getLoc(), ptr, ptr,
                                         entry->getArgument(0),
                                         ArrayRef<LLVM::GEPArg>{int32_t(k)});
        args.push_back(LLVM::LoadOp::create(b, fn.getLoc(), ptr, slot));
      }
      args.push_back(entry->getArgument(1));
      args.push_back(entry->getArgument(2));
      LLVM::CallOp::create(b, fn.getLoc(), fn, args);
      LLVM::ReturnOp::create(b, fn.getLoc(), ValueRange());

      for (LLVM::CallOp call : calls) {
        Location loc = call.getLoc();
        b.setInsertionPoint(call);
        Value one = LLVM::ConstantOp::create(b, loc, i64, 1);
        auto arrayType = LLVM::LLVMArrayType::get(ptr, numPointers);
        Value array = LLVM::AllocaOp::create(b, loc, ptr, arrayType, one);
        for (unsigned k = 0; k < numPointers; ++k) {
          Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, array,
                                           ArrayRef<LLVM::GEPArg>{int32_t(k)});
          LLVM::StoreOp::create(b, loc, call.getOperand(k), slot);
        }
        // Task loops are emitted for [0, n): n is the end operand.
        Value n = call.getOperand(numPointers + 1);
        Value function = LLVM::AddressOfOp::create(b, loc, packed);
        SmallVector<Value> operands = {n, function, array};
        if (limited)
          operands.push_back(LLVM::ConstantOp::create(
              b, loc, i32, std::min<int64_t>(threads, INT32_MAX)));
        LLVM::CallOp::create(b, loc, parallelFor, operands);
        call.erase();
      }
    }
  }
};

} // namespace
