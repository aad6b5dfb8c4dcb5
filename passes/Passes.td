// Graph-level passes over the attn dialect.
#ifndef ATTNC_PASSES_PASSES_TD
#define ATTNC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnDeriveBackward : Pass<"attn-derive-backward", "mlir::ModuleOp"> {
  let summary = "Derive @f_fwd and @f_bwd for every public function @f";
  let description = [{
    Reverse-mode differentiation over the attn dialect and the scalar code of
    score_mod regions. For each public @f(inputs) -> (results):

    - @f_fwd(inputs) -> (results, saved...) also returns what the backward
      reuses: the result of every attn.projection and the O and LSE of every
      attn.attention that @f does not already return (never S or P);
    - @f_bwd(inputs, results, saved..., d results...) -> (d inputs...)
      returns the
      gradient of every floating-point input (projection weights, Q/K/V,
      captured tensors such as ALiBi slopes), given one cotangent per
      floating-point result. Integer inputs get no gradient.

    The backward recomputes the forward values it needs from the inputs and
    the saved values, then applies each op's rule: attn.projection_grad,
    attn.merge_grad, attn.apply/attn.transposed_apply for scores and apply,
    attn.softmax_grad, attn.mask ... zero_fill, attn.score_mod_grad and
    attn.attention_grad. An op without a rule gets a located error.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::func::FuncDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def AttnFuse : Pass<"attn-fuse", "mlir::ModuleOp"> {
  let summary = "Fuse scores/scale/score_mod/mask/softmax/apply chains into attn.attention";
  let description = [{
    Rewrites every chain
    `attn.scores -> attn.scale* -> attn.score_mod? -> attn.mask* ->
    attn.softmax -> attn.apply` whose intermediate values have no other use
    into one `attn.attention` (scale: the product of the scale factors, 1
    without any; masks: their conjunction; regions and captures moved over),
    so that the flash kernels compute it without an Sq x Skv buffer. Run
    before attn-derive-backward, it makes the derived backward an
    `attn.attention_grad` too (FlashAttention-2, P recomputed from the LSE).
    A chain is left alone when a score or probability tensor is used
    elsewhere (say, returned), a score_mod follows a mask, Q/K/V element
    types differ, or masks carry two lengths tensors, two mask_mod regions or
    `zero_fill`.
  }];
}

def AttnKeepEntryPoints : Pass<"attn-keep-entry-points", "mlir::ModuleOp"> {
  let summary = "Keep only the forward or only the backward entry points";
  let description = [{
    Runs after attn-derive-backward. For every public @f with derived @f_fwd
    and @f_bwd, `entry-points=forward` erases @f_bwd and
    `entry-points=backward` erases @f and @f_fwd, so that the two halves of
    a spec compile separately (the JIT compiles them on two threads);
    `all` (the default) keeps everything.
  }];
  let options = [
    Option<"entryPoints", "entry-points", "attnc::EntryPoints",
           /*default=*/"attnc::EntryPoints::All",
           "Which entry points to keep",
           [{::llvm::cl::values(
             clEnumValN(attnc::EntryPoints::All, "all", "every entry point"),
             clEnumValN(attnc::EntryPoints::Forward, "forward",
                        "@f and @f_fwd"),
             clEnumValN(attnc::EntryPoints::Backward, "backward", "@f_bwd"))}]>
  ];
}

def AttnMarkLengthBounds : Pass<"attn-mark-length-bounds", "mlir::ModuleOp"> {
  let summary = "Mark the lengths and block tables of KV caches, and varlen offsets, with their bounds";
  let description = [{
    Every function argument that gives the `lengths` of a `cache` op
    (attn.attention, attn.attention_grad, attn.mask) or of attn.append
    (capacity: C, or M P paged), or is passed on to
    one that does (`@f` calling `@f_fwd`), gets `attn.max_value = Skv`
    (the cache's capacity; the least of them when several caches share
    it); one that gives a paged cache's block table (`pages`) gets
    `attn.max_value = N - 1` (its last page); one that gives `varlen`'s
    sequence offsets gets `attn.max_value = Skv` and `attn.nondecreasing`.
    attn-export-abi makes the C entry point of a CPU kernel check those
    entries first: one that is negative, past its bound or (nondecreasing)
    below the entry before it returns ATTNC_STATUS_BAD_SIZE and the kernel
    writes nothing. (Other `lengths` are clamped to [0, Skv], as attn.mask
    says.)
  }];
}

def AttnPlanTiles : Pass<"attn-plan-tiles", "mlir::ModuleOp"> {
  let summary = "Analyse masks and choose target-aware tile sizes";
  let description = [{
    For every attn.attention and attn.attention_grad:

    - mask analysis: conjuncts of a `mask_mod` region that compare affine
      functions of i and j (`j <= i`, `i - j < W`, ...) become the named
      masks `causal` and `window`, and the region (with its captures) is
      dropped when they say all it says. The kernels analyse named masks
      per tile: tiles a mask empties are skipped, tiles it leaves whole run
      without evaluating it, only boundary tiles evaluate it; other
      predicates are evaluated per element;
    - a CPU tile plan, `attn.tile_plan = #attn.cpu_plan<rows = R,
      query_block = Q, key_block = K[, amx = true][, splits = N]
      [, dot_bf16 = true][, key_tasks = true]>`: R query
      rows per register block (up to 12 for 512-bit vectors, 3 for 256, 1
      for 128, as even as Sq allows), Q rows per forward task (up to 8
      register blocks that visit each key block together while it is in
      cache, keeping 64 tasks or more), K keys per online-softmax step (up
      to 256, or the 32-key tiles a sliding window spans; the backward's key
      blocks up to 128, fewer for wide heads), AMX tiles for bf16 forwards on
      AMX targets, and the backward's dQ splits (with key_tasks, its tasks:
      key splits over every (batch, KV head), where a bias read at its keys
      then needs one gradient buffer rather than a copy per task).
      attn.projection, attn.merge and their gradients get the rows of their
      GEMM blocks.

    An op that already carries a plan keeps it.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "Width of the target's vector registers (512, 256 or 128)">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "The target has AMX bf16 tiles: bf16 forwards get 16-row tiles">,
    Option<"dotBf16", "dot-bf16", "bool", /*default=*/"false",
           "The target has AVX-512 BF16 dot products (vdpbf16ps): bf16 "
           "forwards without AMX and bf16 backwards use them">,
    Option<"rows", "rows", "int64_t", /*default=*/"0",
           "Query rows per register block instead of the target's choice "
           "(1 to 16, no AMX tiles then; 0: the target's): a testing and "
           "tuning aid">
  ];
}

def AttnPlanGpuTiles : Pass<"attn-plan-gpu-tiles", "mlir::ModuleOp"> {
  let summary = "Analyse masks and choose GPU tile sizes";
  let description = [{
    The GPU counterpart of attn-plan-tiles: the same mask analysis, then for
    every attn.attention and attn.attention_grad the flash kernels cover
    (attn-lower-gpu), `attn.tile_plan = #attn.gpu_plan<query_block = Q,
    key_block = K, workgroup_size = W, subgroups = N>`: W invocations per
    workgroup (N subgroups of the target's usual size, a hint: the kernels
    read theirs at run time), and the largest Q (query rows per workgroup,
    up to 16) and K (keys per online-softmax step, up to 32) whose tiles,
    staged in workgroup memory as f32, fit in `shared-memory-bytes`. An op
    no plan fits (very wide heads) gets none and keeps the unfused
    lowering. An op that already carries a plan keeps it. With
    `tensor-cores` (the CUDA target), the ops NVIDIA's mma.sync kernels
    cover (planMmaTiles: f16 and bf16, heads multiples of 16 up to 128)
    get an `#attn.mma_plan` instead, which attn-lower-cuda-mma lowers.
  }];
  let options = [
    Option<"sharedMemoryBytes", "shared-memory-bytes", "int64_t",
           /*default=*/"32768",
           "Workgroup memory a kernel may use (Vulkan guarantees 16 KiB; "
           "lavapipe and desktop GPUs have 32 KiB or more)">,
    Option<"workgroupSize", "workgroup-size", "int64_t", /*default=*/"64",
           "Invocations per workgroup">,
    Option<"subgroupSize", "subgroup-size", "int64_t", /*default=*/"32",
           "The target's usual subgroup size (the plan's subgroup count)">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"false",
           "Plan NVIDIA tensor-core (mma.sync) kernels where they cover an "
           "op">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "With tensor-cores: forwards on Hopper's warpgroup MMA (sm_90a)">,
    Option<"atomicDq", "atomic-dq", "bool", /*default=*/"false",
           "With tensor-cores: backwards add dQ with atomics in the dK/dV "
           "kernel (else dQ has a kernel of its own, deterministic)">
  ];
}

#endif // ATTNC_PASSES_PASSES_TD
