// Builders that express each attention step as linalg ops on tensors.
//
// These are the reference lowering of the attn dialect: one linalg op per
// mathematical step, f32 accumulation, no fusion. Both attn-lower-to-linalg
// (per graph op) and the lowering of the fused attn.attention use them.
#ifndef ATTNC_CODEGEN_LINALGBUILDERS_H
#define ATTNC_CODEGEN_LINALGBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace attnc {

/// Named mask conditions and an optional mask_mod region; the conjunction of
/// every one given decides visibility (see attn.mask).
struct MaskConditions {
  bool causal = false;
  std::optional<int64_t> window;
  mlir::Value lengths;             // tensor<Bxi32|i64> or null
  mlir::Region *maskMod = nullptr; // (b, h, i, j, captures...) -> i1
  mlir::ValueRange captures;

  bool any() const { return causal || window || lengths || maskMod; }
};

/// X[B,S,E] x W[E,H*D] -> [B,H,S,D] of `resultType`.
mlir::Value buildProjection(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value input, mlir::Value weight,
                            mlir::RankedTensorType resultType);
/// O[B,H,S,Dv] x Wo[H*Dv,E] -> [B,S,E] of `resultType`.
mlir::Value buildMerge(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value input, mlir::Value weight,
                       mlir::RankedTensorType resultType);
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

} // namespace attnc

#endif // ATTNC_CODEGEN_LINALGBUILDERS_H
