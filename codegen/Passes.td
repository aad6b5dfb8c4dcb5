// Passes of the code generator.
#ifndef ATTNC_CODEGEN_PASSES_TD
#define ATTNC_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnLowerToLinalg : Pass<"attn-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower attn ops to linalg ops on tensors";
  let description = [{
    Rewrites every attn op into linalg.generic/fill ops on tensors, one per
    mathematical step, accumulating in f32 (the unfused reference lowering).
    Score_mod and mask_mod regions are inlined into the element-wise bodies,
    with linalg.index for (b, h, i, j). Function arguments are marked
    read-only for bufferization.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect", "mlir::bufferization::BufferizationDialect"
  ];
}

def AttnLowerCpu : Pass<"attn-lower-cpu", "mlir::ModuleOp"> {
  let summary = "Lower attn.attention(_grad) to flash-attention CPU kernels";
  let description = [{
    Every decision comes from the op's `attn.tile_plan` (#attn.cpu_plan,
    from attn-plan-tiles; an op it would lower without one is an error):
    register rows, query and key blocks, AMX tiles, the backward's splits.
    Rewrites every attn.attention the kernel covers (f32/f16/bf16 computed
    in f32, Dv a multiple of 16, score_mod/mask_mod regions of elementwise
    ops and capture reads) into a loop nest over (batch, head, query tile)
    with an online softmax over key tiles and broadcast-FMA vector
    microkernels: extra memory is O(B*H*S) (a transposed, padded K), never
    Sq x Skv. Key tiles that the causal, window or length mask empties are
    skipped and tiles it leaves whole skip the mask; regions are evaluated
    on 16 keys at once (capture reads become masked gathers). Every
    attn.attention_grad it covers (D also a multiple of 16) becomes the
    FlashAttention-2 backward in one pass over key tiles (dK/dV per key
    tile; dQ into one f32 copy per split of the key tiles, the copies
    summed in order; float captures' gradients through per-task partials
    summed in order: a fixed order for any thread count). Task loops are
    outlined for the runtime's thread pool (attn-lower-parallel-calls).
    attn.projection, attn.merge and their gradient ops become tiled GEMMs
    with the same microkernel (8-row blocks of A on the pool, B in 32-wide
    panels). The f32 exp and vector math become polynomials (math
    polynomial approximation; on AVX-512 the kernels' vector exp uses
    vscalefps instead). Other attention ops are left to
    attn-lower-to-linalg.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Width of the target's vector registers (512, 256 or 128): with "
           "512, exp uses AVX-512's vscalefps (x86vector)">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
    "mlir::math::MathDialect", "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect", "mlir::vector::VectorDialect",
    "mlir::x86vector::X86VectorDialect", "mlir::amx::AMXDialect",
    // Loop annotations (KernelBuilder::copyLoop).
    "mlir::LLVM::LLVMDialect"
  ];
}

def AttnLowerParallelCalls : Pass<"attn-lower-parallel-calls", "mlir::ModuleOp"> {
  let summary = "Run outlined task loops on the runtime's thread pool";
  let description = [{
    In the LLVM dialect: every call of an llvm.func marked
    `attn.parallel_tasks` (signature (ptr..., i64 begin = 0, i64 end))
    becomes `attnc_parallel_for(end, @f_packed, ctx)`, where ctx is an array
    of the pointer arguments and @f_packed(ctx, begin, end) unpacks them;
    with `threads` N > 0, `attnc_parallel_for_threads(end, @f_packed, ctx,
    N)`, which uses at most N threads.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"0",
           "At most this many threads per parallel loop (0: the runtime's "
           "default, ATTNC_NUM_THREADS or one per core)">
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def AttnElideResultCopies : Pass<"attn-elide-result-copies", "mlir::ModuleOp"> {
  let summary = "Write results that come from calls straight into out-params";
  let description = [{
    Runs after buffer-results-to-out-params. A `memref.copy %alloc, %out`
    where %out is a function argument that nothing else uses and every
    other use of %alloc comes before the copy in its block (a function
    returning a call's result: @f returning @f_fwd's O) becomes %out used
    in place of %alloc, without the copy.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def AttnExportAbi : Pass<"attn-export-abi", "mlir::ModuleOp"> {
  let summary = "Wrap each public function in a C entry point with a status code";
  let description = [{
    Runs after bufferization and buffer-results-to-out-params. Each public
    function @f(memrefs...) becomes the private @__attnc_impl_f, and a new
    public @f(memrefs...) -> i32 returns ATTNC_STATUS_NULL_ARGUMENT without
    touching any buffer when a pointer is null, and otherwise calls the
    implementation and returns ATTNC_STATUS_OK. Buffers are marked
    llvm.noalias (callers must not pass overlapping buffers). Every private
    function gets internal linkage, so only the entry points are exported.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::func::FuncDialect",
    "mlir::LLVM::LLVMDialect", "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect"
  ];
}

#endif // ATTNC_CODEGEN_PASSES_TD
