/* Out-of-memory recovery for generated kernels (runtime.h).
 *
 * A kernel's allocations sit deep inside loops and parallel tasks, with no
 * way back to its entry point but returning through every frame. So the
 * entry point sets a jump target (attnc_oom_guard_enter, then setjmp), the
 * allocator jumps back to it when malloc fails, and the entry point returns
 * ATTNC_STATUS_OUT_OF_MEMORY. Pool workers have a target of their own per
 * job (ThreadPool.c): the failure ends their share of it and is passed to
 * the thread that started the job, once the job is over. */
#include "attnc/runtime.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

/* The entry points give a buffer of 256 bytes. */
_Static_assert(sizeof(jmp_buf) <= 256, "jmp_buf outgrew the entry's buffer");

static _Thread_local jmp_buf *target;

void *attnc_oom_guard_enter(void *jump_buffer) {
  jmp_buf *previous = target;
  target = (jmp_buf *)jump_buffer;
  return previous;
}

void attnc_oom_guard_leave(void *previous) { target = (jmp_buf *)previous; }

void attnc_out_of_memory(void) {
  if (target)
    longjmp(*target, 1);
  /* A kernel called other than through its entry point. */
  fputs("attnc: a kernel ran out of memory outside its entry point\n", stderr);
  abort();
}
