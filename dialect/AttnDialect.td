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
  }];
  // Regions use arith, math and tensor ops; the dialect must be able to parse them.
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

// Base class of every attn op: pure tensor semantics, no side effects.
class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTNC_DIALECT_ATTNDIALECT_TD
