// attn-vulkan-lower-host: the SPIR-V kernels embedded in the object and
// launched through the runtime's Vulkan part (runtime/Vulkan.c).
//
// Written by hand because upstream's host lowering does not fit: its
// gpu-to-llvm calls the mgpu* wrappers, which return nothing (no status to
// give back), take no context (a process-wide one), and load each module
// in a global constructor; attnc's entry points return a status code and
// take the context their caller made.
#include "codegen/Passes.h"

#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/Transforms/DialectConversion.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNVULKANLOWERHOST
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// The runtime functions generated host code calls (attnc/vulkan.h).
constexpr llvm::StringLiteral kDispatch = "attnc_vk_dispatch";
constexpr llvm::StringLiteral kScratch = "attnc_vk_scratch";
constexpr llvm::StringLiteral kRelease = "attnc_vk_release";

/// The globals of one gpu.module's kernels: its SPIR-V words and the names
/// of its entry points.
struct EmbeddedModule {
  LLVM::GlobalOp words;
  int64_t numWords = 0;
  llvm::StringMap<LLVM::GlobalOp> entries;
};
using EmbeddedModules = llvm::StringMap<EmbeddedModule>;

/// The GPU runtime context of the host function around `op`.
Value contextOf(Operation *op) {
  return op->getParentOfType<func::FuncOp>().getArgument(0);
}

int64_t staticBytes(MemRefType type) {
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                  b.getI64IntegerAttr(value));
}

/// gpu.launch_func -> attnc_vk_dispatch(ctx, words, count, entry, x, y, z,
/// n, buffers, bytes).
struct LaunchPattern : ConvertOpToLLVMPattern<gpu::LaunchFuncOp> {
  LaunchPattern(const LLVMTypeConverter &converter,
                const EmbeddedModules &modules)
      : ConvertOpToLLVMPattern(converter), modules(modules) {}

  LogicalResult
  matchAndRewrite(gpu::LaunchFuncOp launch, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = launch.getLoc();
    auto module = modules.find(launch.getKernelModuleName());
    if (module == modules.end())
      return launch.emitError("no SPIR-V for the kernel's module");
    auto entry = module->second.entries.find(launch.getKernelName());
    if (entry == module->second.entries.end())
      return launch.emitError("no SPIR-V entry point");
    if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
        launch.getClusterSizeX() || launch.getDynamicSharedMemorySize())
      return launch.emitError("unsupported launch form");

    Type ptrType = LLVM::LLVMPointerType::get(rewriter.getContext());
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    SmallVector<Value> buffers;
    SmallVector<int64_t> bytes;
    for (auto [original, converted] :
         llvm::zip(launch.getKernelOperands(), adaptor.getKernelOperands())) {
      auto type = dyn_cast<MemRefType>(original.getType());
      if (!type || !type.hasStaticShape())
        return launch.emitError(
            "Vulkan kernels take statically shaped buffers only");
      MemRefDescriptor descriptor(converted);
      buffers.push_back(descriptor.alignedPtr(rewriter, loc));
      bytes.push_back(staticBytes(type));
    }

    // The argument arrays live in the function's frame.
    auto func = launch->getParentOfType<func::FuncOp>();
    Value bufferArray, bytesArray;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&func.getBody().front());
      Value count =
          i64Constant(rewriter, loc, std::max<size_t>(1, buffers.size()));
      bufferArray =
          LLVM::AllocaOp::create(rewriter, loc, ptrType, ptrType, count);
      bytesArray = LLVM::AllocaOp::create(rewriter, loc, ptrType, i64, count);
    }
    for (auto [i, buffer] : llvm::enumerate(buffers)) {
      Value slot =
          LLVM::GEPOp::create(rewriter, loc, ptrType, ptrType, bufferArray,
                              ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, buffer, slot);
      Value size = LLVM::GEPOp::create(rewriter, loc, ptrType, i64, bytesArray,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, i64Constant(rewriter, loc, bytes[i]),
                            size);
    }
    auto groups = [&](Value index) {
      return LLVM::TruncOp::create(rewriter, loc, i32, index).getResult();
    };
    const EmbeddedModule &embedded = module->second;
    SmallVector<Value> args = {
        contextOf(launch),
        LLVM::AddressOfOp::create(rewriter, loc, embedded.words),
        i64Constant(rewriter, loc, embedded.numWords),
        LLVM::AddressOfOp::create(rewriter, loc, entry->second),
        groups(adaptor.getGridSizeX()),
        groups(adaptor.getGridSizeY()),
        groups(adaptor.getGridSizeZ()),
        LLVM::ConstantOp::create(rewriter, loc, i32,
                                 rewriter.getI32IntegerAttr(buffers.size())),
        bufferArray,
        bytesArray};
    auto dispatch = LLVM::lookupOrCreateFn(
        rewriter, launch->getParentOfType<ModuleOp>(), kDispatch,
        {ptrType, ptrType, i64, ptrType, i32, i32, i32, i32, ptrType, ptrType},
        LLVM::LLVMVoidType::get(rewriter.getContext()));
    if (failed(dispatch))
      return failure();
    LLVM::CallOp::create(rewriter, loc, *dispatch, args);
    rewriter.eraseOp(launch);
    return success();
  }

  const EmbeddedModules &modules;
};

/// A host memref.alloc: a device scratch buffer of the context.
struct AllocPattern : ConvertOpToLLVMPattern<memref::AllocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(memref::AllocOp alloc, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MemRefType type = alloc.getType();
    if (!type.hasStaticShape() || !alloc->getParentOfType<func::FuncOp>())
      return failure();
    Location loc = alloc.getLoc();
    Type ptrType = LLVM::LLVMPointerType::get(rewriter.getContext());
    auto scratch = LLVM::lookupOrCreateFn(
        rewriter, alloc->getParentOfType<ModuleOp>(), kScratch,
        {ptrType, rewriter.getI64Type()}, ptrType);
    if (failed(scratch))
      return failure();
    Value buffer =
        LLVM::CallOp::create(
            rewriter, loc, *scratch,
            ValueRange{contextOf(alloc),
                       i64Constant(rewriter, loc, staticBytes(type))})
            .getResult();
    rewriter.replaceOp(alloc,
                       Value(MemRefDescriptor::fromStaticShape(
                           rewriter, loc, *getTypeConverter(), type, buffer)));
    return success();
  }
};

/// A host memref.dealloc: the scratch buffer's release.
struct DeallocPattern : ConvertOpToLLVMPattern<memref::DeallocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(memref::DeallocOp dealloc, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!dealloc->getParentOfType<func::FuncOp>())
      return failure();
    Location loc = dealloc.getLoc();
    Type ptrType = LLVM::LLVMPointerType::get(rewriter.getContext());
    auto release = LLVM::lookupOrCreateFn(
        rewriter, dealloc->getParentOfType<ModuleOp>(), kRelease,
        {ptrType, ptrType}, LLVM::LLVMVoidType::get(rewriter.getContext()));
    if (failed(release))
      return failure();
    MemRefDescriptor descriptor(adaptor.getMemref());
    LLVM::CallOp::create(
        rewriter, loc, *release,
        ValueRange{contextOf(dealloc), descriptor.allocatedPtr(rewriter, loc)});
    rewriter.eraseOp(dealloc);
    return success();
  }
};

struct AttnVulkanLowerHostPass
    : attnc::impl::AttnVulkanLowerHostBase<AttnVulkanLowerHostPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    EmbeddedModules modules;
    if (failed(embedKernels(module, modules)))
      return signalPassFailure();

    LLVMTypeConverter converter(&getContext());
    RewritePatternSet patterns(&getContext());
    patterns.add<LaunchPattern>(converter, modules);
    patterns.add<AllocPattern, DeallocPattern>(converter);
    ConversionTarget target(getContext());
    target.addLegalDialect<LLVM::LLVMDialect>();
    target.addIllegalOp<gpu::LaunchFuncOp>();
    target.addDynamicallyLegalOp<memref::AllocOp, memref::DeallocOp>(
        [](Operation *op) { return !op->getParentOfType<func::FuncOp>(); });
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }

  /// Serializes every spirv.module into a global of words, adds a global
  /// name per entry point, and erases the gpu and spirv modules.
  LogicalResult embedKernels(ModuleOp module, EmbeddedModules &modules) {
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    Type i8 = b.getI8Type(), i32 = b.getI32Type();
    for (auto spirvModule :
         llvm::make_early_inc_range(module.getOps<spirv::ModuleOp>())) {
      // convert-gpu-to-spirv names the module of gpu.module @m __spv__m.
      StringRef name = spirvModule.getName().value_or("");
      if (!name.consume_front("__spv__"))
        return spirvModule.emitError("unexpected SPIR-V module name");
      SmallVector<uint32_t> words;
      if (failed(spirv::serialize(spirvModule, words)))
        return failure();
      EmbeddedModule &embedded = modules[name];
      embedded.numWords = words.size();
      auto arrayType = LLVM::LLVMArrayType::get(i32, words.size());
      SmallVector<int32_t> values(words.begin(), words.end());
      embedded.words = LLVM::GlobalOp::create(
          b, spirvModule.getLoc(), arrayType, /*isConstant=*/true,
          LLVM::Linkage::Internal, ("__attnc_spirv_" + name).str(),
          DenseElementsAttr::get(
              RankedTensorType::get({int64_t(values.size())}, i32),
              ArrayRef<int32_t>(values)));
      embedded.words.setAlignment(4);
      for (auto entryPoint : spirvModule.getOps<spirv::EntryPointOp>()) {
        StringRef entry = entryPoint.getFn();
        std::string text = (entry + Twine('\0')).str();
        embedded.entries[entry] = LLVM::GlobalOp::create(
            b, spirvModule.getLoc(), LLVM::LLVMArrayType::get(i8, text.size()),
            /*isConstant=*/true, LLVM::Linkage::Internal,
            ("__attnc_entry_" + name + "_" + entry).str(),
            b.getStringAttr(text));
      }
      spirvModule.erase();
    }
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      gpuModule.erase();
    return success();
  }
};

} // namespace
