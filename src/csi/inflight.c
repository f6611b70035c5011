/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "hashmap.h"
#include "inflight.h"
#include "log.h"
#include "metrics.h"

METRIC_DEFINE(conflicts, METRIC_COUNTER, "volplug_csi_in_flight_conflicts_total",
	      "Calls answered ABORTED because a call for the same object was in flight, by the "
	      "kind of key (vol, node, create, snap, ...)",
	      "key");

struct Inflight {
	pthread_mutex_t lock;
	Hashmap *keys; /* guarded by lock; the values are unused */
};

struct InflightHold {
	Inflight *in;
	char *key;
};

Inflight *inflight_new(void)
{
	Inflight *in = xnew0(Inflight, 1);
	pthread_mutex_init(&in->lock, NULL);
	in->keys = hashmap_new(NULL);
	return in;
}

void inflight_free(Inflight *in)
{
	if (!in)
		return;
	hashmap_free(in->keys);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

int inflight_begin(Inflight *in, const char *key)
{
	pthread_mutex_lock(&in->lock);
	int r = hashmap_put(in->keys, key, NULL);
	pthread_mutex_unlock(&in->lock);
	if (r < 0) {
		log_debug("%s is already in flight", key);
		metric_inc(&conflicts, strndupa(key, strcspn(key, ":")));
		return -EBUSY;
	}
	return 0;
}

void inflight_end(Inflight *in, const char *key)
{
	pthread_mutex_lock(&in->lock);
	(void)hashmap_remove(in->keys, key);
	pthread_mutex_unlock(&in->lock);
}

size_t inflight_count(Inflight *in)
{
	pthread_mutex_lock(&in->lock);
	size_t n = hashmap_size(in->keys);
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
