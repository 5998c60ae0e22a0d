/*
 * vec.h - a typed growable array: a pointer, a count and a capacity, grown
 * by doubling.  Either declare one (VEC(T) is an anonymous struct { T *v;
 * size_t n, cap; }, zero-initialised is empty) and use vec_push/vec_free, or
 * keep an existing (pointer, count, capacity) triple and make room with
 * vec_reserve before appending.
 *
 *   VEC(uint64_t) ids = { 0 };
 *   if (vec_push(&ids, 42) != 0) ...     -ENOMEM, ids unchanged
 *   vec_free(&ids);
 *
 * Errors: -ENOMEM only; the array is left as it was.  Threads: none of its
 * own; an array is guarded by whoever owns it.
 */
#ifndef LOTUS_VEC_H
#define LOTUS_VEC_H
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define VEC(T) struct { T *v; size_t n, cap; }

/* Grow *p (capacity *cap, elements of elem bytes) to hold at least need
 * elements: the capacity doubles, starting at first. */
static inline int vec_grow_(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : first;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	if (c > SIZE_MAX / elem)
		return -ENOMEM;
	void *n = realloc(*p, c * elem);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = c;
	return 0;
}

/* Room for need elements in the array p of capacity cap (lvalues; p a
 * typed pointer), starting at first elements. */
#define vec_reserve(p, cap, need, first) \
	vec_grow_((void **)&(p), &(cap), (need), sizeof(*(p)), (first))

/* Append x to a VEC (growing from 16). */
#define vec_push(vec, x) \
	(vec_reserve((vec)->v, (vec)->cap, (vec)->n + 1, 16) ? -ENOMEM \
							      : ((vec)->v[(vec)->n++] = (x), 0))

#define vec_free(vec) \
	do { free((vec)->v); (vec)->v = NULL; (vec)->n = (vec)->cap = 0; } while (0)

#endif
