/* The thread pool generated kernels run their parallel loops on. */
#include "Arena.h"
#include "attnc/runtime.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* One pool per process, created on first use: workers wait for a job,
 * take task indices from a shared counter, and the caller works too. A
 * second concurrent caller (another host thread) runs its loop inline
 * rather than waiting for the pool. */
#define ATTNC_MAX_THREADS 256

typedef struct {
  attnc_task_fn fn;
  void *ctx;
  int64_t n;
  atomic_llong next;
  int helpers;       /* workers that take tasks in this job */
  atomic_int active; /* workers still inside the current job */
  atomic_int out_of_memory; /* a task's allocation failed */
  attnc_arena *arena;       /* the caller's: its tasks allocate there */
} job_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static job_t job;
static atomic_long generation;   /* written under `lock` */
static int workers;              /* threads besides the caller */
static atomic_int wanted = 0;    /* attnc_set_num_threads, 0: default */

static int default_threads(void) {
  const char *env = getenv("ATTNC_NUM_THREADS");
  if (env && *env) {
    int n = atoi(env);
    if (n >= 1)
      return n < ATTNC_MAX_THREADS ? n : ATTNC_MAX_THREADS;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  return cores < ATTNC_MAX_THREADS ? (int)cores : ATTNC_MAX_THREADS;
}

static void run_tasks(job_t *j) {
  for (;;) {
    int64_t i = atomic_fetch_add(&j->next, 1);
    if (i >= j->n)
      return;
    j->fn(j->ctx, i, i + 1);
  }
}

/* run_tasks in a kernel frame (KernelCall.c): with the kernels' floating-
 * point mode, and ending this thread's share of the job where an allocation
 * fails: the job is marked, and no further task starts. */
static void run_tasks_guarded(job_t *j) {
  _Alignas(16) char frame[ATTNC_KERNEL_FRAME_BYTES];
  attnc_arena *own = attnc_arena_current();
  attnc_arena_set(j->arena);
  attnc_kernel_enter(frame);
  if (setjmp(*(jmp_buf *)frame)) {
    atomic_store(&j->out_of_memory, 1);
    atomic_store(&j->next, j->n);
  } else {
    run_tasks(j);
  }
  attnc_kernel_leave(frame);
  attnc_arena_set(own);
}

/* How long a worker spins between jobs before it sleeps, and the caller
 * before it waits for the workers: kernels run several loops per call, and
 * callers often call again at once (a batch's entries in turn, decoding
 * steps), so the next job usually comes within microseconds, where waking
 * a sleeping thread takes tens. Entries of a dynamic batch in turn (f32
 * decoding, 4 entries of mixed lengths, 2 threads) ran 5-11% over the
 * static kernel with a spin of ~200 us, 17-23% without. */
#define ATTNC_SPIN_NS 200000

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* One turn of a spin that began at `start` (now_ns) and is at turn `turn`:
 * whether it may go on. */
static int spin_turn(int64_t start, int64_t turn) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  return turn % 64 != 0 || now_ns() - start <= ATTNC_SPIN_NS;
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg; /* 1, 2, ...: the caller is 0 */
  long seen = 0;
  for (;;) {
    for (int64_t start = now_ns(), turn = 1;
         atomic_load(&generation) == seen && spin_turn(start, turn); ++turn)
      ;
    pthread_mutex_lock(&lock);
    while (atomic_load(&generation) == seen)
      pthread_cond_wait(&wake, &lock);
    seen = atomic_load(&generation);
    pthread_mutex_unlock(&lock);
    if (id <= job.helpers)
      run_tasks_guarded(&job);
    if (atomic_fetch_sub(&job.active, 1) == 1) {
      pthread_mutex_lock(&lock);
      pthread_cond_signal(&done);
      pthread_mutex_unlock(&lock);
    }
  }
  return NULL;
}

static void start_pool(void) {
  int threads = default_threads();
  for (int t = 1; t < threads; ++t) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, (void *)(intptr_t)t) != 0)
      break;
    pthread_detach(thread);
    ++workers;
  }
}

int attnc_num_threads(void) {
  int n = atomic_load(&wanted);
  return n >= 1 ? n : default_threads();
}

void attnc_set_num_threads(int n) { atomic_store(&wanted, n < 0 ? 0 : n); }

void attnc_parallel_for(int64_t n, attnc_task_fn fn, void *ctx) {
  attnc_parallel_for_threads(n, fn, ctx, 0);
}

void attnc_parallel_for_threads(int64_t n, attnc_task_fn fn, void *ctx,
                                int max_threads) {
  if (n <= 0)
    return;
  pthread_once(&once, start_pool);
  int threads = attnc_num_threads();
  if (max_threads > 0 && max_threads < threads)
    threads = max_threads;
  if (n == 1 || threads <= 1 || workers == 0 ||
      pthread_mutex_trylock(&busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  /* Wake only as many workers as asked for: the others stay asleep. */
  int helpers = threads - 1 < workers ? threads - 1 : workers;
  pthread_mutex_lock(&lock);
  job.fn = fn;
  job.ctx = ctx;
  job.n = n;
  job.helpers = helpers;
  atomic_store(&job.next, 0);
  atomic_store(&job.active, workers);
  atomic_store(&job.out_of_memory, 0);
  job.arena = attnc_arena_current();
  atomic_fetch_add(&generation, 1);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  run_tasks_guarded(&job);
  for (int64_t start = now_ns(), turn = 1;
       atomic_load(&job.active) != 0 && spin_turn(start, turn); ++turn)
    ;
  pthread_mutex_lock(&lock);
  while (atomic_load(&job.active) != 0)
    pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
  int failed = atomic_load(&job.out_of_memory);
  pthread_mutex_unlock(&busy);
  /* Every thread has left the job: the failure goes on to this thread's
   * own target (the entry point, or an enclosing job's task). */
  if (failed)
    attnc_out_of_memory();
}
