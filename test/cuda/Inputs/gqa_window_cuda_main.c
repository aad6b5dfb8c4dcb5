/* Calls the CUDA kernel compiled from examples/gqa_window.mlir through its
 * generated header. Without a driver or GPU: the context's status, and the
 * entry point's status for a null context. With a GPU: its output against a
 * float64 reference, the status for a null tensor, and the sticky error of
 * a launch the driver refuses. Prints what the tests check. */
#include "gqa_window.h"

#include "../../tools/Inputs/gqa_window_reference.h"
#include "attnc/cuda.h"
#include "attnc/runtime.h"

#include <stdio.h>
#include <stdlib.h>

static float q[Q_SIZE], k[KV_SIZE], v[KV_SIZE], o[Q_SIZE], lse[LSE_SIZE];

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
  fill_inputs(q, k, v);
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

  double max_out_error, max_lse_error;
  reference_errors(q, k, v, o, lse, &max_out_error, &max_lse_error);
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
