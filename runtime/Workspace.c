/* The heap memory of generated kernels.
 *
 * Kernels allocate their scratch (packed and transposed operands, partial
 * sums, layer activations) on every call through MLIR's generic allocation
 * functions (finalize-memref-to-llvm with use-generic-functions). Straight
 * from malloc, each call would fault those pages in anew: glibc hands
 * blocks above its mmap threshold back to the OS when they are freed, and
 * an S=2048, E=512 layer's forward+backward allocates about 100 MB per
 * call. So blocks of ATTNC_CACHE_MIN bytes or more are kept when freed and
 * handed to the next request they fit, up to a total of
 * ATTNC_WORKSPACE_CACHE_MB (default 256; 0 caches nothing). Smaller blocks
 * go straight back to malloc.
 *
 * A live block (allocated, not yet freed) is linked into the arena of the
 * call that allocated it (Arena.h), so that a call that runs out of memory
 * can free what it had allocated. */
#include "Arena.h"
#include "attnc/runtime.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define ATTNC_CACHE_MIN (1u << 20)
#define ATTNC_CACHE_SLOTS 32
/* Every block starts with a header: its capacity and its links in its
 * arena; 32 bytes keep malloc's alignment (MLIR aligns further by hand
 * where a memref asks for more). */
typedef struct header {
  size_t capacity;
  attnc_arena *arena; /* null: in none */
  struct header *prev, *next;
} header_t;
#define ATTNC_HEADER 32
_Static_assert(sizeof(header_t) <= ATTNC_HEADER, "the block header grew");

struct attnc_arena {
  pthread_mutex_t lock;
  header_t *head;
};

static _Thread_local attnc_arena own_arena = {PTHREAD_MUTEX_INITIALIZER, NULL};
static _Thread_local attnc_arena *current_arena;

attnc_arena *attnc_arena_current(void) { return current_arena; }
void attnc_arena_set(attnc_arena *arena) { current_arena = arena; }
attnc_arena *attnc_arena_own(void) { return &own_arena; }

static void link_block(header_t *h, attnc_arena *arena) {
  h->arena = arena;
  h->prev = NULL;
  if (!arena)
    return;
  pthread_mutex_lock(&arena->lock);
  h->next = arena->head;
  if (h->next)
    h->next->prev = h;
  arena->head = h;
  pthread_mutex_unlock(&arena->lock);
}

static void unlink_block(header_t *h) {
  attnc_arena *arena = h->arena;
  if (!arena)
    return;
  pthread_mutex_lock(&arena->lock);
  if (h->prev)
    h->prev->next = h->next;
  else
    arena->head = h->next;
  if (h->next)
    h->next->prev = h->prev;
  pthread_mutex_unlock(&arena->lock);
  h->arena = NULL;
}

typedef struct {
  char *base;
  size_t capacity;
} block_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t cache[ATTNC_CACHE_SLOTS]; /* oldest first */
static int cached;
static size_t cached_bytes;
static long long limit = -1; /* bytes; -1 until read from the environment */

static size_t cache_limit(void) {
  if (limit < 0) {
    const char *env = getenv("ATTNC_WORKSPACE_CACHE_MB");
    long long mb = env && *env ? atoll(env) : 256;
    limit = mb > 0 ? mb << 20 : 0;
  }
  return (size_t)limit;
}

static void *with_header(char *base, size_t capacity) {
  if (!base)
    return NULL;
  header_t *h = (header_t *)base;
  h->capacity = capacity;
  link_block(h, current_arena);
  return base + ATTNC_HEADER;
}

static void take(int slot) {
  cached_bytes -= cache[slot].capacity;
  for (int i = slot; i + 1 < cached; ++i)
    cache[i] = cache[i + 1];
  --cached;
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  if (size >= ATTNC_CACHE_MIN) {
    /* The smallest cached block that fits and wastes at most half. */
    pthread_mutex_lock(&cache_lock);
    int best = -1;
    for (int i = 0; i < cached; ++i)
      if (cache[i].capacity >= size && cache[i].capacity / 2 <= size &&
          (best < 0 || cache[i].capacity < cache[best].capacity))
        best = i;
    block_t found = best >= 0 ? cache[best] : (block_t){NULL, 0};
    if (best >= 0)
      take(best);
    pthread_mutex_unlock(&cache_lock);
    if (found.base)
      return with_header(found.base, found.capacity);
  }
  char *base =
      size > SIZE_MAX - ATTNC_HEADER ? NULL : malloc(size + ATTNC_HEADER);
  if (!base)
    attnc_out_of_memory(); /* back to the entry point, which says so */
  return with_header(base, size);
}

/* A block no longer live: kept in the cache, or back to malloc. */
static void put_back(char *base) {
  size_t capacity = ((header_t *)base)->capacity;
  if (capacity >= ATTNC_CACHE_MIN) {
    pthread_mutex_lock(&cache_lock);
    size_t max = cache_limit();
    if (capacity <= max) {
      /* Make room by freeing the oldest blocks. */
      while (cached > 0 &&
             (cached == ATTNC_CACHE_SLOTS || cached_bytes + capacity > max)) {
        free(cache[0].base);
        take(0);
      }
      cache[cached++] = (block_t){base, capacity};
      cached_bytes += capacity;
      base = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
  }
  free(base);
}

void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  char *base = (char *)ptr - ATTNC_HEADER;
  unlink_block((header_t *)base);
  put_back(base);
}

void attnc_arena_release(attnc_arena *arena) {
  pthread_mutex_lock(&arena->lock);
  header_t *h = arena->head;
  arena->head = NULL;
  pthread_mutex_unlock(&arena->lock);
  while (h) {
    header_t *next = h->next;
    h->arena = NULL;
    put_back((char *)h);
    h = next;
  }
}

int64_t attnc_workspace_release(void) {
  pthread_mutex_lock(&cache_lock);
  int64_t released = (int64_t)cached_bytes;
  while (cached > 0) {
    free(cache[0].base);
    take(0);
  }
  pthread_mutex_unlock(&cache_lock);
  return released;
}
