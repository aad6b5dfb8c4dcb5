/* What every kernel call does on entry and exit (runtime.h): the target of
 * out-of-memory recovery, and the floating-point mode.
 *
 * Out of memory: a kernel's allocations sit deep inside loops and parallel
 * tasks, with no way back to its entry point but returning through every
 * frame. So the entry point sets a jump target (attnc_kernel_enter, then
 * setjmp), the allocator jumps back to it when malloc fails, and the entry
 * point returns ATTNC_STATUS_OUT_OF_MEMORY. Pool workers have a target of
 * their own per job (ThreadPool.c): the failure ends their share of it and
 * is passed to the thread that started the job, once the job is over.
 * What the call had allocated and not freed by then (its arena, Arena.h,
 * the pool's workers' allocations included) is freed as the entry point
 * leaves: a failed call leaks nothing.
 *
 * Denormals: a row whose running maximum keeps rising (a score_mod bias
 * growing with j, such as ALiBi under a causal mask) makes probabilities
 * near FLT_MIN whose products with V are denormal, and each such FMA took
 * a microcode assist: ALiBi's forward ran at 1.8x the time of the same
 * causal attention without it (Intel Xeon, S = 2048, D = 64), and as fast
 * with FTZ and DAZ set. Kernels run with both, as oneDNN's do; what is
 * lost is below FLT_MIN (1.2e-38). */
#include "Arena.h"
#include "attnc/runtime.h"

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define ATTNC_HAVE_MXCSR 1
#endif

/* The frame: the jmp_buf, then what leave restores, and whether the frame
 * began this thread's arena (the outermost frame of a call) and whether an
 * allocation failed in it. */
typedef struct {
  jmp_buf jump;
  jmp_buf *previous;
  unsigned fp_mode;
  unsigned char owns_arena, failed;
} frame_t;
_Static_assert(sizeof(frame_t) <= ATTNC_KERNEL_FRAME_BYTES,
               "the kernel frame outgrew its bytes");

static _Thread_local jmp_buf *target;

void attnc_kernel_enter(void *frame) {
  frame_t *f = (frame_t *)frame;
  f->previous = target;
  target = &f->jump;
  f->failed = 0;
  f->owns_arena = attnc_arena_current() == NULL;
  if (f->owns_arena)
    attnc_arena_set(attnc_arena_own());
#ifdef ATTNC_HAVE_MXCSR
  f->fp_mode = _mm_getcsr();
  _mm_setcsr(f->fp_mode | 0x8040u); /* FTZ (bit 15) and DAZ (bit 6) */
#endif
}

void attnc_kernel_leave(void *frame) {
  frame_t *f = (frame_t *)frame;
  target = f->previous;
  if (f->owns_arena) {
    if (f->failed)
      attnc_arena_release(attnc_arena_own());
    attnc_arena_set(NULL);
  }
#ifdef ATTNC_HAVE_MXCSR
  _mm_setcsr(f->fp_mode);
#endif
}

void attnc_out_of_memory(void) {
  if (target) {
    ((frame_t *)target)->failed = 1; /* the jmp_buf starts its frame */
    longjmp(*target, 1);
  }
  /* A kernel called other than through its entry point. */
  fputs("attnc: a kernel ran out of memory outside its entry point\n", stderr);
  abort();
}
