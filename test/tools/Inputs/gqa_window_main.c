/* Calls the kernel compiled from examples/gqa_window.mlir through its
 * generated header, checks its output against a float64 reference and its
 * null-pointer status. Prints what compile-run.test checks. */
#include "gqa_window.h"

#include "attnc/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, H = 8, HKV = 2, S = 96, D = 64, WINDOW = 32 };
#define Q_SIZE (B * H * S * D)
#define KV_SIZE (B * HKV * S * D)
#define LSE_SIZE (B * H * S)

static float q[Q_SIZE], k[KV_SIZE], v[KV_SIZE], o[Q_SIZE], lse[LSE_SIZE];

/* Deterministic values in [-1, 1). */
static unsigned state = 12345u;
static float next(void) {
  state = state * 1664525u + 1013904223u;
  return (float)((state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *p, int n, float value) {
  for (int i = 0; i < n; ++i)
    p[i] = value;
}

static int unchanged(const float *p, int n, float value) {
  for (int i = 0; i < n; ++i)
    if (p[i] != value)
      return 0;
  return 1;
}

int main(void) {
  for (int i = 0; i < Q_SIZE; ++i)
    q[i] = next();
  for (int i = 0; i < KV_SIZE; ++i)
    k[i] = next();
  for (int i = 0; i < KV_SIZE; ++i)
    v[i] = next();

  int32_t status = gqa_window(q, k, v, o, lse);
  printf("status %d ok %d\n", (int)status, status == ATTNC_STATUS_OK);

  /* Reference: GQA (query head h reads key/value head h / (H / HKV)),
   * sliding window j <= i && i - j < WINDOW, scale 1/sqrt(D). */
  double max_out_error = 0.0, max_lse_error = 0.0, scores[S];
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
      if (!(e <= max_lse_error))
        max_lse_error = e; /* also catches NaN */
      for (int d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int j = 0; j < S; ++j)
          acc += exp(scores[j] - m) / sum * v[(kvh * S + j) * D + d];
        double err = fabs(acc - o[(h * S + i) * D + d]);
        if (!(err <= max_out_error))
          max_out_error = err;
      }
    }
  }
  printf("output matches %d\n", max_out_error < 1e-4);
  printf("lse matches %d\n", max_lse_error < 1e-4);

  /* A null input: status 1 and no output written. */
  fill(o, Q_SIZE, 42.0f);
  fill(lse, LSE_SIZE, 42.0f);
  status = gqa_window(q, NULL, v, o, lse);
  printf("null input: status %d null_argument %d untouched %d\n", (int)status,
         status == ATTNC_STATUS_NULL_ARGUMENT,
         unchanged(o, Q_SIZE, 42.0f) && unchanged(lse, LSE_SIZE, 42.0f));

  /* A null output: the same, the other output untouched. */
  status = gqa_window(q, k, v, o, NULL);
  printf("null output: status %d null_argument %d untouched %d\n",
         (int)status, status == ATTNC_STATUS_NULL_ARGUMENT,
         unchanged(o, Q_SIZE, 42.0f));
  return 0;
}
