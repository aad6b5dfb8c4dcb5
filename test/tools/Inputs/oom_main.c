/* A kernel whose allocations fail returns ATTNC_STATUS_OUT_OF_MEMORY, and
 * the next call, with memory, works: run with the address space limited to
 * what the process has mapped plus 16 MB. A forward that packs its key
 * blocks per task runs within that limit. A failed call leaks nothing. */
#include "attnc/runtime.h"
#include "oom.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static long mapped_bytes(void) {
  long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld", &pages) != 1)
    pages = 0;
  if (f)
    fclose(f);
  return pages * sysconf(_SC_PAGESIZE);
}

int main(void) {
  enum { S = 65536, D = 64, H = 2, SQ = 128 };
  /* The small kernel starts the thread pool: its workers fail too. */
  float *x = calloc(H * 64 * D, sizeof(float));
  float *y = calloc(H * 64 * D, sizeof(float));
  printf("small: status %d\n", small(x, y));
  float *q = calloc(H * SQ * D, sizeof(float));
  float *k = calloc((size_t)H * S * D, sizeof(float));
  float *v = malloc((size_t)H * S * D * sizeof(float));
  float *o = calloc(H * SQ * D, sizeof(float));
  float sim[H * H];
  if (!q || !k || !v || !o)
    return 1;
  for (size_t i = 0; i < (size_t)H * S * D; ++i)
    v[i] = 1.0f; /* O is 1 wherever the softmax sums to 1 */

  struct rlimit unlimited, tight;
  getrlimit(RLIMIT_AS, &unlimited);
  tight = unlimited;
  tight.rlim_cur = (rlim_t)mapped_bytes() + (16 << 20);
  if (setrlimit(RLIMIT_AS, &tight) != 0)
    return 1;
  int status = big(q, k, v, o, sim);
  printf("limited: status %d %s\n", status, attnc_status_string(status));
  /* A failed call leaks nothing (what it had allocated is freed). */
  attnc_workspace_release();
  size_t before = mallinfo2().uordblks;
  status = big(q, k, v, o, sim);
  attnc_workspace_release();
  printf("limited again: status %d, %zu bytes leaked\n", status,
         mallinfo2().uordblks - before);
  status = packed(q, k, v, o);
  int ones = 1;
  for (int i = 0; i < H * SQ * D; ++i)
    ones &= o[i] == 1.0f;
  printf("limited, packed per task: status %d ones %d\n", status, ones);
  setrlimit(RLIMIT_AS, &unlimited);
  attnc_workspace_release();
  for (int i = 0; i < H * SQ * D; ++i)
    o[i] = 0.0f;
  status = big(q, k, v, o, sim);
  ones = 1;
  for (int i = 0; i < H * SQ * D; ++i)
    ones &= o[i] == 1.0f;
  printf("unlimited: status %d ones %d\n", status, ones);
  return 0;
}
