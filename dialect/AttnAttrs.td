// Attributes of the attn dialect: the typed tile plans that attn-plan-tiles
// writes on fused ops, one variant per target kind.
#ifndef ATTNC_DIALECT_ATTNATTRS_TD
#define ATTNC_DIALECT_ATTNATTRS_TD

include "dialect/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Attn_TilePlanAttrInterface : AttrInterface<"TilePlanAttrInterface"> {
  let cppNamespace = "::attnc::attn";
  let description = [{
    A tile plan: every decision a back end's lowering of one fused op
    (attn.attention, attn.attention_grad, projections and merges) takes
    from the planner. A lowering reads its own target's variant and never
    re-plans; what all variants share is the query block one unit of work
    owns and the keys one online-softmax step covers.
  }];
  let methods = [
    InterfaceMethod<"Query rows one task (CPU) or workgroup (GPU) owns; 0 "
                    "for ops without a key loop (GEMMs).",
                    "int64_t", "getQueryBlock">,
    InterfaceMethod<"Keys per online-softmax step (forward) or per dK/dV "
                    "block (backward); 0 for GEMMs.",
                    "int64_t", "getKeyBlock">
  ];
}

class Attn_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Attn_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Attn_CpuPlanAttr : Attn_Attr<"CpuPlan", "cpu_plan",
                                 [Attn_TilePlanAttrInterface]> {
  let summary = "The tile plan of one op for the CPU kernels (attn-lower-cpu)";
  let description = [{
    - `rows`: query rows of a register block (the microkernels keep 2 rows
      vectors of 16 floats per row as accumulators), 1 to 16 (32 for AMX
      forwards and backwards);
    - `query_block`: query rows per forward task, 1 to 16 register blocks
      that visit each key block together while it is in cache (0: none,
      for GEMMs);
    - `key_block`: keys per online-softmax step of the forward, or per
      dK/dV block of the backward, a multiple of 32 up to 256 (0: none);
    - `amx`: the forward, the statistics or the backward multiply on AMX
      bf16 tiles (rows = 16; a forward's may be 32, two tiles of rows that
      share each K and V tile; the backward's are 32: two tiles of rows,
      one reduction step of its transposed products);
    - `dot_bf16`: the forward (where there is no AMX) or the backward
      (where it does not take AMX) multiplies with AVX-512 BF16 dot
      products (vdpbf16ps: pairs of bf16 into f32); a backward's rows are
      then even;
    - `splits`: the backward's dQ copies: split s takes key blocks s, s +
      splits, ... and accumulates dQ into its own f32 copy, the copies
      summed in split order (deterministic for any thread count); a
      forward's key ranges (split-KV): split s of a query block takes the
      s-th of `splits` equal ranges of the keys it sees and writes a
      partial (O, LSE), the partials merged in split order;
    - `key_tasks`: a backward's tasks are its `splits`, each taking its key
      blocks of every (batch, KV head) rather than one task per (batch, KV
      head, split): the gradient of a score capture read at each score's key
      (`bias[i, j]`) then has one buffer, each element summed by the one task
      that owns its key, instead of a copy per task.

    ```mlir
    #attn.cpu_plan<rows = 12, query_block = 96, key_block = 256>
    #attn.cpu_plan<rows = 16, query_block = 64, key_block = 256, amx = true>
    #attn.cpu_plan<rows = 32, query_block = 32, key_block = 128, amx = true>
    #attn.cpu_plan<rows = 12, query_block = 96, key_block = 256, dot_bf16 = true>
    #attn.cpu_plan<rows = 8>
    ```
  }];
  let parameters = (ins
    AttrParameter<"int64_t",
        "query rows of a register block, 1 to 16 (32: AMX)">:$rows,
    DefaultValuedParameter<"int64_t", "0",
        "query rows per forward task (0: none, for GEMMs)">:$query_block,
    DefaultValuedParameter<"int64_t", "0",
        "keys per online-softmax step or dK/dV block (0: none)">:$key_block,
    DefaultValuedParameter<"bool", "false",
        "the products are on AMX bf16 tiles">:$amx,
    DefaultValuedParameter<"int64_t", "1",
        "the backward's dQ copies or the forward's key ranges">:$splits,
    DefaultValuedParameter<"bool", "false",
        "the products are AVX-512 BF16 dot products">:$dot_bf16,
    DefaultValuedParameter<"bool", "false",
        "the backward's tasks are its splits over every (batch, KV head)">:$key_tasks
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The limits of the CPU kernels: rows of a register block, register
    /// blocks per task, keys per step (a multiple of kKeyTile), and the
    /// rows of an AMX tile.
    static constexpr int64_t kMaxRows = 16, kMaxQueryTiles = 16,
                             kMaxKeyBlock = 256, kKeyTile = 32, kAmxRows = 16;
    /// The most rows of a dot_bf16 register block: 2 rows accumulators,
    /// 2 operands and a broadcast in 32 vector registers.
    static constexpr int64_t kMaxDotRows = 14;
  }];
}

def Attn_GpuPlanAttr : Attn_Attr<"GpuPlan", "gpu_plan",
                                 [Attn_TilePlanAttrInterface]> {
  let summary = "The tile plan of one op for the GPU kernels";
  let description = [{
    The plan attn-plan-gpu-tiles writes on each fused op for the GPU flash
    kernels of `codegen/gpu/` (the Vulkan and CUDA targets): blocks of up
    to 16 query rows and 32 keys, halved (keys first) until their tiles fit
    in a quarter of the target's workgroup memory. The kernels stage one K/V tile at a time in workgroup
    memory, so the planner writes `stages = 1` and `shared_kv = true`.

    - `query_block`: query rows per workgroup;
    - `key_block`: keys per online-softmax step, the K/V tile staged at once;
    - `workgroup_size`: invocations per workgroup, `subgroups` of them
      (workgroup_size a multiple of subgroups);
    - `stages`: K/V tiles in flight in workgroup memory (pipeline depth);
    - `shared_kv`: K/V tiles staged in workgroup memory (else read from
      global memory by every subgroup).

    ```mlir
    #attn.gpu_plan<query_block = 64, key_block = 64, workgroup_size = 128,
                   subgroups = 4, stages = 2>
    ```
  }];
  let parameters = (ins
    AttrParameter<"int64_t", "query rows per workgroup">:$query_block,
    AttrParameter<"int64_t", "keys per online-softmax step">:$key_block,
    AttrParameter<"int64_t", "invocations per workgroup">:$workgroup_size,
    AttrParameter<"int64_t", "subgroups per workgroup">:$subgroups,
    DefaultValuedParameter<"int64_t", "1",
        "K/V tiles in flight in workgroup memory">:$stages,
    DefaultValuedParameter<"bool", "true",
        "K/V tiles staged in workgroup memory">:$shared_kv
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Attn_MmaPlanAttr : Attn_Attr<"MmaPlan", "mma_plan",
                                 [Attn_TilePlanAttrInterface]> {
  let summary = "The tile plan of one op for the NVIDIA tensor-core kernels";
  let description = [{
    The plan attn-plan-gpu-tiles writes, with `tensor-cores`, on each fused
    op the tensor-core flash kernels of `codegen/cuda/` cover (f16 or bf16
    Q, K and V; head dimensions multiples of 16 up to 128; no paged cache).
    Each of a workgroup's `warps` warps owns 16 rows of the tiles it
    accumulates in registers with `mma.sync.m16n8k16` (f32 accumulators),
    so a workgroup owns 16 x warps of them:

    - forward: `query_block` (= 16 x warps) query rows per workgroup, over
      steps of `key_block` keys (K and V tiles in shared memory, the next
      one copied with cp.async while the current one is used);
    - backward, dQ kernel: `query_block` (= 16 x warps) rows per workgroup,
      over steps of `key_block` keys;
    - backward, dK/dV kernel: `key_block` (= 16 x warps) keys per
      workgroup, over steps of `query_block` rows of every query head of
      its KV head.

    With `atomic_dq`, the backward has no dQ kernel: the dK/dV kernel adds
    each key block's dS K into an f32 dQ with atomics (fewer products, an
    order that varies from run to run); without it dQ is deterministic.
    With `wgmma` (sm_90a), the forward is one warpgroup's: 64 query rows
    over steps of `key_block` keys, both products wgmma.mma_async (heads
    of 64 or 128).

    ```mlir
    #attn.mma_plan<warps = 4, query_block = 64, key_block = 64>
    #attn.mma_plan<warps = 4, query_block = 64, key_block = 128, wgmma = true>
    ```
  }];
  let parameters = (ins
    AttrParameter<"int64_t", "warps per workgroup">:$warps,
    AttrParameter<"int64_t", "query rows per workgroup or step">:$query_block,
    AttrParameter<"int64_t", "keys per step or workgroup">:$key_block,
    DefaultValuedParameter<"bool", "false",
        "the forward multiplies with Hopper's warpgroup MMA (wgmma)">:$wgmma,
    DefaultValuedParameter<"bool", "false",
        "the backward's dK/dV kernel adds dQ with atomics">:$atomic_dq
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // ATTNC_DIALECT_ATTNATTRS_TD
