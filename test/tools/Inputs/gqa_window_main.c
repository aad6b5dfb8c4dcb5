/* Calls the kernel compiled from examples/gqa_window.mlir through its
 * generated header, checks its output against a float64 reference and its
 * null-pointer status. Prints what compile-run.test checks. */
#include "gqa_window.h"

#include "attnc/runtime.h"
#include "gqa_window_reference.h"

#include <stdio.h>
#include <stdlib.h>

static float q[Q_SIZE], k[KV_SIZE], v[KV_SIZE], o[Q_SIZE], lse[LSE_SIZE];

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
  fill_inputs(q, k, v);

  int32_t status = gqa_window(q, k, v, o, lse);
  printf("status %d ok %d\n", (int)status, status == ATTNC_STATUS_OK);

  double max_out_error, max_lse_error;
  reference_errors(q, k, v, o, lse, &max_out_error, &max_lse_error);
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
