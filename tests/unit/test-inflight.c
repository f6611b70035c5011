/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "alloc.h"
#include "inflight.h"
#include "tap.h"

#define N_THREADS 16
#define N_ROUNDS 20000

static Inflight *shared;
static atomic_int inside, max_inside, n_held, n_busy;

/* Every thread fights for one key: the holder must always be alone. */
static void *race_one_key(void *arg)
{
	(void)arg;
	for (int i = 0; i < N_ROUNDS; i++) {
		int r = inflight_begin(shared, "vol:vol-0123456789abcdef");
		if (r == -EBUSY) {
			atomic_fetch_add(&n_busy, 1);
			continue;
		}
		int now = atomic_fetch_add(&inside, 1) + 1;
		int m = atomic_load(&max_inside);
		while (now > m && !atomic_compare_exchange_weak(&max_inside, &m, now))
			;
		atomic_fetch_add(&n_held, 1);
		atomic_fetch_sub(&inside, 1);
		inflight_end(shared, "vol:vol-0123456789abcdef");
	}
	return NULL;
}

/* Threads with keys of their own never see each other. */
static void *own_keys(void *arg)
{
	long t = (long)arg;
	char key[64];
	int fails = 0;

	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "pub:vol-%ld-%d:node-1", t, i);
		if (inflight_begin(shared, key) != 0)
			fails++;
	}
	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "pub:vol-%ld-%d:node-1", t, i);
		inflight_end(shared, key);
	}
	return (void *)(long)fails;
}

static int hold_in_scope(Inflight *in, const char *key)
{
	_cleanup_(inflight_releasep) InflightHold *h = NULL;
	int r = inflight_hold(in, key, &h);
	if (r < 0)
		return r;
	/* while held, a second call is refused */
	return inflight_begin(in, key);
}

int main(void)
{
	_cleanup_(inflight_freep) Inflight *in = inflight_new();
	char key[64];

	is_int(inflight_begin(in, "create:pvc-1"), 0, "first begin holds the key");
	is_int(inflight_begin(in, "create:pvc-1"), -EBUSY, "second begin of the same key: -EBUSY");
	is_int(inflight_begin(in, "create:pvc-2"), 0, "another key is independent");
	is_int(inflight_begin(in, "create:PVC-1"), 0, "keys are case-sensitive (CSI names are)");
	is_int(inflight_count(in), 3, "three keys held");
	inflight_end(in, "create:pvc-1");
	is_int(inflight_begin(in, "create:pvc-1"), 0, "after end the key can be taken again");
	inflight_end(in, "create:never-held");
	is_int(inflight_count(in), 3, "ending a key nobody holds changes nothing");
	inflight_end(in, "create:pvc-1");
	inflight_end(in, "create:pvc-2");
	inflight_end(in, "create:PVC-1");
	is_int(inflight_count(in), 0, "all ended");

	is_int(hold_in_scope(in, "snap:s1"), -EBUSY, "a hold refuses a second call while in scope");
	is_int(inflight_count(in), 0, "the hold ended when it left scope");
	is_int(inflight_begin(in, "snap:s1"), 0, "and the key is free again");
	inflight_end(in, "snap:s1");

	InflightHold *h = NULL;
	is_int(inflight_holdf(in, &h, "pub:%s:%s", "vol-1", "node-a"), 0, "holdf builds the key");
	is_int(inflight_begin(in, "pub:vol-1:node-a"), -EBUSY, "the formatted key is held");
	InflightHold *h2 = NULL;
	is_int(inflight_hold(in, "pub:vol-1:node-a", &h2), -EBUSY, "a second hold is refused");
	ok(h2 == NULL, "a refused hold leaves its output alone");
	h = inflight_release(h);
	ok(h == NULL, "release returns NULL");
	is_int(inflight_count(in), 0, "released");
	ok(inflight_release(NULL) == NULL, "releasing NULL is a no-op");

	/* many keys: the table grows and still finds every one */
	int fails = 0;
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "vol:vol-%016x", i);
		fails += inflight_begin(in, key) != 0;
	}
	is_int(fails, 0, "10000 distinct keys all held");
	is_int(inflight_count(in), 10000, "count is 10000");
	int busy = 0;
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "vol:vol-%016x", i);
		busy += inflight_begin(in, key) == -EBUSY;
	}
	is_int(busy, 10000, "each of them refused a second time");
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "vol:vol-%016x", i);
		inflight_end(in, key);
	}
	is_int(inflight_count(in), 0, "all 10000 ended");

	/* threads */
	shared = in;
	pthread_t th[N_THREADS];
	for (long t = 0; t < N_THREADS; t++)
		pthread_create(&th[t], NULL, race_one_key, NULL);
	for (int t = 0; t < N_THREADS; t++)
		pthread_join(th[t], NULL);
	is_int(atomic_load(&max_inside), 1, "one key is never held by two threads at once");
	is_int(atomic_load(&n_held) + atomic_load(&n_busy), N_THREADS * N_ROUNDS,
	       "every attempt either held the key or got -EBUSY");
	ok(atomic_load(&n_held) > 0, "some attempts held the key (%d)", atomic_load(&n_held));
	is_int(inflight_count(in), 0, "nothing left held after the race");

	for (long t = 0; t < N_THREADS; t++)
		pthread_create(&th[t], NULL, own_keys, (void *)t);
	long total = 0;
	for (int t = 0; t < N_THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		total += (long)ret;
	}
	is_int(total, 0, "threads with distinct keys never get -EBUSY");
	is_int(inflight_count(in), 0, "and end them all");

	return tap_done();
}
