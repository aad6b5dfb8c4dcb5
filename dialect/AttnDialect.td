// The attn dialect: graph-level attention ops on tensors.
#ifndef ATTNC_DIALECT_ATTNDIALECT_TD
#define ATTNC_DIALECT_ATTNDIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::attnc::attn";
  let summary = "Graph-level attention: projections, scores, masks, score mods, softmax";
  let description = [{
    The attn dialect describes one attention variant on ranked, statically shaped
    tensors. Layouts are row-major: activations X[B,S,E], per-head tensors
    Q/K/V/O[B,H,S,D], scores and probabilities [B,H,Sq,Skv]. Scores are always
    f32 (f16/bf16 inputs accumulate in f32; softmax runs in f32).

    A spec is a `func.func` per kernel, written in one of two forms that mix
    freely: the graph form, one op per step (`attn.projection`,
    `attn.scores`, `attn.scale`, `attn.score_mod`, `attn.mask`,
    `attn.softmax`, `attn.apply`, `attn.merge`), and the fused
    `attn.attention`, into which attn-fuse rewrites graph-form chains. The
    `score_mod` and `mask_mod` regions hold scalar arith/math/scf code over
    the indices b, h, i, j (and the score, in a score_mod), read their
    captured tensors with `tensor.extract` and end with `attn.yield`. The
    gradient ops (`attn.*_grad`, `attn.transposed_apply`) are what
    attn-derive-backward emits for `@f_bwd`; a spec may also write them.
    The attributes are the tile plans the planners write for the lowerings.
  }];
  // Regions use arith, math and tensor ops; the dialect must be able to parse them.
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
  // The attributes the passes exchange, with named accessors
  // (AttnDialect::get<Name>AttrHelper()) and checked by
  // verifyOperationAttribute:
  // - tile_plan: on fused ops and GEMMs, the plan of attn-plan-tiles;
  // - uses_amx: on the module, set by attn-lower-cpu when a kernel uses AMX
  //   tiles (attn-export-abi then asks the OS for the tile state);
  // - parallel_tasks: on an outlined task function (attn-lower-parallel-calls
  //   runs its calls on the thread pool);
  // - saved_bytes: on a derived @f_fwd, the bytes of what it saves for
  //   @f_bwd (attn-export-abi exports f_saved_bytes());
  // - max_value: on a function argument, the largest value its entries may
  //   hold: the capacity of the KV cache whose lengths it gives, or a paged
  //   cache's last page for its block table (attn-mark-length-bounds;
  //   attn-export-abi checks them), verified by verifyRegionArgAttribute;
  // - nondecreasing: beside max_value on a function argument whose entries
  //   must also be in nondecreasing order (varlen's sequence offsets),
  //   checked with it;
  // - batch_slices: on a kernel whose spec gave its batch as `?` (compiled
  //   for one batch entry, see codegen/DynamicBatch.h), the bytes of one
  //   batch entry of each argument in the entry point's order (inputs, then
  //   results), 0 for one without a batch dimension: attn-export-abi carries
  //   it to the entry point, attn-batch-entries loops over the entries;
  // - batch_sums: beside it, for the outputs without the batch of a kernel
  //   with one (gradients of unbatched inputs: their sums over the batch),
  //   the bytes of an f32 accumulator of each (0 for the other arguments):
  //   attn-batch-entries sums the entries' values there, attn-export-abi
  //   emits the helpers that add and store them;
  // - batch_uneven: beside it, where the entries' work depends on integer
  //   inputs (lengths, ids, block tables), so that whole entries on threads
  //   of their own could leave threads idle: attn-batch-entries runs them so
  //   only from more entries per thread.
  let discardableAttrs = (ins
    "::attnc::attn::TilePlanAttrInterface":$tile_plan,
    "::mlir::UnitAttr":$uses_amx,
    "::mlir::UnitAttr":$parallel_tasks,
    "::mlir::IntegerAttr":$saved_bytes,
    "::mlir::IntegerAttr":$max_value,
    "::mlir::UnitAttr":$nondecreasing,
    "::mlir::DenseI64ArrayAttr":$batch_slices,
    "::mlir::DenseI64ArrayAttr":$batch_sums,
    "::mlir::UnitAttr":$batch_uneven
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (AttnAttrs.cpp, where their storage is).
    void registerAttributes();
  }];
  let useDefaultAttributePrinterParser = 1;
}

// Base class of every attn op: pure tensor semantics, no side effects.
class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTNC_DIALECT_ATTNDIALECT_TD
