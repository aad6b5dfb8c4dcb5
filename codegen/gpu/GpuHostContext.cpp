// attn-gpu-host-context: the GPU runtime context as every host function's
// first argument, and the check that the host code left for the GPU
// runtime touches no device memory itself.
#include "codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNGPUHOSTCONTEXT
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// Whether host op `op` would read or write a buffer's elements: on a GPU
/// target buffers live on the device, and only kernels may.
bool touchesElements(Operation *op) {
  return isa<memref::LoadOp, memref::StoreOp, memref::CopyOp, memref::AllocaOp,
             vector::TransferReadOp, vector::TransferWriteOp, vector::LoadOp,
             vector::StoreOp, linalg::LinalgOp>(op);
}

/// Whether `op` or an op in its regions touches buffer elements.
bool touchesElementsWithin(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return touchesElements(nested) ? WalkResult::interrupt()
                                       : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Moves each top-level op of `func` that touches buffer elements and has
/// no results (what the parallel-loop mapping left: sequential loop nests,
/// such as capture gradients accumulated in a fixed order) into a kernel
/// of one thread. Correct on any device, and slow: the flash kernels are
/// what is meant to be fast.
void runSerialWorkInKernels(func::FuncOp func) {
  for (Operation &op :
       llvm::make_early_inc_range(func.getBody().front().getOperations())) {
    if (isa<gpu::LaunchOp>(op) || op.getNumResults() != 0 ||
        op.hasTrait<OpTrait::IsTerminator>() || !touchesElementsWithin(&op))
      continue;
    OpBuilder b(&op);
    Value one = arith::ConstantIndexOp::create(b, op.getLoc(), 1);
    auto launch =
        gpu::LaunchOp::create(b, op.getLoc(), one, one, one, one, one, one);
    Block &body = launch.getBody().front();
    b.setInsertionPointToEnd(&body);
    auto terminator = gpu::TerminatorOp::create(b, op.getLoc());
    op.moveBefore(terminator);
  }
}

struct AttnGpuHostContextPass
    : attnc::impl::AttnGpuHostContextBase<AttnGpuHostContextPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto ptrType = LLVM::LLVMPointerType::get(&getContext());
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);

    for (func::FuncOp func : funcs)
      runSerialWorkInKernels(func);

    bool failedCheck = false;
    for (func::FuncOp func : funcs) {
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (isa<gpu::LaunchOp>(op))
          return WalkResult::skip();
        if (touchesElements(op)) {
          op->emitError("this op would run on the host and touch device "
                        "memory; the GPU target found no kernel for it");
          failedCheck = true;
        } else if (auto alloc = dyn_cast<memref::AllocOp>(op);
                   alloc && (!alloc.getType().hasStaticShape() ||
                             alloc->getBlock() != &func.getBody().front())) {
          op->emitError("device buffers must have static shapes and be "
                        "made at the top level of their function");
          failedCheck = true;
        }
        return WalkResult::advance();
      });
    }
    if (failedCheck)
      return signalPassFailure();

    // Device buffers are released at the end of the function that made
    // them: the runtime defers a release until the work recorded before it
    // is done, so an earlier point would gain nothing.
    for (func::FuncOp func : funcs) {
      Block &entry = func.getBody().front();
      Operation *terminator = entry.getTerminator();
      for (auto alloc : llvm::to_vector(entry.getOps<memref::AllocOp>())) {
        OpBuilder b(terminator);
        memref::DeallocOp::create(b, alloc.getLoc(), alloc);
      }
    }

    unsigned runtimeArgs = stream ? 2 : 1;
    for (func::FuncOp func : funcs)
      for (unsigned i = 0; i < runtimeArgs; ++i)
        if (failed(func.insertArgument(i, ptrType, {}, func.getLoc())))
          return signalPassFailure();
    for (func::FuncOp func : funcs) {
      ValueRange handles = func.getArguments().take_front(runtimeArgs);
      func.walk([&](func::CallOp call) {
        auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
        if (callee && !callee.isExternal())
          call->insertOperands(0, handles);
      });
    }
  }
};

} // namespace
