/* Runs the kernel of masked_rows.mlir: batch 0 has no keys (len 0), so every
 * row is fully masked and must give O = 0 and LSE = -inf; batch 1 keeps 3
 * keys. Row 1 of batch 1 sees only key 0; row 0 sees key 0. */
#include "masked_rows.h"

#include <math.h>
#include <stdio.h>

enum { B = 2, H = 2, HKV = 1, SQ = 4, SKV = 6, D = 8 };

static float q[B * H * SQ * D], k[B * HKV * SKV * D], v[B * HKV * SKV * D];
static float o[B * H * SQ * D], lse[B * H * SQ];

int main(void) {
  int32_t len[B] = {0, 3};
  for (int i = 0; i < B * H * SQ * D; ++i)
    q[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < B * HKV * SKV * D; ++i) {
    k[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    v[i] = (float)((i * 3) % 17) / 17.0f - 0.5f;
  }
  int32_t status = masked_rows(q, k, v, len, o, lse);
  printf("status %d\n", (int)status);

  int empty_rows_ok = 1;
  for (int i = 0; i < H * SQ; ++i) {
    if (!(isinf(lse[i]) && lse[i] < 0))
      empty_rows_ok = 0;
    for (int d = 0; d < D; ++d)
      if (o[i * D + d] != 0.0f)
        empty_rows_ok = 0;
  }
  printf("fully masked rows: zero output and -inf lse %d\n", empty_rows_ok);

  double max_error = 0.0;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < SQ; ++i) {
      double s[SKV], m = -INFINITY, sum = 0.0;
      for (int j = 0; j < SKV; ++j) {
        s[j] = -INFINITY;
        if (j > i || j >= len[1] || j == 1)
          continue;
        double dot = 0.0;
        for (int d = 0; d < D; ++d)
          dot += (double)q[((1 * H + h) * SQ + i) * D + d] * k[(1 * SKV + j) * D + d];
        s[j] = dot / sqrt((double)D);
        if (s[j] > m)
          m = s[j];
      }
      for (int j = 0; j < SKV; ++j)
        sum += exp(s[j] - m);
      double e = fabs(m + log(sum) - lse[(1 * H + h) * SQ + i]);
      if (!(e <= max_error))
        max_error = e;
      for (int d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int j = 0; j < SKV; ++j)
          acc += exp(s[j] - m) / sum * v[(1 * SKV + j) * D + d];
        e = fabs(acc - o[((1 * H + h) * SQ + i) * D + d]);
        if (!(e <= max_error))
          max_error = e;
      }
    }
  printf("padded batch matches %d\n", max_error < 1e-5);
  return 0;
}
