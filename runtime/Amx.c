/* AMX tile state for kernels that use it (see runtime.h). Linux gives a
 * process the AMX tile data state only on request; without it the first
 * tile instruction faults. */
#include "attnc/runtime.h"

#include <pthread.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#define ATTNC_ARCH_REQ_XCOMP_PERM 0x1023
#define ATTNC_XFEATURE_XTILEDATA 18
#endif

static pthread_once_t amxOnce = PTHREAD_ONCE_INIT;
static int amxResult = -1;

static void requestAmx(void) {
#if defined(__linux__) && defined(__x86_64__)
  amxResult = syscall(SYS_arch_prctl, ATTNC_ARCH_REQ_XCOMP_PERM,
                      ATTNC_XFEATURE_XTILEDATA) == 0
                  ? 0
                  : -1;
#endif
}

int attnc_amx_init(void) {
  pthread_once(&amxOnce, requestAmx);
  return amxResult;
}
