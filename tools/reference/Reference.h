//===- Reference.h - Float64 reference attention oracle ---------*- C++ -*-===//
//
// A deliberately naive, dependency-free float64 implementation of attention
// (forward, backward, projections and helpers). It shares no code with the
// compiler so tests and tools can use it as an independent oracle.
//
// All tensors are contiguous row-major arrays of double:
//   q  [B, H,   Sq,  D ]    k [B, Hkv, Skv, D ]    v [B, Hkv, Skv, Dv]
//   o  [B, H,   Sq,  Dv]  lse [B, H,   Sq     ]
//
//===----------------------------------------------------------------------===//

#ifndef ATTNC_TOOLS_REFERENCE_REFERENCE_H
#define ATTNC_TOOLS_REFERENCE_REFERENCE_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace attnc::ref {

struct AttentionShape {
  int64_t B, H, Hkv, Sq, Skv, D, Dv;
};

/// Visibility conditions; all given conditions are ANDed. A default-built
/// MaskSpec masks nothing.
struct MaskSpec {
  /// Visible iff j <= i (top-left aligned, also when Sq != Skv).
  bool causal = false;
  /// Sliding window (0 = none): visible iff j <= i and i - j < window.
  int64_t window = 0;
  /// Per-batch key lengths (size B), nullptr for none: visible iff
  /// j < lengths[b].
  const int64_t *lengths = nullptr;
  /// Arbitrary predicate (b, h, i, j); empty for none.
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> maskMod;
  /// The keys are a KV cache of capacity `skv` and the `sq` queries its
  /// last tokens: causal and window compare j with the position
  /// n_b - sq + i, n_b = lengths[b] clamped to [0, skv] (skv without
  /// lengths). The mask_mod still gets i.
  bool cache = false;
  int64_t sq = 0, skv = 0;
  /// Packed sequences (`varlen`): numOffsets >= 2 nondecreasing offsets,
  /// nullptr for none; visible only when i and j lie in one sequence
  /// [offsets[d], offsets[d + 1]).
  const int64_t *offsets = nullptr;
  int64_t numOffsets = 0;
};

/// Returns true when key j is visible to query i of batch b, head h.
bool isVisible(const MaskSpec &mask, int64_t b, int64_t h, int64_t i,
               int64_t j);

/// Elementwise modification of the scaled scores before masking.
struct ScoreMod {
  /// S' = apply(S, b, h, i, j); empty means identity.
  std::function<double(double s, int64_t b, int64_t h, int64_t i, int64_t j)>
      apply;
  /// d apply / d s. Required when apply is set and the backward is used.
  std::function<double(double s, int64_t b, int64_t h, int64_t i, int64_t j)>
      dScore;
  /// Optional: lets the caller accumulate dSPrime * d apply / d capture into
  /// its own gradient arrays for tensors captured by apply.
  std::function<void(double s, int64_t b, int64_t h, int64_t i, int64_t j,
                     double dSPrime)>
      accumulateCaptureGrad;
};

/// 1 / sqrt(D).
double defaultScale(int64_t D);

/// O = softmax(mask(scoreMod(scale * Q K^T))) V and the per-row logsumexp.
/// Query head h reads kv head h / (H / Hkv). A row with no visible key, or
/// whose visible scores are all -inf, yields O = 0 and LSE = -inf; a row
/// with a visible score of +inf or NaN yields O, P and LSE NaN. `lse` may be
/// nullptr.
void attentionForward(const AttentionShape &shape, double scale,
                      const MaskSpec &mask, const ScoreMod &scoreMod,
                      const double *q, const double *k, const double *v,
                      double *o, double *lse);

/// Gradients of attentionForward given dO (FlashAttention-2 formulation).
/// Recomputes O and LSE itself; dQ, dK and dV are fully overwritten. With
/// GQA, dK and dV sum over the query heads sharing a kv head. The scoreMod
/// callbacks dScore and accumulateCaptureGrad are called exactly once per
/// visible (b, h, i, j), in loop order b, h, i, j.
void attentionBackward(const AttentionShape &shape, double scale,
                       const MaskSpec &mask, const ScoreMod &scoreMod,
                       const double *q, const double *k, const double *v,
                       const double *dO, double *dQ, double *dK, double *dV);

/// attn.attention_stats: statistics of P = softmax(mask(scoreMod(scale Q
/// K^T))), computed row by row (never the whole P).
struct AttentionStatistics {
  std::vector<double> entropy;     // [B, H, Sq]: -sum_j p log p (0 for a row
                                   // that sees no key)
  std::vector<double> meanEntropy; // [B, H]: mean over the rows that see a
                                   // key (0 if none)
  std::vector<double> pooled;      // [B, H, Gq, Gk]: mean of p over each
                                   // cell's rows x keys
  std::vector<double> similarity;  // [B, H, H]: <P_h, P_g> / (|P_h| |P_g|),
                                   // 0 where a norm is 0
};

/// Cells: rows [floor(I Sq / Gq), floor((I + 1) Sq / Gq)), keys likewise
/// with Skv and Gk (Gq <= Sq, Gk <= Skv). A row whose softmax is undefined
/// (a visible score of +inf or NaN) makes its statistics NaN. With `lse`
/// [B, H, Sq], the statistics of p = exp(S' - lse) for that LSE (as
/// attn.attention_stats defines them for any lse operand: a row whose lse
/// is -inf counts as one that sees no key); without, of each row's own.
AttentionStatistics attentionStatistics(const AttentionShape &shape,
                                        double scale, const MaskSpec &mask,
                                        const ScoreMod &scoreMod,
                                        const double *q, const double *k,
                                        int64_t Gq, int64_t Gk,
                                        const double *lse = nullptr);

/// Gradients of the entropy (and mean entropy) of attentionStatistics given
/// their cotangents dEntropy [B, H, Sq] and dMeanEntropy [B, H] (either may
/// be nullptr): dQ and dK are overwritten. Per visible (i, j),
/// dS'_ij = -g_i p_ij (S'_ij - sum_k p_ik S'_ik) with g_i the row's
/// cotangent, then through scoreMod.dScore and the scale as in
/// attentionBackward (accumulateCaptureGrad is called once per visible
/// (b, h, i, j)).
void entropyBackward(const AttentionShape &shape, double scale,
                     const MaskSpec &mask, const ScoreMod &scoreMod,
                     const double *q, const double *k, const double *dEntropy,
                     const double *dMeanEntropy, double *dQ, double *dK);

/// Adds to dQ and dK (it does not overwrite them) the gradients that a
/// cotangent dLse [B, H, Sq] of attentionForward's LSE gives: per visible
/// (i, j), dS'_ij = p_ij dLse_i (d LSE_i / d S'_ij = p_ij), then through
/// scoreMod.dScore and the scale as in attentionBackward. Rows that see no
/// key add nothing. attentionBackward (dO only) plus this is the backward
/// of an attention whose LSE is used too (as attn.attention_grad's
/// lse_grad).
void attentionLseBackward(const AttentionShape &shape, double scale,
                          const MaskSpec &mask, const ScoreMod &scoreMod,
                          const double *q, const double *k, const double *dLse,
                          double *dQ, double *dK);

/// attn.distill: KL(P_t || P_s) between a teacher's and a student's
/// attention over the same keys, both P recomputed row by row as
/// attentionForward's, under the one mask (no scoreMod).
struct Distillation {
  std::vector<double> kl; // [B, H, Sq]: sum_j p_t (log p_t - log p_s) over
                          // the keys where p_t != 0 (0 for a row that sees
                          // no key)
  double meanKl = 0;      // mean of kl over the rows that see a key (0 if
                          // none)
};

/// `student` (q [B,H,Sq,Ds], k [B,Hkv_s,Skv,Ds]) and `teacher` (q
/// [B,H,Sq,Dt], k [B,Hkv_t,Skv,Dt]) must agree on B, H, Sq and Skv; their Dv
/// is not read. A row whose softmax is undefined (a visible score of +inf or
/// NaN) makes its KL NaN.
Distillation distillation(const AttentionShape &student, double studentScale,
                          const AttentionShape &teacher, double teacherScale,
                          const MaskSpec &mask, const double *qs,
                          const double *ks, const double *qt, const double *kt);

/// The partial derivatives of distillation's KL with both LSEs held fixed
/// (what attn.distill_grad returns), given the cotangents dKl [B, H, Sq] and
/// dMeanKl (one value), either may be nullptr. With g_i the row's
/// cotangent (the mean's shared among the rows that see a key) and
/// r_ij = log p_t,ij - log p_s,ij: dS_s,ij = -g_i p_t,ij,
/// dLSE_s,i = g_i sum_j p_t,ij, dS_t,ij = g_i p_t,ij (r_ij + 1),
/// dLSE_t,i = -g_i sum_j p_t,ij (r_ij + 1), then dQ = scale dS K and
/// dK = scale dS^T Q per side (GQA: dK summed over each KV head's query
/// heads). The total gradients add attentionLseBackward of each side's
/// dLSE.
struct DistillationGrads {
  std::vector<double> dQs, dKs, dLseS, dQt, dKt, dLseT;
};
DistillationGrads
distillationBackward(const AttentionShape &student, double studentScale,
                     const AttentionShape &teacher, double teacherScale,
                     const MaskSpec &mask, const double *qs, const double *ks,
                     const double *qt, const double *kt, const double *dKl,
                     const double *dMeanKl);

/// The pieces of attention as the graph-form ops compute them, for specs
/// that spell attention out (attn.scores, attn.mask, attn.softmax,
/// attn.apply). Composed as softmaxRows(maskScores(scale * computeScores))
/// then applyProbabilities, they give attentionForward's O.

/// scores[b,h,i,j] = sum_d q[b,h,i,d] * k[b,h/(H/Hkv),j,d], unscaled;
/// scores is [B, H, Sq, Skv] and overwritten. Shape's Dv is not read.
void computeScores(const AttentionShape &shape, const double *q,
                   const double *k, double *scores);

/// Sets scores[b,h,i,j] ([B, H, Sq, Skv]) to `fill` (-inf before a softmax,
/// 0 for a gradient) wherever `mask` hides key j from query i.
void maskScores(int64_t B, int64_t H, int64_t Sq, int64_t Skv,
                const MaskSpec &mask, double fill, double *scores);

/// Replaces each of the `rows` rows of `cols` scores by its softmax. A row
/// with no score above -inf (every key masked) becomes 0, not NaN, as
/// attentionForward's fully masked rows do; one with a score of +inf or
/// NaN becomes NaN.
void softmaxRows(int64_t rows, int64_t cols, double *scores);

/// o[b,h,i,dv] = sum_j p[b,h,i,j] * v[b,h/(H/Hkv),j,dv]; p is
/// [B, H, Sq, Skv], o [B, H, Sq, Dv] and overwritten. Shape's D is not read.
void applyProbabilities(const AttentionShape &shape, const double *p,
                        const double *v, double *o);

/// attn.combine: for `rows` rows of `cols` values, the union of the parts
/// (outputs[k], lses[k]) over disjoint keys: lse = log sum_k exp(lse_k),
/// o = sum_k exp(lse_k - lse) o_k; a row every part left empty (all lse_k
/// = -inf) gets o = 0 and lse = -inf, one with an lse_k of NaN or +inf NaN.
void combinePartials(int64_t rows, int64_t cols,
                     const std::vector<const double *> &outputs,
                     const std::vector<const double *> &lses, double *o,
                     double *lse);

/// A paged KV cache as one contiguous cache: out[b, g, m P + r, d] =
/// pool[table[b, m], g, r, d] for a pool [N, Hkv, P, D] and a block table
/// [B, M] (out [B, Hkv, M P, D]); an entry outside [0, N) gives zeros.
std::vector<double> gatherPages(int64_t N, int64_t Hkv, int64_t P, int64_t D,
                                int64_t B, int64_t M, const double *pool,
                                const int64_t *table);

/// attn.append: rows [B, Hkv, T, D] written into `cache` at positions
/// len[b] - T + t (those in [0, capacity)); the cache is [B, Hkv, C, D]
/// (capacity C, `table` null) or a pool of pages [N, Hkv, P, D] with a
/// block table [B, M] (capacity M P; position p is row p % P of page
/// table[b, p / P], skipped when that entry is outside [0, N)). `dims` =
/// {B, Hkv, T, D, C or P, N, M} (N and M 0 when not paged).
void appendRows(const int64_t dims[7], const double *rows,
                const int64_t *lengths, const int64_t *table, double *cache);

/// out[b,h,s,d] = sum_e x[b,s,e] * w[e, h*D+d]; x [B,S,E], w [E,H*D],
/// out [B,H,S,D].
void projection(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                const double *x, const double *w, double *out);

/// dX += dOut projected back (accumulated, since X usually feeds several
/// projections); dW is overwritten.
void projectionBackward(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                        const double *x, const double *w, const double *dOut,
                        double *dX, double *dW);

/// y[b,s,e] = sum_{h,dv} o[b,h,s,dv] * wo[h*Dv+dv, e]; o [B,H,S,Dv],
/// wo [H*Dv,E], y [B,S,E].
void merge(int64_t B, int64_t H, int64_t S, int64_t Dv, int64_t E,
           const double *o, const double *wo, double *y);

/// Backward of merge; dO and dWo are both overwritten.
void mergeBackward(int64_t B, int64_t H, int64_t S, int64_t Dv, int64_t E,
                   const double *o, const double *wo, const double *dY,
                   double *dO, double *dWo);

/// max_i |a_i - b_i| / max(max_i |b_i|, floor): a normwise relative error,
/// robust near zero entries. Returns +inf if any difference is NaN so that
/// tolerance checks fail; equal infinities, and NaN where `expected` has
/// NaN, count as exact. `floor` judges an `expected` that is zero (or
/// nearly) by another scale, such as the largest of several gradients.
double maxRelativeError(const float *actual, const double *expected, size_t n,
                        double floor = 1e-30);
double maxRelativeError(const double *actual, const double *expected, size_t n,
                        double floor = 1e-30);

/// Deterministic fill, uniform in [lo, hi), identical across standard
/// libraries (only the mt19937_64 bit stream is relied upon).
void fillRandom(double *data, size_t n, uint64_t seed, double lo = -1.0,
                double hi = 1.0);

/// IEEE binary16 and bfloat16 conversions, round to nearest even, handling
/// inf, NaN and subnormals. Values are raw bit patterns.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

} // namespace attnc::ref

#endif // ATTNC_TOOLS_REFERENCE_REFERENCE_H
