// The host side of the GPU targets: gpu.launch_func and the host's device
// buffers as calls of the target's runtime part (runtime/Vulkan.c,
// runtime/Cuda.c), with the kernels' binaries embedded as globals.
//
// Written by hand because upstream's gpu-to-llvm does not fit: it calls the
// mgpu* wrappers, which return nothing (no status to give back), take no
// context (a process-wide one), and load each module in a global
// constructor; attnc's entry points return a status code and take the
// context (and, for CUDA, the stream) their caller made.
#ifndef ATTNC_CODEGEN_GPU_HOSTLOWERING_H
#define ATTNC_CODEGEN_GPU_HOSTLOWERING_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

namespace attnc {

/// One embedded kernel module: the global holding its binary, the binary's
/// size in the unit the runtime takes, and a global name per kernel.
struct EmbeddedModule {
  mlir::LLVM::GlobalOp image;
  int64_t size = 0;
  llvm::StringMap<mlir::LLVM::GlobalOp> kernels;
};
/// By the name of the gpu.module they came from.
using EmbeddedModules = llvm::StringMap<EmbeddedModule>;

/// How a target's runtime part is called. Every call takes the host
/// function's leading runtime arguments first (attn-gpu-host-context: the
/// context, and the stream where `stream`), then:
///   launch(image, [size,] kernel, grid x/y/z, [block x/y/z, shared bytes,]
///          count, buffers[, bytes])
///   scratch(bytes) -> buffer, release(buffer)
///   trap() -> the context's trap buffer (for allocs marked kDeviceTrapAttr)
struct GpuRuntimeAbi {
  llvm::StringRef launch, scratch, release, trap;
  bool stream = false;      // (ctx, stream) rather than (ctx)
  bool imageSize = false;   // launch takes the image's size
  bool blockSize = false;   // launch takes the block and shared memory size
  bool bufferBytes = false; // launch takes each buffer's size in bytes
};

/// Marks a host memref.alloc that stands for the runtime context's trap
/// buffer (attn-vulkan-loop-trap), which is never released.
inline constexpr llvm::StringLiteral kDeviceTrapAttr = "attnc.device_trap";

/// A constant global of `bytes` (NUL-terminated when `text`) named `name`
/// at the start of `module`.
mlir::LLVM::GlobalOp embedBytes(mlir::ModuleOp module, mlir::Location loc,
                                llvm::StringRef name, llvm::StringRef bytes,
                                unsigned alignment);

/// Rewrites `module`'s gpu.launch_func ops (of kernels in `modules`) and its
/// host functions' memref.alloc/dealloc into calls of the runtime that
/// `abi` describes, and drops the gpu.container_module attribute.
mlir::LogicalResult lowerGpuHost(mlir::ModuleOp module,
                                 const GpuRuntimeAbi &abi,
                                 const EmbeddedModules &modules);

} // namespace attnc

#endif // ATTNC_CODEGEN_GPU_HOSTLOWERING_H
