// Builders that express each attention step as linalg ops on tensors.
//
// These are the reference lowering of the attn dialect: one linalg op per
// mathematical step, f32 accumulation, no fusion. Both attn-lower-to-linalg
// (per graph op) and the lowering of the fused attn.attention use them.
#ifndef ATTNC_CODEGEN_LINALGBUILDERS_H
#define ATTNC_CODEGEN_LINALGBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace attnc {

/// Named mask conditions and an optional mask_mod region; the conjunction of
/// every one given decides visibility (see attn.mask).
struct MaskConditions {
  bool causal = false;
  std::optional<int64_t> window;
  mlir::Value lengths;             // tensor<Bxi32|i64> or null
  mlir::Value varlen;              // tensor<(n+1)xi32|i64> offsets or null
  mlir::Region *maskMod = nullptr; // (b, h, i, j, captures...) -> i1
  mlir::ValueRange captures;
  bool zeroFill = false; // masked entries become 0 instead of -inf
  bool cache = false;    // causal and window from the end of the keys

  bool any() const { return causal || window || lengths || varlen || maskMod; }
};

/// X[B,S,E] x W[E,H*D] -> [B,H,S,D] of `resultType`.
mlir::Value buildProjection(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value input, mlir::Value weight,
                            mlir::RankedTensorType resultType);
/// O[B,H,S,Dv] x Wo[H*Dv,E] -> [B,S,E] of `resultType`.
mlir::Value buildMerge(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value input, mlir::Value weight,
                       mlir::RankedTensorType resultType);
/// A paged KV cache's pool [N, Hkv, P, D] gathered through its block
/// table [B, M] into [B, Hkv, M P, D] (an entry outside [0, N) reads page
/// 0): the unfused lowering's K or V (the flash kernels read the pages).
mlir::Value buildGatheredPages(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Value pool, mlir::Value table);
/// attn.append: `cache` with row t of `rows` [B, Hkv, T, D] written at
/// position len[b] - T + t of batch b (rows at positions outside [0,
/// capacity) skipped), through the block table `table`
/// [B, M] when the cache is a pool of pages (an entry outside [0, N)
/// writes page 0, as buildGatheredPages reads it). Loops of slice copies
/// on tensors, which bufferize in place: only the new rows are written.
mlir::Value buildAppend(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value rows, mlir::Value cache,
                        mlir::Value lengths, mlir::Value table);
/// Q K^T in f32 with GQA.
mlir::Value buildScores(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value query, mlir::Value key);
mlir::Value buildScale(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value scores, double factor);
/// Applies a score_mod region (score, b, h, i, j, captures...) -> f32.
mlir::Value buildScoreMod(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value scores, mlir::Region &body,
                          mlir::ValueRange captures);
mlir::Value buildMask(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value scores, const MaskConditions &mask);
/// Softmax probabilities and log-sum-exp over the last dimension; fully
/// masked rows give P = 0 and LSE = -inf.
std::pair<mlir::Value, mlir::Value> buildSoftmax(mlir::OpBuilder &b,
                                                 mlir::Location loc,
                                                 mlir::Value scores);
/// P V with GQA; the result has `resultType` (V's element type).
mlir::Value buildApply(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value probs, mlir::Value value,
                       mlir::RankedTensorType resultType);

/// X^T Y summed over the query heads of each KV head (attn.transposed_apply).
mlir::Value buildTransposedApply(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value lhs, mlir::Value rhs,
                                 mlir::RankedTensorType resultType);
/// (dX, dW) of attn.projection and (dO, dWo) of attn.merge.
std::pair<mlir::Value, mlir::Value>
buildProjectionGrad(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input,
                    mlir::Value weight, mlir::Value grad);
std::pair<mlir::Value, mlir::Value>
buildMergeGrad(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input,
               mlir::Value weight, mlir::Value grad);
/// P * (dP - rowsum(P * dP)).
mlir::Value buildSoftmaxGrad(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value probs, mlir::Value grad);
/// dS = dS' * df/ds, and one gradient per capture (zeros for integer ones),
/// accumulated in (b, h, i, j) order.
std::pair<mlir::Value, llvm::SmallVector<mlir::Value>>
buildScoreModGrad(mlir::OpBuilder &b, mlir::Location loc, mlir::Value scores,
                  mlir::Value grad, mlir::Region &body,
                  mlir::ValueRange captures);

/// The score options that attn.attention, attn.attention_grad and the
/// statistics ops share: S' = mask(score_mod(scale Q K^T)).
struct ScoreInputs {
  mlir::Value query, key;
  double scale;
  mlir::Region *scoreMod = nullptr;
  mlir::ValueRange scoreCaptures;
  MaskConditions mask;
};

/// The operands of attn.attention_grad, without the op.
struct AttentionGradInputs : ScoreInputs {
  mlir::Value value, output, lse, outputGrad, lseGrad;
};
struct AttentionGrads {
  mlir::Value query, key, value;
  llvm::SmallVector<mlir::Value> scoreCaptures;
};
/// dQ, dK, dV and the score captures' gradients, recomputing P from LSE.
AttentionGrads buildAttentionGrad(mlir::OpBuilder &b, mlir::Location loc,
                                  const AttentionGradInputs &inputs);

/// attn.attention_stats: the statistics asked for (the others null),
/// from P = exp(S' - LSE) materialized (the unfused lowering).
struct AttentionStats {
  mlir::Value entropy, meanEntropy, pooled, similarity;
};
AttentionStats buildAttentionStats(mlir::OpBuilder &b, mlir::Location loc,
                                   const ScoreInputs &inputs, mlir::Value lse,
                                   bool entropy, bool meanEntropy,
                                   mlir::RankedTensorType pooledType,
                                   bool similarity);
/// attn.attention_stats_grad: dQ, dK, dLSE and the score captures'
/// gradients for the cotangents of the entropy and of the mean entropy
/// (either may be null).
struct AttentionStatsGrads {
  mlir::Value query, key, lse;
  llvm::SmallVector<mlir::Value> scoreCaptures;
};
AttentionStatsGrads
buildAttentionStatsGrad(mlir::OpBuilder &b, mlir::Location loc,
                        const ScoreInputs &inputs, mlir::Value lse,
                        mlir::Value entropyGrad, mlir::Value meanEntropyGrad);

/// The operands of attn.distill(_grad), without the op: each side's score
/// inputs (no score_mod; both with the op's mask) and LSE.
struct DistillInputs {
  ScoreInputs student, teacher;
  mlir::Value lse, teacherLse;
};
/// attn.distill: KL(P_t || P_s) per row [B, H, Sq], or with `mean` its mean
/// over the rows that see a key (tensor<f32>), from both P materialized
/// (the unfused lowering).
mlir::Value buildDistill(mlir::OpBuilder &b, mlir::Location loc,
                         const DistillInputs &inputs, bool mean);
/// attn.distill_grad: the gradients with both LSEs held fixed, for the
/// cotangent `klGrad` of the KL per row ([B, H, Sq]) or of its mean (rank 0).
struct DistillGrads {
  mlir::Value query, key, lse, teacherQuery, teacherKey, teacherLse;
};
DistillGrads buildDistillGrad(mlir::OpBuilder &b, mlir::Location loc,
                              const DistillInputs &inputs, mlir::Value klGrad);

/// attn.combine: the union's O (the partials' type) and LSE.
std::pair<mlir::Value, mlir::Value> buildCombine(mlir::OpBuilder &b,
                                                 mlir::Location loc,
                                                 mlir::ValueRange outputs,
                                                 mlir::ValueRange lses);
/// attn.combine_grad: dO_k for every part, then dLSE_k (`lseGrad` may be
/// null).
llvm::SmallVector<mlir::Value>
buildCombineGrad(mlir::OpBuilder &b, mlir::Location loc,
                 mlir::ValueRange outputs, mlir::ValueRange lses,
                 mlir::Value outputGrad, mlir::Value lseGrad);

} // namespace attnc

#endif // ATTNC_CODEGEN_LINALGBUILDERS_H
