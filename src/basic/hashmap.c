/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash-util.h"
#include "hashmap.h"

#define INITIAL_BUCKETS 16

typedef struct Entry {
	struct Entry *next;
	uint64_t hash;
	void *value;
	char key[];
} Entry;

struct Hashmap {
	Entry **buckets;
	size_t n_buckets; /* a power of two */
	size_t n_entries;
	void (*free_value)(void *value);
};

Hashmap *hashmap_new(void (*free_value)(void *value))
{
	Hashmap *m = xnew0(Hashmap, 1);
	m->n_buckets = INITIAL_BUCKETS;
	m->buckets = xnew0(Entry *, m->n_buckets);
	m->free_value = free_value;
	return m;
}

void hashmap_free(Hashmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_buckets; i++)
		for (Entry *e = m->buckets[i], *next; e; e = next) {
			next = e->next;
			if (m->free_value && e->value)
				m->free_value(e->value);
			free(e);
		}
	free(m->buckets);
	free(m);
}

/* The link that points at key's entry, or the NULL that ends its chain. */
static Entry **find(const Hashmap *m, const char *key, uint64_t h)
{
	Entry **p = &m->buckets[h & (m->n_buckets - 1)];
	while (*p && ((*p)->hash != h || strcmp((*p)->key, key) != 0))
		p = &(*p)->next;
	return p;
}

static void grow(Hashmap *m)
{
	size_t n = m->n_buckets * 2;
	Entry **b = xnew0(Entry *, n);

	for (size_t i = 0; i < m->n_buckets; i++)
		for (Entry *e = m->buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = n;
}

int hashmap_put(Hashmap *m, const char *key, void *value)
{
	uint64_t h = fnv1a64_string(key, 0);
	if (*find(m, key, h))
		return -EEXIST;
	if (m->n_entries + 1 > m->n_buckets / 4 * 3)
		grow(m);

	size_t len = strlen(key);
	Entry *e = xmalloc(sizeof(Entry) + len + 1);
	e->hash = h;
	e->value = value;
	memcpy(e->key, key, len + 1);
	e->next = m->buckets[h & (m->n_buckets - 1)];
	m->buckets[h & (m->n_buckets - 1)] = e;
	m->n_entries++;
	return 0;
}

void *hashmap_get(const Hashmap *m, const char *key)
{
	Entry *e = *find(m, key, fnv1a64_string(key, 0));
	return e ? e->value : NULL;
}

bool hashmap_contains(const Hashmap *m, const char *key)
{
	return *find(m, key, fnv1a64_string(key, 0)) != NULL;
}

void *hashmap_remove(Hashmap *m, const char *key)
{
	Entry **p = find(m, key, fnv1a64_string(key, 0));
	Entry *e = *p;
	if (!e)
		return NULL;
	*p = e->next;
	m->n_entries--;
	void *value = e->value;
	free(e);
	return value;
}

size_t hashmap_size(const Hashmap *m)
{
	return m->n_entries;
}
