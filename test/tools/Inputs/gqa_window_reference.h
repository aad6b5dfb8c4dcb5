/* The shapes of examples/gqa_window.mlir, deterministic inputs and the
 * float64 reference its host programs check a kernel's output with
 * (test/tools: the CPU object; test/cuda: the CUDA one). */
#ifndef ATTNC_TEST_GQA_WINDOW_REFERENCE_H
#define ATTNC_TEST_GQA_WINDOW_REFERENCE_H

#include <math.h>

enum { B = 1, H = 8, HKV = 2, S = 96, D = 64, WINDOW = 32 };
#define Q_SIZE (B * H * S * D)
#define KV_SIZE (B * HKV * S * D)
#define LSE_SIZE (B * H * S)

/* Deterministic values in [-1, 1). */
static float next_input(void) {
  static unsigned state = 12345u;
  state = state * 1664525u + 1013904223u;
  return (float)((state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill_inputs(float *q, float *k, float *v) {
  for (int i = 0; i < Q_SIZE; ++i)
    q[i] = next_input();
  for (int i = 0; i < KV_SIZE; ++i)
    k[i] = next_input();
  for (int i = 0; i < KV_SIZE; ++i)
    v[i] = next_input();
}

/* The largest errors of o and lse against the reference: GQA (query head h
 * reads key/value head h / (H / HKV)), sliding window j <= i && i - j <
 * WINDOW, scale 1/sqrt(D). NaN counts as an infinite error. */
static void reference_errors(const float *q, const float *k, const float *v,
                             const float *o, const float *lse,
                             double *max_out_error, double *max_lse_error) {
  double scores[S];
  *max_out_error = 0.0;
  *max_lse_error = 0.0;
  for (int h = 0; h < H; ++h) {
    int kvh = h / (H / HKV);
    for (int i = 0; i < S; ++i) {
      double m = -INFINITY, sum = 0.0;
      for (int j = 0; j < S; ++j) {
        scores[j] = -INFINITY;
        if (j > i || i - j >= WINDOW)
          continue;
        double s = 0.0;
        for (int d = 0; d < D; ++d)
          s += (double)q[(h * S + i) * D + d] * k[(kvh * S + j) * D + d];
        scores[j] = s / sqrt((double)D);
        if (scores[j] > m)
          m = scores[j];
      }
      for (int j = 0; j < S; ++j)
        sum += exp(scores[j] - m);
      double e = fabs((m + log(sum)) - lse[h * S + i]);
      if (!(e <= *max_lse_error))
        *max_lse_error = isnan(e) ? INFINITY : e;
      for (int d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int j = 0; j < S; ++j)
          acc += exp(scores[j] - m) / sum * v[(kvh * S + j) * D + d];
        double err = fabs(acc - o[(h * S + i) * D + d]);
        if (!(err <= *max_out_error))
          *max_out_error = isnan(err) ? INFINITY : err;
      }
    }
  }
}

#endif /* ATTNC_TEST_GQA_WINDOW_REFERENCE_H */
