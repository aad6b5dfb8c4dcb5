/* Calls the CUDA kernel compiled from examples/gqa_window.mlir through its
 * generated header. Without a driver or GPU: the context's status, and the
 * entry point's status for a null context. With a GPU: its output against a
 * float64 reference, the status for a null tensor, and the sticky error of
 * a launch the driver refuses. Prints what the tests check. */
#include "gqa_window.h"

#include "attnc/cuda.h"
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

int main(void) {
  attnc_cuda_context *ctx = NULL;
  int status = attnc_cuda_context_create(0, &ctx);
  if (status != ATTNC_STATUS_OK) {
    printf("no device: status %d context null %d\n", status, ctx == NULL);
    /* The entry point checks its context like its tensors. */
    status = gqa_window(NULL, NULL, (const float *)16, (const float *)16,
                        (const float *)16, (float *)16, (float *)16);
    printf("null context: status %d\n", status);
    return 0;
  }
  printf("device %s sm_%d\n", attnc_cuda_device_name(ctx),
         attnc_cuda_compute_capability(ctx));
  for (int i = 0; i < Q_SIZE; ++i)
    q[i] = next();
  for (int i = 0; i < KV_SIZE; ++i)
    k[i] = next();
  for (int i = 0; i < KV_SIZE; ++i)
    v[i] = next();
  float *dq = attnc_cuda_alloc(ctx, sizeof q),
        *dk = attnc_cuda_alloc(ctx, sizeof k),
        *dv = attnc_cuda_alloc(ctx, sizeof v),
        *dout = attnc_cuda_alloc(ctx, sizeof o),
        *dlse = attnc_cuda_alloc(ctx, sizeof lse);
  attnc_cuda_upload(ctx, dq, q, sizeof q);
  attnc_cuda_upload(ctx, dk, k, sizeof k);
  attnc_cuda_upload(ctx, dv, v, sizeof v);
  status = gqa_window(ctx, NULL, dq, dk, dv, dout, dlse);
  int synced = attnc_cuda_synchronize(ctx, NULL);
  printf("status %d synchronized %d %s\n", status, synced,
         attnc_cuda_last_error(ctx));
  attnc_cuda_download(ctx, o, dout, sizeof o);
  attnc_cuda_download(ctx, lse, dlse, sizeof lse);

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
  printf("output error %.3g matches %d\n", max_out_error, max_out_error < 1e-4);
  printf("lse error %.3g matches %d\n", max_lse_error, max_lse_error < 1e-4);

  status = gqa_window(ctx, NULL, dq, NULL, dv, dout, dlse);
  printf("null input: status %d\n", status);
  attnc_cuda_free(ctx, dq);
  attnc_cuda_free(ctx, dk);
  attnc_cuda_free(ctx, dv);
  attnc_cuda_free(ctx, dout);
  attnc_cuda_free(ctx, dlse);
  attnc_cuda_context_destroy(ctx);
  return 0;
}
