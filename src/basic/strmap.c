/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "strmap.h"

static ssize_t strmap_find(const Strmap *m, const char *key)
{
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
	m->keys = xrealloc(m->keys, (m->n + 1) * sizeof(char *));
	m->values = xrealloc(m->values, (m->n + 1) * sizeof(char *));
	m->keys[m->n] = xstrdup(key);
	m->values[m->n] = xstrdup(value);
	m->n++;
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
	free(m->keys[i]);
	free(m->values[i]);
	memmove(m->keys + i, m->keys + i + 1, (m->n - (size_t)i - 1) * sizeof(char *));
	memmove(m->values + i, m->values + i + 1, (m->n - (size_t)i - 1) * sizeof(char *));
	m->n--;
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
	*m = (Strmap){};
}
