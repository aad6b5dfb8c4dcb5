//===- Reference.cpp - Float64 reference attention oracle -----------------===//

#include "tools/reference/Reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace attnc::ref {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void checkShape(const AttentionShape &s) {
  if (s.B < 0 || s.H <= 0 || s.Hkv <= 0 || s.Sq < 0 || s.Skv < 0 ||
      s.D < 0 || s.Dv < 0)
    throw std::invalid_argument("attnc::ref: invalid attention shape");
  if (s.H % s.Hkv != 0)
    throw std::invalid_argument("attnc::ref: H must be a multiple of Hkv");
}

/// One softmax row, recomputed identically by forward and backward so the
/// backward never depends on caller-provided O or LSE.
struct Row {
  std::vector<double> raw;     // scale * q.k, before scoreMod
  std::vector<double> p;       // softmax probabilities (0 where masked)
  std::vector<double> modded;  // scoreMod(raw) (-inf where masked)
  std::vector<char> visible;   // mask result per key
  double lse = kNegInf;
};

void computeRow(const AttentionShape &s, double scale, const MaskSpec &mask,
                const ScoreMod &scoreMod, const double *qRow,
                const double *kHead, int64_t b, int64_t h, int64_t i,
                Row &row) {
  row.raw.assign(s.Skv, 0.0);
  row.p.assign(s.Skv, 0.0);
  row.visible.assign(s.Skv, 0);
  row.modded.assign(s.Skv, kNegInf);
  std::vector<double> &modded = row.modded;
  double rowMax = kNegInf;
  for (int64_t j = 0; j < s.Skv; ++j) {
    if (!isVisible(mask, b, h, i, j))
      continue;
    row.visible[j] = 1;
    const double *kRow = kHead + j * s.D;
    double dot = 0.0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += qRow[d] * kRow[d];
    row.raw[j] = scale * dot;
    modded[j] = scoreMod.apply ? scoreMod.apply(row.raw[j], b, h, i, j)
                               : row.raw[j];
    rowMax = std::max(rowMax, modded[j]);
  }
  // A visible score of +inf or NaN leaves the softmax undefined: the row's
  // P, LSE and so O are NaN (as torch's softmax gives).
  for (int64_t j = 0; j < s.Skv; ++j)
    if (row.visible[j] && (std::isnan(modded[j]) || modded[j] == -kNegInf)) {
      row.lse = std::numeric_limits<double>::quiet_NaN();
      for (int64_t k = 0; k < s.Skv; ++k)
        if (row.visible[k])
          row.p[k] = row.lse;
      return;
    }
  // No finite score (fully masked, or a scoreMod that returned -inf
  // everywhere): exp(-inf - -inf) would be NaN, so define P = 0 and
  // LSE = -inf explicitly.
  if (rowMax == kNegInf) {
    row.lse = kNegInf;
    return;
  }
  // Subtracting the row max keeps every exponent <= 0, so no overflow.
  double sum = 0.0;
  for (int64_t j = 0; j < s.Skv; ++j)
    if (row.visible[j])
      sum += std::exp(modded[j] - rowMax);
  row.lse = rowMax + std::log(sum);
  for (int64_t j = 0; j < s.Skv; ++j)
    if (row.visible[j])
      row.p[j] = std::exp(modded[j] - row.lse);
}

} // namespace

namespace {

/// The first row (or key) of cell `cell` of `cells` over `n`.
int64_t cellStart(int64_t cell, int64_t n, int64_t cells) {
  return cell * n / cells;
}

/// The row's p as exp(S' - lse) for a given `lse` (0 where S' is -inf, and
/// everywhere when lse is -inf: the row counts as one that sees no key).
void withLse(Row &row, double lse) {
  row.lse = lse;
  for (size_t j = 0; j < row.p.size(); ++j)
    row.p[j] = row.visible[j] && row.modded[j] != kNegInf && lse != kNegInf
                   ? std::exp(row.modded[j] - lse)
                   : 0.0;
}

/// -sum_j p log p over a row's visible keys, as sum_j p (LSE - S'_j);
/// 0 for a row that sees no key, NaN for an undefined one.
double rowEntropy(const Row &row) {
  if (row.lse == kNegInf)
    return 0.0;
  double h = 0.0;
  for (size_t j = 0; j < row.p.size(); ++j)
    if (row.visible[j] && row.p[j] != 0.0)
      h += row.p[j] * (row.lse - row.modded[j]);
  return std::isnan(row.lse) ? row.lse : h;
}

} // namespace

AttentionStatistics
attentionStatistics(const AttentionShape &s, double scale, const MaskSpec &mask,
                    const ScoreMod &scoreMod, const double *q, const double *k,
                    int64_t Gq, int64_t Gk, const double *lse) {
  checkShape(s);
  if (Gq <= 0 || Gk <= 0 || Gq > s.Sq || Gk > s.Skv)
    throw std::invalid_argument("attnc::ref: invalid statistics grid");
  const int64_t group = s.H / s.Hkv;
  AttentionStatistics stats;
  stats.entropy.assign(s.B * s.H * s.Sq, 0.0);
  stats.meanEntropy.assign(s.B * s.H, 0.0);
  stats.pooled.assign(s.B * s.H * Gq * Gk, 0.0);
  stats.similarity.assign(s.B * s.H * s.H, 0.0);
  std::vector<int64_t> keyCell(s.Skv);
  for (int64_t c = 0; c < Gk; ++c)
    for (int64_t j = cellStart(c, s.Skv, Gk); j < cellStart(c + 1, s.Skv, Gk);
         ++j)
      keyCell[j] = c;
  std::vector<Row> rows(s.H);
  for (int64_t b = 0; b < s.B; ++b) {
    std::vector<int64_t> seen(s.H, 0);
    double *sim = stats.similarity.data() + b * s.H * s.H;
    for (int64_t qc = 0; qc < Gq; ++qc) {
      for (int64_t i = cellStart(qc, s.Sq, Gq); i < cellStart(qc + 1, s.Sq, Gq);
           ++i) {
        for (int64_t h = 0; h < s.H; ++h) {
          const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
          computeRow(s, scale, mask, scoreMod, q + rowIdx * s.D,
                     k + (b * s.Hkv + h / group) * s.Skv * s.D, b, h, i,
                     rows[h]);
          if (lse && !std::isnan(rows[h].lse))
            withLse(rows[h], lse[rowIdx]);
          double entropy = rowEntropy(rows[h]);
          stats.entropy[rowIdx] = entropy;
          if (rows[h].lse != kNegInf) {
            stats.meanEntropy[b * s.H + h] += entropy;
            ++seen[h];
          }
          double *cells = stats.pooled.data() + ((b * s.H + h) * Gq + qc) * Gk;
          for (int64_t j = 0; j < s.Skv; ++j)
            cells[keyCell[j]] += rows[h].p[j];
        }
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t g = 0; g < s.H; ++g)
            for (int64_t j = 0; j < s.Skv; ++j)
              sim[h * s.H + g] += rows[h].p[j] * rows[g].p[j];
      }
    }
    for (int64_t h = 0; h < s.H; ++h)
      if (seen[h])
        stats.meanEntropy[b * s.H + h] /= double(seen[h]);
    std::vector<double> norms(s.H);
    for (int64_t h = 0; h < s.H; ++h)
      norms[h] = std::sqrt(sim[h * s.H + h]);
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t g = 0; g < s.H; ++g)
        sim[h * s.H + g] = norms[h] == 0.0 || norms[g] == 0.0
                               ? 0.0
                               : sim[h * s.H + g] / (norms[h] * norms[g]);
  }
  for (int64_t bh = 0; bh < s.B * s.H; ++bh)
    for (int64_t qc = 0; qc < Gq; ++qc)
      for (int64_t kc = 0; kc < Gk; ++kc)
        stats.pooled[(bh * Gq + qc) * Gk + kc] /=
            double((cellStart(qc + 1, s.Sq, Gq) - cellStart(qc, s.Sq, Gq)) *
                   (cellStart(kc + 1, s.Skv, Gk) - cellStart(kc, s.Skv, Gk)));
  return stats;
}

void entropyBackward(const AttentionShape &s, double scale,
                     const MaskSpec &mask, const ScoreMod &scoreMod,
                     const double *q, const double *k, const double *dEntropy,
                     const double *dMeanEntropy, double *dQ, double *dK) {
  checkShape(s);
  if (scoreMod.apply && !scoreMod.dScore)
    throw std::invalid_argument(
        "attnc::ref: scoreMod.dScore is required for the backward");
  const int64_t group = s.H / s.Hkv;
  std::fill(dQ, dQ + s.B * s.H * s.Sq * s.D, 0.0);
  std::fill(dK, dK + s.B * s.Hkv * s.Skv * s.D, 0.0);
  Row row;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t kvOff = (b * s.Hkv + h / group) * s.Skv;
      const double *kHead = k + kvOff * s.D;
      double *dKHead = dK + kvOff * s.D;
      // The mean's cotangent reaches each row that sees a key.
      double meanShare = 0.0;
      if (dMeanEntropy) {
        int64_t seen = 0;
        for (int64_t i = 0; i < s.Sq; ++i) {
          const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
          computeRow(s, scale, mask, scoreMod, q + rowIdx * s.D, kHead, b, h, i,
                     row);
          seen += row.lse != kNegInf;
        }
        if (seen)
          meanShare = dMeanEntropy[b * s.H + h] / double(seen);
      }
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
        const double *qRow = q + rowIdx * s.D;
        computeRow(s, scale, mask, scoreMod, qRow, kHead, b, h, i, row);
        if (row.lse == kNegInf)
          continue;
        double g = (dEntropy ? dEntropy[rowIdx] : 0.0) + meanShare;
        double mean = 0.0;
        for (int64_t j = 0; j < s.Skv; ++j)
          if (row.visible[j] && row.p[j] != 0.0)
            mean += row.p[j] * row.modded[j];
        for (int64_t j = 0; j < s.Skv; ++j) {
          if (!row.visible[j])
            continue;
          double dSPrime =
              row.p[j] == 0.0 ? 0.0 : -g * row.p[j] * (row.modded[j] - mean);
          double dRaw = dSPrime;
          if (scoreMod.apply) {
            dRaw *= scoreMod.dScore(row.raw[j], b, h, i, j);
            if (scoreMod.accumulateCaptureGrad)
              scoreMod.accumulateCaptureGrad(row.raw[j], b, h, i, j, dSPrime);
          }
          const double *kRow = kHead + j * s.D;
          for (int64_t d = 0; d < s.D; ++d) {
            dQ[rowIdx * s.D + d] += scale * dRaw * kRow[d];
            dKHead[j * s.D + d] += scale * dRaw * qRow[d];
          }
        }
      }
    }
  }
}

void attentionLseBackward(const AttentionShape &s, double scale,
                          const MaskSpec &mask, const ScoreMod &scoreMod,
                          const double *q, const double *k, const double *dLse,
                          double *dQ, double *dK) {
  checkShape(s);
  if (scoreMod.apply && !scoreMod.dScore)
    throw std::invalid_argument(
        "attnc::ref: scoreMod.dScore is required for the backward");
  const int64_t group = s.H / s.Hkv;
  Row row;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t kvOff = (b * s.Hkv + h / group) * s.Skv;
      const double *kHead = k + kvOff * s.D;
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
        const double *qRow = q + rowIdx * s.D;
        computeRow(s, scale, mask, scoreMod, qRow, kHead, b, h, i, row);
        if (row.lse == kNegInf)
          continue;
        for (int64_t j = 0; j < s.Skv; ++j) {
          if (!row.visible[j] || row.p[j] == 0.0)
            continue;
          const double dSPrime = row.p[j] * dLse[rowIdx];
          double dRaw = dSPrime;
          if (scoreMod.apply) {
            dRaw *= scoreMod.dScore(row.raw[j], b, h, i, j);
            if (scoreMod.accumulateCaptureGrad)
              scoreMod.accumulateCaptureGrad(row.raw[j], b, h, i, j, dSPrime);
          }
          const double *kRow = kHead + j * s.D;
          double *dKRow = dK + (kvOff + j) * s.D;
          for (int64_t d = 0; d < s.D; ++d) {
            dQ[rowIdx * s.D + d] += scale * dRaw * kRow[d];
            dKRow[d] += scale * dRaw * qRow[d];
          }
        }
      }
    }
}

namespace {

/// Checks that the student's and teacher's shapes agree on B, H, Sq, Skv.
void checkDistillShapes(const AttentionShape &student,
                        const AttentionShape &teacher) {
  checkShape(student);
  checkShape(teacher);
  if (student.B != teacher.B || student.H != teacher.H ||
      student.Sq != teacher.Sq || student.Skv != teacher.Skv)
    throw std::invalid_argument(
        "attnc::ref: the teacher's B, H, Sq and Skv must be the student's");
}

/// Both sides' rows of query i of (b, h).
struct DistillRows {
  Row student, teacher;

  void compute(const AttentionShape &ss, double sScale,
               const AttentionShape &ts, double tScale, const MaskSpec &mask,
               const double *qs, const double *ks, const double *qt,
               const double *kt, int64_t b, int64_t h, int64_t i) {
    const int64_t rowIdx = (b * ss.H + h) * ss.Sq + i;
    computeRow(ss, sScale, mask, {}, qs + rowIdx * ss.D,
               ks + (b * ss.Hkv + h / (ss.H / ss.Hkv)) * ss.Skv * ss.D, b, h, i,
               student);
    computeRow(ts, tScale, mask, {}, qt + rowIdx * ts.D,
               kt + (b * ts.Hkv + h / (ts.H / ts.Hkv)) * ts.Skv * ts.D, b, h, i,
               teacher);
  }

  /// log p_t,j - log p_s,j of a key where p_t,j != 0.
  double ratio(int64_t j) const {
    return (teacher.modded[j] - teacher.lse) -
           (student.modded[j] - student.lse);
  }
};

} // namespace

Distillation distillation(const AttentionShape &ss, double sScale,
                          const AttentionShape &ts, double tScale,
                          const MaskSpec &mask, const double *qs,
                          const double *ks, const double *qt,
                          const double *kt) {
  checkDistillShapes(ss, ts);
  Distillation result;
  result.kl.assign(ss.B * ss.H * ss.Sq, 0.0);
  DistillRows rows;
  double sum = 0.0;
  int64_t seen = 0;
  for (int64_t b = 0; b < ss.B; ++b)
    for (int64_t h = 0; h < ss.H; ++h)
      for (int64_t i = 0; i < ss.Sq; ++i) {
        rows.compute(ss, sScale, ts, tScale, mask, qs, ks, qt, kt, b, h, i);
        if (rows.teacher.lse == kNegInf)
          continue;
        double kl = 0.0;
        for (int64_t j = 0; j < ss.Skv; ++j)
          if (rows.teacher.visible[j] && rows.teacher.p[j] != 0.0)
            kl += rows.teacher.p[j] * rows.ratio(j);
        result.kl[(b * ss.H + h) * ss.Sq + i] = kl;
        sum += kl;
        ++seen;
      }
  result.meanKl = seen ? sum / double(seen) : 0.0;
  return result;
}

DistillationGrads distillationBackward(const AttentionShape &ss, double sScale,
                                       const AttentionShape &ts, double tScale,
                                       const MaskSpec &mask, const double *qs,
                                       const double *ks, const double *qt,
                                       const double *kt, const double *dKl,
                                       const double *dMeanKl) {
  checkDistillShapes(ss, ts);
  DistillationGrads grads;
  grads.dQs.assign(ss.B * ss.H * ss.Sq * ss.D, 0.0);
  grads.dKs.assign(ss.B * ss.Hkv * ss.Skv * ss.D, 0.0);
  grads.dQt.assign(ts.B * ts.H * ts.Sq * ts.D, 0.0);
  grads.dKt.assign(ts.B * ts.Hkv * ts.Skv * ts.D, 0.0);
  grads.dLseS.assign(ss.B * ss.H * ss.Sq, 0.0);
  grads.dLseT.assign(ss.B * ss.H * ss.Sq, 0.0);
  DistillRows rows;
  // The mean's cotangent is shared among the rows that see a key.
  double meanShare = 0.0;
  if (dMeanKl) {
    int64_t seen = 0;
    for (int64_t b = 0; b < ss.B; ++b)
      for (int64_t h = 0; h < ss.H; ++h)
        for (int64_t i = 0; i < ss.Sq; ++i) {
          rows.compute(ss, sScale, ts, tScale, mask, qs, ks, qt, kt, b, h, i);
          seen += rows.teacher.lse != kNegInf;
        }
    if (seen)
      meanShare = *dMeanKl / double(seen);
  }
  // Adds scale dS_ij K_j to dQ_i and scale dS_ij Q_i to dK_j of one side.
  auto scatter = [](const AttentionShape &s, double scale, const double *q,
                    const double *k, double *dQ, double *dK, int64_t b,
                    int64_t h, int64_t i, int64_t j, double dS) {
    const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
    const int64_t keyIdx = (b * s.Hkv + h / (s.H / s.Hkv)) * s.Skv + j;
    for (int64_t d = 0; d < s.D; ++d) {
      dQ[rowIdx * s.D + d] += scale * dS * k[keyIdx * s.D + d];
      dK[keyIdx * s.D + d] += scale * dS * q[rowIdx * s.D + d];
    }
  };
  for (int64_t b = 0; b < ss.B; ++b)
    for (int64_t h = 0; h < ss.H; ++h)
      for (int64_t i = 0; i < ss.Sq; ++i) {
        rows.compute(ss, sScale, ts, tScale, mask, qs, ks, qt, kt, b, h, i);
        if (rows.teacher.lse == kNegInf)
          continue;
        const int64_t rowIdx = (b * ss.H + h) * ss.Sq + i;
        const double g = (dKl ? dKl[rowIdx] : 0.0) + meanShare;
        double sumP = 0.0, sumShifted = 0.0;
        for (int64_t j = 0; j < ss.Skv; ++j) {
          const double p = rows.teacher.p[j];
          if (!rows.teacher.visible[j] || p == 0.0)
            continue;
          const double shifted = rows.ratio(j) + 1.0;
          sumP += p;
          sumShifted += p * shifted;
          scatter(ss, sScale, qs, ks, grads.dQs.data(), grads.dKs.data(), b, h,
                  i, j, -g * p);
          scatter(ts, tScale, qt, kt, grads.dQt.data(), grads.dKt.data(), b, h,
                  i, j, g * p * shifted);
        }
        grads.dLseS[rowIdx] = g * sumP;
        grads.dLseT[rowIdx] = -g * sumShifted;
      }
  return grads;
}

bool isVisible(const MaskSpec &mask, int64_t b, int64_t h, int64_t i,
               int64_t j) {
  int64_t pos = i;
  if (mask.cache) {
    int64_t n = mask.lengths
                    ? std::clamp<int64_t>(mask.lengths[b], 0, mask.skv)
                    : mask.skv;
    pos = n - mask.sq + i;
  }
  if (mask.causal && j > pos)
    return false;
  if (mask.window > 0 && (j > pos || pos - j >= mask.window))
    return false;
  if (mask.lengths && j >= mask.lengths[b])
    return false;
  if (mask.offsets) {
    bool same = false;
    for (int64_t d = 0; d + 1 < mask.numOffsets; ++d)
      same |= mask.offsets[d] <= i && i < mask.offsets[d + 1] &&
              mask.offsets[d] <= j && j < mask.offsets[d + 1];
    if (!same)
      return false;
  }
  if (mask.maskMod && !mask.maskMod(b, h, i, j))
    return false;
  return true;
}

double defaultScale(int64_t D) {
  return 1.0 / std::sqrt(static_cast<double>(D));
}

void attentionForward(const AttentionShape &s, double scale,
                      const MaskSpec &mask, const ScoreMod &scoreMod,
                      const double *q, const double *k, const double *v,
                      double *o, double *lse) {
  checkShape(s);
  const int64_t group = s.H / s.Hkv;
  Row row;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t hkv = h / group;
      const double *kHead = k + (b * s.Hkv + hkv) * s.Skv * s.D;
      const double *vHead = v + (b * s.Hkv + hkv) * s.Skv * s.Dv;
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
        computeRow(s, scale, mask, scoreMod, q + rowIdx * s.D, kHead, b, h,
                   i, row);
        double *oRow = o + rowIdx * s.Dv;
        std::fill(oRow, oRow + s.Dv, 0.0);
        for (int64_t j = 0; j < s.Skv; ++j) {
          if (row.p[j] == 0.0)
            continue;
          for (int64_t d = 0; d < s.Dv; ++d)
            oRow[d] += row.p[j] * vHead[j * s.Dv + d];
        }
        if (lse)
          lse[rowIdx] = row.lse;
      }
    }
  }
}

void attentionBackward(const AttentionShape &s, double scale,
                       const MaskSpec &mask, const ScoreMod &scoreMod,
                       const double *q, const double *k, const double *v,
                       const double *dO, double *dQ, double *dK, double *dV) {
  checkShape(s);
  if (scoreMod.apply && !scoreMod.dScore)
    throw std::invalid_argument(
        "attnc::ref: scoreMod.dScore is required for the backward");
  const int64_t group = s.H / s.Hkv;
  std::fill(dQ, dQ + s.B * s.H * s.Sq * s.D, 0.0);
  std::fill(dK, dK + s.B * s.Hkv * s.Skv * s.D, 0.0);
  std::fill(dV, dV + s.B * s.Hkv * s.Skv * s.Dv, 0.0);
  Row row;
  std::vector<double> oRow(s.Dv);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t kvOff = (b * s.Hkv + h / group) * s.Skv;
      const double *kHead = k + kvOff * s.D;
      const double *vHead = v + kvOff * s.Dv;
      double *dKHead = dK + kvOff * s.D;
      double *dVHead = dV + kvOff * s.Dv;
      for (int64_t i = 0; i < s.Sq; ++i) {
        const int64_t rowIdx = (b * s.H + h) * s.Sq + i;
        const double *qRow = q + rowIdx * s.D;
        const double *dORow = dO + rowIdx * s.Dv;
        double *dQRow = dQ + rowIdx * s.D;
        computeRow(s, scale, mask, scoreMod, qRow, kHead, b, h, i, row);

        // Delta_i = rowsum(dO * O), with O recomputed from P.
        std::fill(oRow.begin(), oRow.end(), 0.0);
        for (int64_t j = 0; j < s.Skv; ++j)
          for (int64_t d = 0; d < s.Dv; ++d)
            oRow[d] += row.p[j] * vHead[j * s.Dv + d];
        double delta = 0.0;
        for (int64_t d = 0; d < s.Dv; ++d)
          delta += dORow[d] * oRow[d];

        for (int64_t j = 0; j < s.Skv; ++j) {
          if (!row.visible[j])
            continue;
          const double pij = row.p[j];
          const double *vRow = vHead + j * s.Dv;
          double dP = 0.0;
          for (int64_t d = 0; d < s.Dv; ++d) {
            dP += dORow[d] * vRow[d];
            dVHead[j * s.Dv + d] += pij * dORow[d];
          }
          const double dSPrime = pij * (dP - delta);
          double dS = dSPrime;
          // Callbacks run for every visible entry, even when P is 0, so the
          // caller sees a fixed, mask-determined call sequence.
          if (scoreMod.apply) {
            const double dMod = scoreMod.dScore(row.raw[j], b, h, i, j);
            // Where P vanished, a non-finite derivative must not turn the
            // zero gradient into NaN (0 * inf).
            dS = dSPrime == 0.0 ? 0.0 : dSPrime * dMod;
          }
          if (scoreMod.accumulateCaptureGrad)
            scoreMod.accumulateCaptureGrad(row.raw[j], b, h, i, j, dSPrime);
          if (dS == 0.0)
            continue;
          const double *kRow = kHead + j * s.D;
          double *dKRow = dKHead + j * s.D;
          for (int64_t d = 0; d < s.D; ++d) {
            dQRow[d] += scale * dS * kRow[d];
            dKRow[d] += scale * dS * qRow[d];
          }
        }
      }
    }
  }
}

void computeScores(const AttentionShape &s, const double *q, const double *k,
                   double *scores) {
  checkShape(s);
  const int64_t group = s.H / s.Hkv;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Sq; ++i)
        for (int64_t j = 0; j < s.Skv; ++j) {
          double acc = 0.0;
          for (int64_t d = 0; d < s.D; ++d)
            acc += q[((b * s.H + h) * s.Sq + i) * s.D + d] *
                   k[((b * s.Hkv + h / group) * s.Skv + j) * s.D + d];
          scores[((b * s.H + h) * s.Sq + i) * s.Skv + j] = acc;
        }
}

void maskScores(int64_t B, int64_t H, int64_t Sq, int64_t Skv,
                const MaskSpec &mask, double fill, double *scores) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t j = 0; j < Skv; ++j)
          if (!isVisible(mask, b, h, i, j))
            scores[((b * H + h) * Sq + i) * Skv + j] = fill;
}

void softmaxRows(int64_t rows, int64_t cols, double *scores) {
  for (int64_t r = 0; r < rows; ++r) {
    double *row = scores + r * cols;
    double rowMax = kNegInf, sum = 0.0;
    bool undefined = false; // a score of +inf or NaN: the row is NaN
    for (int64_t j = 0; j < cols; ++j) {
      rowMax = std::max(rowMax, row[j]);
      undefined = undefined || std::isnan(row[j]) || row[j] == -kNegInf;
    }
    if (undefined) {
      std::fill(row, row + cols, std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    // exp(-inf - -inf) would be NaN: a row masked throughout sums to 0.
    for (int64_t j = 0; j < cols; ++j)
      sum += rowMax == kNegInf ? 0.0 : std::exp(row[j] - rowMax);
    for (int64_t j = 0; j < cols; ++j)
      row[j] = sum == 0.0 ? 0.0 : std::exp(row[j] - rowMax) / sum;
  }
}

std::vector<double> gatherPages(int64_t N, int64_t Hkv, int64_t P, int64_t D,
                                int64_t B, int64_t M, const double *pool,
                                const int64_t *table) {
  std::vector<double> out(size_t(B * Hkv * M * P * D), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m) {
      int64_t page = table[b * M + m];
      if (page < 0 || page >= N)
        continue;
      for (int64_t g = 0; g < Hkv; ++g)
        std::copy_n(pool + ((page * Hkv + g) * P) * D, P * D,
                    out.begin() + ((b * Hkv + g) * M * P + m * P) * D);
    }
  return out;
}

void appendRows(const int64_t dims[7], const double *rows,
                const int64_t *lengths, const int64_t *table, double *cache) {
  auto [B, Hkv, T, D, C, N, M] = std::array<int64_t, 7>{
      dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6]};
  int64_t capacity = table ? M * C : C;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      int64_t p = lengths[b] - T + t;
      if (p < 0 || p >= capacity)
        continue;
      // (page, row) of position p: the cache row's start per head g.
      int64_t page = b, row = p;
      if (table) {
        page = table[b * M + p / C], row = p % C;
        if (page < 0 || page >= N)
          continue;
      }
      for (int64_t g = 0; g < Hkv; ++g)
        std::copy_n(rows + ((b * Hkv + g) * T + t) * D, D,
                    cache + ((page * Hkv + g) * C + row) * D);
    }
}

void combinePartials(int64_t rows, int64_t cols,
                     const std::vector<const double *> &outputs,
                     const std::vector<const double *> &lses, double *o,
                     double *lse) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t r = 0; r < rows; ++r) {
    double m = kNegInf;
    bool undefined = false;
    for (const double *l : lses) {
      m = std::max(m, l[r]);
      undefined = undefined || std::isnan(l[r]) || l[r] == -kNegInf;
    }
    double *row = o + r * cols;
    if (undefined || m == kNegInf) {
      std::fill(row, row + cols, undefined ? nan : 0.0);
      lse[r] = undefined ? nan : kNegInf;
      continue;
    }
    double sum = 0.0;
    for (const double *l : lses)
      sum += std::exp(l[r] - m);
    lse[r] = m + std::log(sum);
    std::fill(row, row + cols, 0.0);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const double w = std::exp(lses[k][r] - lse[r]);
      for (int64_t c = 0; c < cols; ++c)
        row[c] += w * outputs[k][r * cols + c];
    }
  }
}

void applyProbabilities(const AttentionShape &s, const double *p,
                        const double *v, double *o) {
  checkShape(s);
  const int64_t group = s.H / s.Hkv;
  std::fill(o, o + s.B * s.H * s.Sq * s.Dv, 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Sq; ++i)
        for (int64_t j = 0; j < s.Skv; ++j) {
          const double w = p[((b * s.H + h) * s.Sq + i) * s.Skv + j];
          for (int64_t d = 0; d < s.Dv; ++d)
            o[((b * s.H + h) * s.Sq + i) * s.Dv + d] +=
                w * v[((b * s.Hkv + h / group) * s.Skv + j) * s.Dv + d];
        }
}

namespace {

/// Where W(e, h, d) lives in a weight of [E, H*D] (a projection's) or
/// [H*D, E] (a merge's), so that the four contractions of projections and
/// merges, forward and backward, are written once.
struct HeadLayout {
  int64_t eStride, hdStride, D;
  int64_t at(int64_t e, int64_t h, int64_t d) const {
    return e * eStride + (h * D + d) * hdStride;
  }
};

HeadLayout projectionLayout(int64_t H, int64_t D) { return {H * D, 1, D}; }
HeadLayout mergeLayout(int64_t Dv, int64_t E) { return {1, E, Dv}; }

/// out[b,h,s,d] = sum_e x[b,s,e] * W(e,h,d); x [B,S,E], out [B,H,S,D].
void splitHeads(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                const double *x, const double *w, HeadLayout layout,
                double *out) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t e = 0; e < E; ++e)
            acc += x[(b * S + s) * E + e] * w[layout.at(e, h, d)];
          out[((b * H + h) * S + s) * D + d] = acc;
        }
}

/// y[b,s,e] = sum_{h,d} o[b,h,s,d] * W(e,h,d), or y += that with
/// `accumulate`; o [B,H,S,D], y [B,S,E].
void joinHeads(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
               const double *o, const double *w, HeadLayout layout,
               bool accumulate, double *y) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t e = 0; e < E; ++e) {
        double acc = 0.0;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d)
            acc += o[((b * H + h) * S + s) * D + d] * w[layout.at(e, h, d)];
        double &out = y[(b * S + s) * E + e];
        out = accumulate ? out + acc : acc;
      }
}

/// dW(e,h,d) = sum_{b,s} x[b,s,e] * dHeads[b,h,s,d]; x [B,S,E],
/// dHeads [B,H,S,D].
void headWeightGradient(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                        const double *x, const double *dHeads, double *dW,
                        HeadLayout layout) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t s = 0; s < S; ++s)
            acc +=
                x[(b * S + s) * E + e] * dHeads[((b * H + h) * S + s) * D + d];
        dW[layout.at(e, h, d)] = acc;
      }
}

} // namespace

void projection(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                const double *x, const double *w, double *out) {
  splitHeads(B, S, E, H, D, x, w, projectionLayout(H, D), out);
}

void projectionBackward(int64_t B, int64_t S, int64_t E, int64_t H, int64_t D,
                        const double *x, const double *w, const double *dOut,
                        double *dX, double *dW) {
  joinHeads(B, S, E, H, D, dOut, w, projectionLayout(H, D),
            /*accumulate=*/true, dX);
  headWeightGradient(B, S, E, H, D, x, dOut, dW, projectionLayout(H, D));
}

void merge(int64_t B, int64_t H, int64_t S, int64_t Dv, int64_t E,
           const double *o, const double *wo, double *y) {
  joinHeads(B, S, E, H, Dv, o, wo, mergeLayout(Dv, E), /*accumulate=*/false, y);
}

void mergeBackward(int64_t B, int64_t H, int64_t S, int64_t Dv, int64_t E,
                   const double *o, const double *wo, const double *dY,
                   double *dO, double *dWo) {
  splitHeads(B, S, E, H, Dv, dY, wo, mergeLayout(Dv, E), dO);
  headWeightGradient(B, S, E, H, Dv, dY, o, dWo, mergeLayout(Dv, E));
}

namespace {

template <typename T>
double maxRelativeErrorImpl(const T *actual, const double *expected, size_t n,
                            double floor) {
  double maxDiff = 0.0, maxRef = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(actual[i]);
    const double e = expected[i];
    // Equal infinities (e.g. LSE = -inf on masked rows) count as exact,
    // and so does NaN where the reference has NaN (a row with a score of
    // +inf or NaN).
    if (a == e || (std::isnan(a) && std::isnan(e)))
      continue;
    const double diff = std::fabs(a - e);
    // std::max would silently drop a NaN; a NaN must fail any tolerance.
    if (std::isnan(diff))
      return std::numeric_limits<double>::infinity();
    maxDiff = std::max(maxDiff, diff);
  }
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(expected[i]))
      maxRef = std::max(maxRef, std::fabs(expected[i]));
  return maxDiff / std::max({maxRef, floor, 1e-30});
}

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

} // namespace

double maxRelativeError(const float *actual, const double *expected, size_t n,
                        double floor) {
  return maxRelativeErrorImpl(actual, expected, n, floor);
}

double maxRelativeError(const double *actual, const double *expected, size_t n,
                        double floor) {
  return maxRelativeErrorImpl(actual, expected, n, floor);
}

void fillRandom(double *data, size_t n, uint64_t seed, double lo, double hi) {
  // std::uniform_real_distribution is implementation-defined; mapping the
  // raw 64-bit engine output ourselves keeps values identical everywhere.
  std::mt19937_64 engine(seed);
  for (size_t i = 0; i < n; ++i) {
    const double u =
        static_cast<double>(engine() >> 11) * (1.0 / 9007199254740992.0);
    double value = lo + (hi - lo) * u;
    // Rounding in lo + (hi - lo) * u can land exactly on hi.
    if (value >= hi)
      value = std::nextafter(hi, lo);
    data[i] = value;
  }
}

uint16_t floatToHalf(float value) {
  const uint32_t x = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u)
      return sign | 0x7c00u;
    // Keep the top payload bits and force a quiet NaN so the payload never
    // truncates to zero (which would read as infinity).
    return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  }
  if (abs >= 0x38800000u) {
    // Normal half range: rebias the exponent (127 -> 15) and round the 13
    // dropped mantissa bits to nearest even. A carry out of the mantissa
    // correctly bumps the exponent, up to and including infinity.
    uint32_t m = abs - 0x38000000u;
    m += 0xfffu + ((m >> 13) & 1u);
    const uint32_t h = m >> 13;
    return sign | static_cast<uint16_t>(std::min<uint32_t>(h, 0x7c00u));
  }
  // Subnormal half (or zero): value = mant * 2^(e - 150), unit 2^-24.
  const uint32_t e = abs >> 23;
  if (e < 102) // below 2^-25: rounds to zero
    return sign;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e; // in [14, 24]
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (h & 1u)))
    ++h; // may carry into the smallest normal, whose encoding is the same
  return sign | static_cast<uint16_t>(h);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: exactly representable as a normal float.
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31)
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t floatToBFloat16(float value) {
  uint32_t x = floatBits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    // Truncation could clear every payload bit and turn NaN into infinity.
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

} // namespace attnc::ref
