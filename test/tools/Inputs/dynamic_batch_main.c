/* Calls a kernel of a dynamic batch at batch sizes 1, 4 and 0, and the
 * kernel of one entry on each entry's slices: the same bytes. */
#include "dynamic_batch.h"

#include <attnc/runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { Q = 8 * 64, KV = 2 * 300 * 64, MAXB = 4 };

static uint16_t q[MAXB * Q], k[MAXB * KV], v[MAXB * KV];
static uint16_t o[MAXB * Q], one[MAXB * Q];
static int32_t len[MAXB] = {300, 1, 0, 177};

static uint16_t randomBf16(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  /* Exponents of 2^-3 .. 2^0, either sign. */
  return (uint16_t)((*state >> 16 & 0x807f) | (0x3c00 + (*state >> 12 & 0x180)));
}

int main(void) {
  unsigned state = 1;
  for (int i = 0; i < MAXB * Q; ++i)
    q[i] = randomBf16(&state);
  for (int i = 0; i < MAXB * KV; ++i) {
    k[i] = randomBf16(&state);
    v[i] = randomBf16(&state);
  }
  for (int64_t batch = 1; batch <= MAXB; batch += 3) {
    memset(o, 0xff, sizeof o);
    int status = decode(q, k, v, len, o, batch);
    int same = 1;
    for (int64_t b = 0; b < batch; ++b) {
      status |= decode_one(q + b * Q, k + b * KV, v + b * KV, len + b,
                           one + b * Q);
      same &= memcmp(o + b * Q, one + b * Q, sizeof(uint16_t) * Q) == 0;
    }
    printf("batch %d: status %d same %d\n", (int)batch, status, same);
  }
  memset(o, 0xff, sizeof o);
  int empty = decode(NULL, NULL, NULL, NULL, NULL, 0);
  int negative = decode(q, k, v, len, o, -2);
  len[2] = 301;
  int over = decode(q, k, v, len, o, 4);
  int untouched = 1;
  for (int i = 0; i < MAXB * Q; ++i)
    untouched &= o[i] == 0xffff;
  printf("batch 0: %s; batch -2: %s; length 301 of 300: %s, untouched %d\n",
         attnc_status_string(empty), attnc_status_string(negative),
         attnc_status_string(over), untouched);
  return 0;
}
