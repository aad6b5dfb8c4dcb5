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
    with linalg.index for (b, h, i, j). attn.append becomes loops of
    slice copies (linalg.copy between tensor slices) that bufferize in
    place. Function arguments are marked read-only for bufferization,
    except the caches attn.append writes.
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

def AttnX86Bf16Conversions : Pass<"attn-x86-bf16-conversions"> {
  let summary = "f32 to bf16 vector conversions as AVX-512 BF16's vcvtneps2bf16";
  let description = [{
    Rewrites `arith.truncf` of 8 or 16 f32 lanes to bf16 (the kernels'
    P, dS, packed operands and bf16 outputs) into
    `x86vector.avx512.cvt.packed.f32_to_bf16`: one instruction where
    arith-expand's integer rounding takes six. For targets with
    avx512_bf16 (the CPU pipeline runs it before arith-expand when
    `dot-bf16` is set). Both round to nearest even and keep NaNs NaN;
    vcvtneps2bf16 also flushes denormal inputs to zero (of the sign), as
    bf16 arithmetic on these CPUs does.
  }];
  let dependentDialects = ["mlir::x86vector::X86VectorDialect"];
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

def AttnBatchEntries : Pass<"attn-batch-entries", "mlir::ModuleOp"> {
  let summary = "Loop the entry points of a dynamic batch over its entries";
  let description = [{
    In the LLVM dialect, after attn-export-abi and the conversion to LLVM:
    an entry point @f(ptr...) -> i32 marked `attn.batch_slices` (the bytes
    of one batch entry of each buffer, 0 for one without the batch: a
    kernel compiled for one entry of a spec's `?` batch) becomes the
    internal @__attnc_slice_f, and a new @f(ptr..., i64 batch) -> i32
    returns ATTNC_STATUS_BAD_SIZE for a negative batch and OK for 0;
    otherwise it runs @__attnc_check_f (attn-export-abi: null buffers,
    lengths out of bounds) on every entry's slices first, so that a bad
    entry returns its status before anything is written, then calls
    @__attnc_slice_f on each entry's slices (buffer + b * bytes): with at
    least 2 entries per thread (attnc_num_threads; 4 with
    `attn.batch_uneven`) and without `attn.batch_sums`, as a task loop
    @__attnc_entries_f (attn-lower-parallel-calls), an entry per task,
    returning the largest status that is not OK; otherwise in turn,
    returning the first. Outputs of `attn.batch_sums` (the bytes of an f32
    accumulator) are written by each entry into a buffer of their own,
    added up by @__attnc_sum_f_k and stored by @__attnc_store_f_k
    (attn-export-abi) after the last entry.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def AttnDistinctReturnedBuffers
    : Pass<"attn-distinct-returned-buffers", "mlir::ModuleOp"> {
  let summary = "Give a buffer returned twice by a function a copy";
  let description = [{
    Runs after one-shot-bufferize, before buffer-results-to-out-params:
    each repeated operand of a func.return (a derived backward returning one
    zero constant for two inputs' gradients) becomes a new buffer with a
    copy of it, so that every result is distinct. (MLIR 22's
    buffer-results-to-out-params with hoist-static-allocs crashed on an
    alloc returned twice, as the GPU targets materialize such constants.)
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
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
    With `gpu-finish` set (GPU targets), functions take the runtime's
    context first (from attn-gpu-host-context; CUDA: then the stream, which
    may be null, the default stream): the context is checked for null like
    the buffers, and the entry point returns what the runtime function
    `gpu-finish`(ctx) -> i32 returns after the implementation (Vulkan:
    attnc_vk_finish, the first error of the work it recorded).
  }];
  let options = [
    Option<"gpuFinish", "gpu-finish", "std::string", /*default=*/"",
           "GPU targets: functions take the runtime context first, and "
           "entry points return this runtime function's status of it">
  ];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::func::FuncDialect",
    "mlir::LLVM::LLVMDialect", "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect"
  ];
}

//===----------------------------------------------------------------------===//
// GPU targets
//===----------------------------------------------------------------------===//

def AttnLowerGpu : Pass<"attn-lower-gpu", "mlir::ModuleOp"> {
  let summary = "Lower attn.attention(_grad), attn.attention_stats(_grad), attn.distill(_grad) and attn.append to target-neutral GPU kernels";
  let description = [{
    attn.append becomes a kernel that copies the new rows into the cache's
    own buffer in place (rows outside the capacity, or whose page-table
    entry is outside the pool, are not written). For the other ops, every
    decision comes from the op's `attn.tile_plan` (#attn.gpu_plan,
    from attn-plan-gpu-tiles; an op without one, whose tiles fit no
    workgroup memory, keeps the unfused lowering). Each
    attn.attention becomes one gpu.launch: a workgroup per (batch, head,
    query block) whose threads stage K and V key blocks in workgroup memory
    between barriers, compute the block's scores with each subgroup owning
    whole query rows (lanes over keys, then over the value dimension), and
    keep the online softmax's row maximum and sum with gpu.subgroup_reduce,
    for any subgroup size. Key blocks the causal, window or length mask
    empties are skipped and blocks it leaves whole skip the mask
    (MaskTiles, as on the CPU). Each attn.attention_grad becomes the
    FlashAttention-2 backward: a Delta kernel (rowsum(dO * O)), a kernel per
    (batch, KV head, key block) accumulating dK and dV over the query rows
    of every query head of its group, and one per (batch, head, query
    block) for dQ (no atomics: deterministic); float score captures get
    per-key partial gradients summed in key order by a kernel of their own.
    Each attn.attention_stats recomputes P = exp(S' - LSE) a key block at a
    time and never stores it: a kernel per (batch, head, query block) for
    the entropies and each row's sums over the pooled grid's key cells, one
    per (batch, query block) with every head's P of a key block in
    workgroup memory for the head similarity's partials, then kernels that
    sum the pooled cells, the mean entropies and the similarity in a fixed
    order. Score_mod and mask_mod regions are evaluated per element,
    capture reads as loads. Ops the kernels do not cover (capture partials
    over 64 MiB) are left to attn-lower-to-linalg.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
    "mlir::gpu::GPUDialect", "mlir::math::MathDialect",
    "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def AttnLowerCudaMma : Pass<"attn-lower-cuda-mma", "mlir::ModuleOp"> {
  let summary = "Lower attn.attention(_grad) to NVIDIA tensor-core flash kernels";
  let description = [{
    Every attn.attention and attn.attention_grad whose `attn.tile_plan` is
    an `#attn.mma_plan` (attn-plan-gpu-tiles with `tensor-cores`) becomes
    gpu.launch ops whose warps multiply with `mma.sync.m16n8k16` (f16 or
    bf16 operands, f32 accumulators; nvvm.mma.sync), load fragments from
    shared memory with ldmatrix (nvgpu.ldmatrix) and stage tiles with
    cp.async (nvgpu.device_async_copy) two steps deep. The forward keeps a
    warp's 16 rows of O, the running maximum and sum in registers (exp2,
    the scale folded with log2 e); the backward is FlashAttention-2's
    without atomics: a Delta kernel (rowsum(dO * O) - dLSE), a dQ kernel per
    (batch, head, query block) and a dK/dV kernel per (batch, KV head, key
    block) over every query head of its group (deterministic). Masks, the
    score_mod and mask_mod regions are evaluated per element as in the
    portable kernels (FlashShape), on the key blocks MaskTiles leaves.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
    "mlir::gpu::GPUDialect", "mlir::math::MathDialect",
    "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect", "mlir::vector::VectorDialect",
    "mlir::NVVM::NVVMDialect", "mlir::nvgpu::NVGPUDialect",
    "mlir::LLVM::LLVMDialect"
  ];
}

def AttnCudaMinBlocks : Pass<"attn-cuda-min-blocks", "mlir::ModuleOp"> {
  let summary = "Promise ptxas one workgroup per multiprocessor for tensor-core kernels";
  let description = [{
    Every outlined kernel with `nvvm.mma.sync` (attn-lower-cuda-mma's) gets
    `nvvm.minctasm = 1` (PTX `.minnctapersm 1`): its tiles are planned for
    one or two workgroups per multiprocessor, and without the promise ptxas
    may cap its registers for occupancy and spill.
  }];
}

def AttnGpuMaterializeConstants : Pass<"attn-gpu-materialize-constants", "mlir::ModuleOp"> {
  let summary = "Constant tensors of host code as linalg ops";
  let description = [{
    On GPU targets buffers live on the device, and a constant tensor that
    bufferization made a host `memref.get_global` is no device buffer (the
    runtime refused it: the zero gradient derived for a mask_mod's float
    capture, a slope table written into the spec). Before bufferization,
    every constant tensor outside kernels becomes a `linalg.fill` (a
    splat) or a `linalg.generic` that selects each element's value by its
    index (at most 256 elements; a larger one is a located error), which
    become kernels like every other linalg op.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def AttnGpuCopiesToLinalg : Pass<"attn-gpu-copies-to-linalg", "mlir::ModuleOp"> {
  let summary = "Host memref.copy ops as linalg.copy";
  let description = [{
    On GPU targets buffers live on the device: a memref.copy that
    bufferization left in a host function (a result written to its
    out-parameter) becomes a linalg.copy, which the parallel-loop mapping
    turns into a kernel like every other linalg op.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def AttnGpuHostContext : Pass<"attn-gpu-host-context", "mlir::ModuleOp"> {
  let summary = "Give every host function the GPU runtime context";
  let description = [{
    Runs after the host code's work became gpu.launch ops. Every function
    with a body gets a first argument `!llvm.ptr` (the runtime context:
    attnc_vk_context for Vulkan, attnc_cuda_context for CUDA), with
    `stream` a second one (the CUstream its work is queued on), and every
    call between them passes them on.
    Every buffer a function allocates is released at its end (the
    runtime defers the release until the work recorded before it is done).
    Host ops left that touch buffers (sequential loop nests, such as
    capture gradients accumulated in a fixed order) run in kernels of one
    thread: correct anywhere, and slow. Rejects, with a located error, what
    would still touch device memory from the host (a load whose value the
    host uses) and allocations of dynamic size.
  }];
  let options = [
    Option<"stream", "stream", "bool", /*default=*/"false",
           "Functions also take the runtime's stream, second (CUDA)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::gpu::GPUDialect",
                           "mlir::LLVM::LLVMDialect"];
}

def AttnGpuWorkgroupAttributions : Pass<"attn-gpu-workgroup-attributions"> {
  let summary = "Workgroup-memory allocations in gpu.launch bodies as workgroup attributions";
  let description = [{
    Every memref.alloc of workgroup memory (memory space 3, or
    #gpu.address_space<workgroup>) at the top of a gpu.launch body becomes
    a workgroup attribution of the launch (its deallocs are dropped), so
    that convert-gpu-to-nvvm gives it one shared-memory array per
    workgroup; that lowering would otherwise call malloc in each thread.
    Such an alloc anywhere else, or of dynamic shape, is an error.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def AttnGpuMergeModules : Pass<"attn-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Move every outlined kernel into one gpu.module";
  let description = [{
    After gpu-kernel-outlining (one gpu.module per kernel): the functions of
    every gpu.module move into the first (renamed where their names clash)
    and the launches follow them, so that gpu-module-to-binary serializes a
    spec's kernels in one LLVM run, one ptxas and one fatbinary. Modules
    with different attributes (targets) are an error.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def AttnGpuFixedSubgroups : Pass<"attn-gpu-fixed-subgroups"> {
  let summary = "Subgroup queries and reductions for a fixed subgroup size";
  let description = [{
    For targets whose subgroups have one size (`size`: 32, an NVIDIA
    warp): gpu.subgroup_size becomes that constant, gpu.subgroup_id the
    linear invocation index divided by it, gpu.num_subgroups the workgroup's
    invocations divided by it (rounded up), and gpu.subgroup_reduce
    upstream's butterfly of gpu.shuffle xor. convert-gpu-to-nvvm lowers
    none of them for f32.
  }];
  let options = [
    Option<"size", "size", "int64_t", /*default=*/"32",
           "The number of invocations in a subgroup (a power of two)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::gpu::GPUDialect",
                           "mlir::index::IndexDialect"];
}

def AttnGpuSinkConstants : Pass<"attn-gpu-sink-constants", "mlir::ModuleOp"> {
  let summary = "Clone the constants a gpu.launch body uses into it";
  let description = [{
    Before gpu-kernel-outlining: a constant defined outside a gpu.launch
    and used inside it is cloned into the body, so that outlined kernels
    take only buffers (gpu-launch-sink-index-computations leaves the
    constants the launch's own sizes use, which Vulkan would have to pass
    in buffers of their own).
  }];
}

def AttnSpirvAttachTarget : Pass<"attn-spirv-attach-target", "mlir::ModuleOp"> {
  let summary = "Attach a spirv.target_env to gpu.modules and entry point ABIs to kernels";
  let description = [{
    Sets `spirv.target_env` (parsed from `target-env`) on every gpu.module
    and `spirv.entry_point_abi<workgroup_size = ...>` on every kernel, from
    the constant block sizes of its launches (a kernel launched with
    non-constant or differing block sizes is an error).
  }];
  let options = [
    Option<"targetEnv", "target-env", "std::string",
           /*default=*/"attnc::kDefaultVulkanTargetEnv",
           "The #spirv.target_env attribute the kernels are compiled for">
  ];
  let dependentDialects = ["mlir::spirv::SPIRVDialect"];
}

def AttnSpirvBf16Storage : Pass<"attn-spirv-bf16-storage", "mlir::ModuleOp"> {
  let summary = "bf16 buffers as i16 buffers, for SPIR-V";
  let description = [{
    SPIR-V has no bf16, and MLIR 22's SPIR-V type conversion turns bf16
    into f32 (wrong code, not an error). Before outlining, every memref of
    bf16 in the module (function signatures, allocations, views, kernel
    operands) becomes a memref of i16 holding the same bits, and loads and
    stores bitcast between i16 and bf16. With arith-emulate-unsupported-
    floats and arith-expand{include-bf16} after it, no bf16 value is left
    in the kernels; attn-spirv-attach-target rejects one that is.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def AttnSpirvSignExtend : Pass<"attn-spirv-sign-extend", "mlir::gpu::GPUModuleOp"> {
  let summary = "Sign extensions in SPIR-V kernels as zero extensions and two integer ops";
  let description = [{
    Mesa 22.3's lavapipe (Debian 12's) gets OpSConvert from i32 to i64
    wrong where the result is compared (`arith.index_cast` of a negative
    index to i64, then `arith.cmpi slt`, found false: the high word is not
    the sign's). Every `arith.extsi` and every `arith.index_cast` from
    index (32 bits in the kernels' SPIR-V) to a wider integer becomes
    `(extui(x) ^ 2^(N-1)) - 2^(N-1)`, the same value by arithmetic alone.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def AttnSpirvMath : Pass<"attn-spirv-math", "mlir::gpu::GPUModuleOp"> {
  let summary = "Math ops convert-math-to-spirv lacks, in terms of ops it has";
  let description = [{
    MLIR 22's convert-math-to-spirv has no pattern for math.erf, math.erfc,
    math.cbrt, math.exp2 and math.trunc, which a score_mod may use: erf,
    erfc and cbrt become upstream's polynomial approximations, exp2 its
    expansion (exp(x ln 2)), and trunc(x) is x < 0 ? ceil(x) : floor(x).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect"];
}

def AttnVulkanLoopTrap : Pass<"attn-vulkan-loop-trap", "mlir::ModuleOp"> {
  let summary = "Make every kernel report loops the device cut short";
  let description = [{
    Mesa's lavapipe ends every loop of a shader invocation, silently, once
    that invocation has run 65535 loop iterations in all (llvmpipe's loop
    limiter): a long sequence then gives wrong results and no error.
    Before gpu-kernel-outlining, every gpu.launch gets at its end a loop of
    two iterations whose bound the driver cannot fold; when it runs fewer,
    the limiter had run out, and the kernel stores 1 into the context's
    trap buffer (a host `memref.alloc` marked `attnc.device_trap`, which
    attn-vulkan-lower-host makes a call of `attnc_vk_trap`). The runtime
    reads the trap when it waits for the work and returns
    ATTNC_STATUS_DEVICE_LIMIT. On other devices the probe costs a few
    instructions per invocation.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect"];
}

def AttnVulkanLowerHost : Pass<"attn-vulkan-lower-host", "mlir::ModuleOp"> {
  let summary = "Embed SPIR-V kernels and launch them through the Vulkan runtime";
  let description = [{
    After convert-gpu-to-spirv: every spirv.module is serialized into an
    `llvm.mlir.global` of i32 words, and every gpu.launch_func of its
    kernels becomes a call of the runtime's `attnc_vk_dispatch(ctx, words,
    count, entry, groups x/y/z, buffers, bytes)`, with the context the
    function's first argument (attn-gpu-host-context). Host memref.alloc
    and memref.dealloc become `attnc_vk_scratch` and `attnc_vk_release`,
    an alloc marked `attnc.device_trap` (attn-vulkan-loop-trap) a call of
    `attnc_vk_trap`.
    The gpu and spirv modules are erased. Results are LLVM-dialect values
    behind unrealized casts, for the host's lowering to the LLVM dialect.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def AttnCudaLowerHost : Pass<"attn-cuda-lower-host", "mlir::ModuleOp"> {
  let summary = "Embed CUDA kernel binaries and launch them through the CUDA runtime";
  let description = [{
    After gpu-module-to-binary: every gpu.binary's object (a fatbin, a
    cubin, or PTX, then NUL-terminated) is put in an `llvm.mlir.global`, and
    every gpu.launch_func of its kernels becomes a call of the runtime's
    `attnc_cuda_launch(ctx, stream, image, kernel, grid x/y/z, block x/y/z,
    shared bytes, count, buffers)`, with the context and the stream the
    function's first two arguments (attn-gpu-host-context{stream}). Host
    memref.alloc and memref.dealloc become the stream-ordered
    `attnc_cuda_scratch` and `attnc_cuda_release`. The binaries are erased.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // ATTNC_CODEGEN_PASSES_TD
