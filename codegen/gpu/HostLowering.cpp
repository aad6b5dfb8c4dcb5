// The host side of the GPU targets (see HostLowering.h).
#include "codegen/gpu/HostLowering.h"

#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace attnc {

namespace {

/// The runtime arguments of the host function around `op`: its context,
/// and its stream where the runtime takes one (attn-gpu-host-context).
SmallVector<Value> runtimeArgsOf(Operation *op, const GpuRuntimeAbi &abi) {
  auto func = op->getParentOfType<func::FuncOp>();
  SmallVector<Value> args = {func.getArgument(0)};
  if (abi.stream)
    args.push_back(func.getArgument(1));
  return args;
}

SmallVector<Type> runtimeArgTypes(MLIRContext *context,
                                  const GpuRuntimeAbi &abi) {
  return SmallVector<Type>(abi.stream ? 2 : 1,
                           LLVM::LLVMPointerType::get(context));
}

int64_t staticBytes(MemRefType type) {
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                  b.getI64IntegerAttr(value));
}

Value i32Constant(OpBuilder &b, Location loc, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                  b.getI32IntegerAttr(value));
}

/// gpu.launch_func -> the runtime's launch call (GpuRuntimeAbi).
struct LaunchPattern : ConvertOpToLLVMPattern<gpu::LaunchFuncOp> {
  LaunchPattern(const LLVMTypeConverter &converter, const GpuRuntimeAbi &abi,
                const EmbeddedModules &modules)
      : ConvertOpToLLVMPattern(converter), abi(abi), modules(modules) {}

  LogicalResult
  matchAndRewrite(gpu::LaunchFuncOp launch, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = launch.getLoc();
    auto module = modules.find(launch.getKernelModuleName());
    if (module == modules.end())
      return launch.emitError("no binary for the kernel's module");
    auto kernel = module->second.kernels.find(launch.getKernelName());
    if (kernel == module->second.kernels.end())
      return launch.emitError("no binary for the kernel");
    if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
        launch.getClusterSizeX())
      return launch.emitError("unsupported launch form");
    if (launch.getDynamicSharedMemorySize() && !abi.blockSize)
      return launch.emitError("this target takes no dynamic shared memory");

    Type ptrType = LLVM::LLVMPointerType::get(rewriter.getContext());
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    SmallVector<Value> buffers;
    SmallVector<int64_t> bytes;
    for (auto [original, converted] :
         llvm::zip(launch.getKernelOperands(), adaptor.getKernelOperands())) {
      auto type = dyn_cast<MemRefType>(original.getType());
      if (!type || !type.hasStaticShape())
        return launch.emitError(
            "GPU kernels take statically shaped buffers only");
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
      if (abi.bufferBytes)
        bytesArray = LLVM::AllocaOp::create(rewriter, loc, ptrType, i64, count);
    }
    for (auto [i, buffer] : llvm::enumerate(buffers)) {
      Value slot =
          LLVM::GEPOp::create(rewriter, loc, ptrType, ptrType, bufferArray,
                              ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, buffer, slot);
      if (!abi.bufferBytes)
        continue;
      Value size = LLVM::GEPOp::create(rewriter, loc, ptrType, i64, bytesArray,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, i64Constant(rewriter, loc, bytes[i]),
                            size);
    }
    auto toI32 = [&](Value index) {
      return LLVM::TruncOp::create(rewriter, loc, i32, index).getResult();
    };
    const EmbeddedModule &embedded = module->second;
    SmallVector<Value> args = runtimeArgsOf(launch, abi);
    SmallVector<Type> types = runtimeArgTypes(rewriter.getContext(), abi);
    auto add = [&](Value value) {
      args.push_back(value);
      types.push_back(value.getType());
    };
    add(LLVM::AddressOfOp::create(rewriter, loc, embedded.image));
    if (abi.imageSize)
      add(i64Constant(rewriter, loc, embedded.size));
    add(LLVM::AddressOfOp::create(rewriter, loc, kernel->second));
    add(toI32(adaptor.getGridSizeX()));
    add(toI32(adaptor.getGridSizeY()));
    add(toI32(adaptor.getGridSizeZ()));
    if (abi.blockSize) {
      add(toI32(adaptor.getBlockSizeX()));
      add(toI32(adaptor.getBlockSizeY()));
      add(toI32(adaptor.getBlockSizeZ()));
      add(launch.getDynamicSharedMemorySize()
              ? adaptor.getDynamicSharedMemorySize()
              : i32Constant(rewriter, loc, 0));
    }
    add(i32Constant(rewriter, loc, buffers.size()));
    add(bufferArray);
    if (abi.bufferBytes)
      add(bytesArray);
    auto callee = LLVM::lookupOrCreateFn(
        rewriter, launch->getParentOfType<ModuleOp>(), abi.launch, types,
        LLVM::LLVMVoidType::get(rewriter.getContext()));
    if (failed(callee))
      return failure();
    LLVM::CallOp::create(rewriter, loc, *callee, args);
    rewriter.eraseOp(launch);
    return success();
  }

  const GpuRuntimeAbi &abi;
  const EmbeddedModules &modules;
};

/// A host memref.alloc: a device scratch buffer of the context (or its
/// trap buffer).
struct AllocPattern : ConvertOpToLLVMPattern<memref::AllocOp> {
  AllocPattern(const LLVMTypeConverter &converter, const GpuRuntimeAbi &abi)
      : ConvertOpToLLVMPattern(converter), abi(abi) {}

  LogicalResult
  matchAndRewrite(memref::AllocOp alloc, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MemRefType type = alloc.getType();
    if (!type.hasStaticShape() || !alloc->getParentOfType<func::FuncOp>())
      return failure();
    Location loc = alloc.getLoc();
    Type ptrType = LLVM::LLVMPointerType::get(rewriter.getContext());
    SmallVector<Value> args = runtimeArgsOf(alloc, abi);
    SmallVector<Type> types = runtimeArgTypes(rewriter.getContext(), abi);
    bool trap = alloc->hasAttr(kDeviceTrapAttr);
    if (trap && abi.trap.empty())
      return alloc.emitError("this target has no trap buffer");
    if (!trap) {
      args.push_back(i64Constant(rewriter, loc, staticBytes(type)));
      types.push_back(rewriter.getI64Type());
    }
    auto scratch =
        LLVM::lookupOrCreateFn(rewriter, alloc->getParentOfType<ModuleOp>(),
                               trap ? abi.trap : abi.scratch, types, ptrType);
    if (failed(scratch))
      return failure();
    Value buffer =
        LLVM::CallOp::create(rewriter, loc, *scratch, args).getResult();
    rewriter.replaceOp(alloc,
                       Value(MemRefDescriptor::fromStaticShape(
                           rewriter, loc, *getTypeConverter(), type, buffer)));
    return success();
  }

  const GpuRuntimeAbi &abi;
};

/// A host memref.dealloc: the scratch buffer's release.
struct DeallocPattern : ConvertOpToLLVMPattern<memref::DeallocOp> {
  DeallocPattern(const LLVMTypeConverter &converter, const GpuRuntimeAbi &abi)
      : ConvertOpToLLVMPattern(converter), abi(abi) {}

  LogicalResult
  matchAndRewrite(memref::DeallocOp dealloc, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!dealloc->getParentOfType<func::FuncOp>())
      return failure();
    Location loc = dealloc.getLoc();
    SmallVector<Value> args = runtimeArgsOf(dealloc, abi);
    SmallVector<Type> types = runtimeArgTypes(rewriter.getContext(), abi);
    args.push_back(
        MemRefDescriptor(adaptor.getMemref()).allocatedPtr(rewriter, loc));
    types.push_back(args.back().getType());
    auto release = LLVM::lookupOrCreateFn(
        rewriter, dealloc->getParentOfType<ModuleOp>(), abi.release, types,
        LLVM::LLVMVoidType::get(rewriter.getContext()));
    if (failed(release))
      return failure();
    LLVM::CallOp::create(rewriter, loc, *release, args);
    rewriter.eraseOp(dealloc);
    return success();
  }

  const GpuRuntimeAbi &abi;
};

} // namespace

LLVM::GlobalOp embedBytes(ModuleOp module, Location loc, StringRef name,
                          StringRef bytes, unsigned alignment) {
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto type = LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size());
  auto global = LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                                       LLVM::Linkage::Internal, name,
                                       b.getStringAttr(bytes));
  global.setAlignment(alignment);
  return global;
}

LogicalResult lowerGpuHost(ModuleOp module, const GpuRuntimeAbi &abi,
                           const EmbeddedModules &modules) {
  MLIRContext *context = module.getContext();
  LLVMTypeConverter converter(context);
  RewritePatternSet patterns(context);
  patterns.add<LaunchPattern>(converter, abi, modules);
  patterns.add<AllocPattern, DeallocPattern>(converter, abi);
  ConversionTarget target(*context);
  target.addLegalDialect<LLVM::LLVMDialect>();
  target.addIllegalOp<gpu::LaunchFuncOp>();
  target.addDynamicallyLegalOp<memref::AllocOp, memref::DeallocOp>(
      [](Operation *op) { return !op->getParentOfType<func::FuncOp>(); });
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  if (failed(applyPartialConversion(module, target, std::move(patterns))))
    return failure();
  module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  return success();
}

} // namespace attnc
