/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "strmap.h"

/* Room the arrays have for n entries: a power of two, at least 4. Derived from n rather than
 * stored, so that a Strmap stays the plain struct its users read. */
static size_t capacity(size_t n)
{
	size_t c = 4;
	while (c < n)
		c *= 2;
	return c;
}

static void index_add(Strmap *m, size_t i)
{
	(void)hashmap_put(m->index, m->keys[i], (void *)(uintptr_t)(i + 1));
}

/* (Re)builds the index from the arrays, or drops it when the map has become small. */
static void index_rebuild(Strmap *m)
{
	hashmap_free(m->index);
	m->index = NULL;
	if (m->n < STRMAP_INDEX_MIN)
		return;
	m->index = hashmap_new(NULL);
	for (size_t i = 0; i < m->n; i++)
		index_add(m, i);
}

static ssize_t strmap_find(const Strmap *m, const char *key)
{
	if (m->index) {
		uintptr_t pos = (uintptr_t)hashmap_get(m->index, key);
		return pos ? (ssize_t)(pos - 1) : -1;
	}
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->keys[i], key) == 0)
			return (ssize_t)i;
	return -1;
}

void strmap_set(Strmap *m, const char *key, const char *value)
{
	ssize_t i = strmap_find(m, key);
	if (i >= 0) {
		free(m->values[i]);
		m->values[i] = xstrdup(value);
		return;
	}
	if (m->n == 0 || m->n == capacity(m->n)) {
		size_t c = capacity(m->n + 1);
		m->keys = xrealloc(m->keys, c * sizeof(char *));
		m->values = xrealloc(m->values, c * sizeof(char *));
	}
	m->keys[m->n] = xstrdup(key);
	m->values[m->n] = xstrdup(value);
	m->n++;
	if (m->index)
		index_add(m, m->n - 1);
	else if (m->n >= STRMAP_INDEX_MIN)
		index_rebuild(m);
}

const char *strmap_get(const Strmap *m, const char *key)
{
	ssize_t i = strmap_find(m, key);
	return i >= 0 ? m->values[i] : NULL;
}

bool strmap_remove(Strmap *m, const char *key)
{
	ssize_t i = strmap_find(m, key);
	if (i < 0)
		return false;
	if (m->index)
		(void)hashmap_remove(m->index, key);
	free(m->keys[i]);
	free(m->values[i]);
	memmove(m->keys + i, m->keys + i + 1, (m->n - (size_t)i - 1) * sizeof(char *));
	memmove(m->values + i, m->values + i + 1, (m->n - (size_t)i - 1) * sizeof(char *));
	m->n--;
	if (m->index && m->n < STRMAP_INDEX_MIN)
		index_rebuild(m); /* drops it */
	else if (m->index)
		/* the entries after i moved down one: O(n - i), as the memmove is */
		for (size_t j = (size_t)i; j < m->n; j++) {
			(void)hashmap_remove(m->index, m->keys[j]);
			index_add(m, j);
		}
	return true;
}

bool strmap_equal(const Strmap *a, const Strmap *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const char *v = strmap_get(b, a->keys[i]);
		if (!v || strcmp(v, a->values[i]) != 0)
			return false;
	}
	return true;
}

void strmap_copy(Strmap *dst, const Strmap *src)
{
	for (size_t i = 0; i < src->n; i++)
		strmap_set(dst, src->keys[i], src->values[i]);
}

void strmap_done(Strmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->keys[i]);
		free(m->values[i]);
	}
	free(m->keys);
	free(m->values);
	hashmap_free(m->index);
	*m = (Strmap){};
}
