/* The blocks a kernel call has allocated and not yet freed (not installed):
 * Workspace.c keeps them, KernelCall.c frees them when an allocation fails
 * and the call ends with ATTNC_STATUS_OUT_OF_MEMORY (so that a failed call
 * leaks nothing), and ThreadPool.c lets the pool's workers allocate into
 * the arena of the call whose job they run. */
#ifndef ATTNC_RUNTIME_ARENA_H
#define ATTNC_RUNTIME_ARENA_H

typedef struct attnc_arena attnc_arena;

/* This thread's arena, or null outside a kernel call. */
attnc_arena *attnc_arena_current(void);
/* Allocations of this thread now go to `arena` (null: none). */
void attnc_arena_set(attnc_arena *arena);
/* The arena this thread's own calls use. */
attnc_arena *attnc_arena_own(void);
/* Frees every block still in `arena`. */
void attnc_arena_release(attnc_arena *arena);

#endif /* ATTNC_RUNTIME_ARENA_H */
