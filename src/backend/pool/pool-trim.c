/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's trimmer: a thread that, every interval, trims the filesystems of the volumes
 * staged on this machine (pool_node_trim_all()), so the space of files deleted in them goes
 * back to the pool within one interval, in one batch per volume instead of a discard at each
 * journal commit (see docs/bench.md for the measurement behind the choice). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "alloc.h"
#include "log.h"
#include "pool-internal.h"
#include "pool-node.h"

struct PoolTrimmer {
	Pool *pool;
	usec_t interval;
	pthread_t thread;
	pthread_mutex_t lock; /* guards stopping */
	pthread_cond_t cond;  /* signalled when stopping is set */
	bool stopping;
};

/* Waits one interval; false when asked to stop. */
static bool wait_interval(PoolTrimmer *t)
{
	usec_t until = now_usec(CLOCK_MONOTONIC) + t->interval;
	struct timespec ts = {.tv_sec = (time_t)(until / USEC_PER_SEC),
			      .tv_nsec = (long)((until % USEC_PER_SEC) * NSEC_PER_USEC)};

	pthread_mutex_lock(&t->lock);
	while (!t->stopping && pthread_cond_timedwait(&t->cond, &t->lock, &ts) != ETIMEDOUT)
		;
	bool go_on = !t->stopping;
	pthread_mutex_unlock(&t->lock);
	return go_on;
}

static void *trimmer_main(void *userdata)
{
	PoolTrimmer *t = userdata;

	while (wait_interval(t)) {
		uint64_t bytes = 0;
		int n = pool_node_trim_all(t->pool, &bytes);
		pool_reserve_restore(t->pool); /* trimmed space may refill it */
		if (n < 0)
			log_debug_errno(n, "pool %s: trimming failed: %m", pool_path(t->pool));
		else if (n > 0)
			log_debug("pool %s: trimmed %llu bytes in %d volumes", pool_path(t->pool),
				  (unsigned long long)bytes, n);
	}
	return NULL;
}

int pool_trimmer_start(Pool *p, usec_t interval, PoolTrimmer **ret)
{
	PoolTrimmer *t = xnew0(PoolTrimmer, 1);
	pthread_condattr_t ca;

	t->pool = p;
	t->interval = interval;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	int r = -pthread_create(&t->thread, NULL, trimmer_main, t);
	if (r < 0) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return r;
	}
	*ret = t;
	return 0;
}

void pool_trimmer_stop(PoolTrimmer *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
