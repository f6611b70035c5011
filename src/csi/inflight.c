/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "inflight.h"
#include "log.h"

typedef struct Entry {
	struct Entry *next;
	uint64_t hash;
	char key[];
} Entry;

struct Inflight {
	pthread_mutex_t lock;
	/* Guarded by lock: a chained hash set, grown when it is 3/4 full so chains stay short. */
	Entry **buckets;
	size_t n_buckets; /* a power of two */
	size_t n_entries;
};

struct InflightHold {
	Inflight *in;
	char *key;
};

#define INITIAL_BUCKETS 64

/* FNV-1a: short keys, no adversary worth a keyed hash (keys come from authenticated COs and a
 * long chain costs only CPU, never correctness). */
static uint64_t hash_key(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

Inflight *inflight_new(void)
{
	Inflight *in = xnew0(Inflight, 1);
	pthread_mutex_init(&in->lock, NULL);
	in->n_buckets = INITIAL_BUCKETS;
	in->buckets = xnew0(Entry *, in->n_buckets);
	return in;
}

void inflight_free(Inflight *in)
{
	if (!in)
		return;
	for (size_t i = 0; i < in->n_buckets; i++)
		for (Entry *e = in->buckets[i], *next; e; e = next) {
			next = e->next;
			free(e);
		}
	free(in->buckets);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

/* Called with the lock held. */
static void grow(Inflight *in)
{
	size_t n = in->n_buckets * 2;
	Entry **b = xnew0(Entry *, n);

	for (size_t i = 0; i < in->n_buckets; i++)
		for (Entry *e = in->buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(in->buckets);
	in->buckets = b;
	in->n_buckets = n;
}

int inflight_begin(Inflight *in, const char *key)
{
	uint64_t h = hash_key(key);
	size_t len = strlen(key);

	pthread_mutex_lock(&in->lock);
	for (Entry *e = in->buckets[h & (in->n_buckets - 1)]; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0) {
			pthread_mutex_unlock(&in->lock);
			log_debug("%s is already in flight", key);
			return -EBUSY;
		}
	if (in->n_entries + 1 > in->n_buckets / 4 * 3)
		grow(in);
	Entry *e = xmalloc(sizeof(Entry) + len + 1);
	e->hash = h;
	memcpy(e->key, key, len + 1);
	e->next = in->buckets[h & (in->n_buckets - 1)];
	in->buckets[h & (in->n_buckets - 1)] = e;
	in->n_entries++;
	pthread_mutex_unlock(&in->lock);
	return 0;
}

void inflight_end(Inflight *in, const char *key)
{
	uint64_t h = hash_key(key);

	pthread_mutex_lock(&in->lock);
	for (Entry **p = &in->buckets[h & (in->n_buckets - 1)]; *p; p = &(*p)->next) {
		Entry *e = *p;
		if (e->hash == h && strcmp(e->key, key) == 0) {
			*p = e->next;
			in->n_entries--;
			free(e);
			break;
		}
	}
	pthread_mutex_unlock(&in->lock);
}

size_t inflight_count(Inflight *in)
{
	pthread_mutex_lock(&in->lock);
	size_t n = in->n_entries;
	pthread_mutex_unlock(&in->lock);
	return n;
}

int inflight_hold(Inflight *in, const char *key, InflightHold **ret)
{
	int r = inflight_begin(in, key);
	if (r < 0)
		return r;
	InflightHold *h = xnew0(InflightHold, 1);
	h->in = in;
	h->key = xstrdup(key);
	*ret = h;
	return 0;
}

int inflight_holdf(Inflight *in, InflightHold **ret, const char *fmt, ...)
{
	_cleanup_free_ char *key = NULL;
	va_list ap;

	va_start(ap, fmt);
	int r = vasprintf(&key, fmt, ap);
	va_end(ap);
	if (r < 0) {
		key = NULL; /* undefined after a failed vasprintf */
		return -ENOMEM;
	}
	return inflight_hold(in, key, ret);
}

InflightHold *inflight_release(InflightHold *h)
{
	if (!h)
		return NULL;
	inflight_end(h->in, h->key);
	free(h->key);
	free(h);
	return NULL;
}
