// attn-spirv-bf16-storage: bf16 buffers hold i16 bits for SPIR-V.
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNSPIRVBF16STORAGE
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// `type` with its bf16 memrefs holding i16 (function types included).
Type asI16Storage(Type type) {
  if (auto memref = dyn_cast<MemRefType>(type)) {
    if (memref.getElementType().isBF16())
      return memref.clone(IntegerType::get(type.getContext(), 16));
    return type;
  }
  if (auto function = dyn_cast<FunctionType>(type)) {
    auto map = [](TypeRange types) {
      return llvm::map_to_vector(types, asI16Storage);
    };
    return FunctionType::get(type.getContext(), map(function.getInputs()),
                             map(function.getResults()));
  }
  return type;
}

struct AttnSpirvBf16StoragePass
    : attnc::impl::AttnSpirvBf16StorageBase<AttnSpirvBf16StoragePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Type i16 = IntegerType::get(ctx, 16), bf16 = BFloat16Type::get(ctx);
    // Every value and signature changes type in place: the module's ops
    // relate memref types by their element type only through loads and
    // stores, which get bitcasts below.
    getOperation().walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(asI16Storage(arg.getType()));
      for (OpResult result : op->getResults())
        result.setType(asI16Storage(result.getType()));
      if (auto func = dyn_cast<FunctionOpInterface>(op))
        func.setType(asI16Storage(func.getFunctionType()));
    });
    getOperation().walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        if (!load.getMemRefType().getElementType().isInteger(16) ||
            !load.getType().isBF16())
          return;
        load.getResult().setType(i16);
        OpBuilder b(ctx);
        b.setInsertionPointAfter(load);
        auto cast = arith::BitcastOp::create(b, load.getLoc(), bf16, load);
        load.getResult().replaceAllUsesExcept(cast, cast);
      } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
        if (!store.getValueToStore().getType().isBF16())
          return;
        OpBuilder b(store);
        store.getValueMutable().assign(arith::BitcastOp::create(
            b, store.getLoc(), i16, store.getValueToStore()));
      }
    });
  }
};

} // namespace
