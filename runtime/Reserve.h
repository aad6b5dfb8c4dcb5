/* A helper the runtime's parts share (not installed). */
#ifndef ATTNC_RUNTIME_RESERVE_H
#define ATTNC_RUNTIME_RESERVE_H

#include <stddef.h>
#include <stdlib.h>

/* A growable array `items` of `count` items with room for one more (its
 * new address), or null when out of memory (`items` is unchanged then). */
static inline void *attnc_reserve(void *items, int *capacity, int count,
                                  size_t size) {
  if (count < *capacity)
    return items;
  int grown = *capacity ? 2 * *capacity : 8;
  void *more = realloc(items, (size_t)grown * size);
  if (more)
    *capacity = grown;
  return more;
}

#endif /* ATTNC_RUNTIME_RESERVE_H */
