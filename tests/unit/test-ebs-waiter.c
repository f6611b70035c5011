/* SPDX-License-Identifier: Apache-2.0 */
/* The batched waiter (ebs-waiter.h) against a world of objects that become ready at a set
 * time: waits share Describe calls, the poller learns when to ask, deadlines, failed checks,
 * permanent and transient call failures, objects not visible yet, batch sizes, looks. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ebs-waiter.h"
#include "tap.h"

#define MS USEC_PER_MSEC
#define OBJECTS_MAX 64

typedef struct Object {
	char id[32];
	usec_t visible_at; /* absent from replies before */
	usec_t ready_at;   /* USEC_INFINITY: never */
	bool broken;	   /* its state is "error" once ready */
} Object;

typedef struct Item {
	char id[32];
	bool ready, broken;
} Item;

/* The world, and what the fetches saw; guarded by lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Object objects[OBJECTS_MAX];
static size_t n_objects;
static unsigned fetches, largest_batch, fail_next;
static int fail_with;

static void world_reset(void)
{
	pthread_mutex_lock(&lock);
	n_objects = 0;
	fetches = largest_batch = fail_next = 0;
	pthread_mutex_unlock(&lock);
}

static const char *object_add(usec_t visible_in, usec_t ready_in, bool broken)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);

	pthread_mutex_lock(&lock);
	Object *o = &objects[n_objects];
	snprintf(o->id, sizeof(o->id), "vol-%03zu", n_objects);
	o->visible_at = now + visible_in;
	o->ready_at = ready_in == USEC_INFINITY ? USEC_INFINITY : now + ready_in;
	o->broken = broken;
	n_objects++;
	pthread_mutex_unlock(&lock);
	return o->id;
}

static int fetch(void *userdata, char *const *ids, size_t n, usec_t deadline, EbsFound *ret,
		 char **ret_error)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	EbsFound f = {.ids = xnew0(char *, n), .items = xnew0(void *, n)};

	(void)userdata;
	(void)deadline;
	pthread_mutex_lock(&lock);
	fetches++;
	if (n > largest_batch)
		largest_batch = (unsigned)n;
	if (fail_next > 0) {
		fail_next--;
		pthread_mutex_unlock(&lock);
		free(f.ids);
		free(f.items);
		*ret_error =
			xstrdup(fail_with == -EACCES ? "DescribeVolumes: AuthFailure: no"
						     : "DescribeVolumes: RequestLimitExceeded");
		return fail_with;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < n_objects; k++) {
			Object *o = &objects[k];
			if (strcmp(o->id, ids[i]) != 0 || now < o->visible_at)
				continue;
			Item *it = xnew0(Item, 1);
			memcpy(it->id, o->id, sizeof(it->id));
			it->ready = now >= o->ready_at;
			it->broken = it->ready && o->broken;
			f.ids[f.n] = xstrdup(o->id);
			f.items[f.n++] = it;
		}
	pthread_mutex_unlock(&lock);
	*ret = f;
	return 0;
}

static int check(const void *item, void *userdata, char **ret_error)
{
	const Item *it = item;

	(void)userdata;
	if (!it || !it->ready)
		return 0;
	if (it->broken) {
		*ret_error = xasprintf("volume %s is in state error", it->id);
		return -EIO;
	}
	return 1;
}

static EbsWaiter *waiter_new(size_t max_batch)
{
	return ebs_waiter_new(&(EbsWaiterConfig){
		.name = "DescribeVolumes",
		.fetch = fetch,
		.free_item = free,
		.max_batch = max_batch,
		.first_guess = 100 * MS,
		.retry_base = 50 * MS,
		.retry_cap = 400 * MS,
	});
}

static unsigned fetch_count(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = fetches;
	pthread_mutex_unlock(&lock);
	return n;
}

typedef struct Waiting {
	EbsWaiter *w;
	const char *id;
	usec_t deadline;
	int r;
	char *error;
	usec_t took;
} Waiting;

static void *wait_thread(void *p)
{
	Waiting *x = p;
	usec_t start = now_usec(CLOCK_MONOTONIC);

	x->r = ebs_waiter_wait(x->w, x->id, "create", check, NULL, x->deadline, &x->error);
	x->took = now_usec(CLOCK_MONOTONIC) - start;
	return NULL;
}

static int usec_cmp(const void *a, const void *b)
{
	usec_t x = *(const usec_t *)a, y = *(const usec_t *)b;
	return x < y ? -1 : x > y;
}

/* n threads wait for objects ready after ready_in; their results in x, the median time. */
static usec_t wait_many(EbsWaiter *w, Waiting *x, size_t n, usec_t ready_in)
{
	pthread_t t[OBJECTS_MAX];
	usec_t took[OBJECTS_MAX];

	for (size_t i = 0; i < n; i++) {
		x[i] = (Waiting){.w = w,
				 .id = object_add(0, ready_in, false),
				 .deadline = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC};
		pthread_create(&t[i], NULL, wait_thread, &x[i]);
	}
	for (size_t i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		took[i] = x[i].took;
	}
	qsort(took, n, sizeof(usec_t), usec_cmp);
	return took[n / 2];
}

static void test_batched_and_learned(void)
{
	EbsWaiter *w = waiter_new(0);
	Waiting x[20];

	world_reset();
	usec_t p50 = wait_many(w, x, 20, 300 * MS);
	unsigned first = fetch_count();
	bool all_ok = true, none_early = true;
	for (size_t i = 0; i < 20; i++) {
		all_ok = all_ok && x[i].r == 0;
		none_early = none_early && x[i].took >= 300 * MS;
	}
	ok(all_ok, "20 concurrent waits: all done");
	ok(none_early, "none before its object was ready");
	ok(first <= 6, "they shared %u Describe calls", first);
	ok(largest_batch == 20, "one call asked about all of them (%u ids)", largest_batch);

	usec_t guess = ebs_waiter_guess(w, "create");
	ok(guess > 200 * MS && guess < 450 * MS,
	   "learned: a new create is first polled after %llu ms", (unsigned long long)(guess / MS));
	world_reset();
	usec_t p50_second = wait_many(w, x, 20, 300 * MS);
	unsigned second = fetch_count();
	ok(second <= 3, "the second round needs %u calls (the first %u)", second, first);
	ok(p50_second < 300 * MS + 80 * MS,
	   "and is served shortly after the change: p50 %llu ms for 300 ms (first round %llu ms)",
	   (unsigned long long)(p50_second / MS), (unsigned long long)(p50 / MS));
	EbsWaiterStats st;
	ebs_waiter_stats(w, &st);
	is_int((int)st.waits, 40, "40 waits counted");

	/* Throttled polls find the next ones done only long after the change: that says how late
	 * the polls were, not that the change takes longer. */
	world_reset();
	pthread_mutex_lock(&lock);
	fail_next = 4;
	fail_with = -EAGAIN;
	pthread_mutex_unlock(&lock);
	usec_t p50_late = wait_many(w, x, 4, 300 * MS);
	guess = ebs_waiter_guess(w, "create");
	ok(p50_late > 600 * MS && guess < 450 * MS,
	   "a round served late (%llu ms, its polls throttled) leaves the guess at %llu ms",
	   (unsigned long long)(p50_late / MS), (unsigned long long)(guess / MS));
	ebs_waiter_free(w);
}

/* A change that became slower: the bounds learned anew are wide (the last poll before it was
 * done and the first after, polled at growing intervals). The next wait is not left until the
 * upper bound: it is asked about halfway there too. */
static void test_wide_bounds(void)
{
	EbsWaiter *w = waiter_new(0);
	Waiting x[8];

	world_reset();
	wait_many(w, x, 8, 300 * MS);
	wait_many(w, x, 8, 300 * MS);
	usec_t slower = wait_many(w, x, 8, 900 * MS);
	usec_t next = wait_many(w, x, 8, 900 * MS);
	ok(next < 900 * MS + 70 * MS,
	   "a change that became slower (900 ms, served at %llu ms while learning): the next "
	   "served at %llu ms",
	   (unsigned long long)(slower / MS), (unsigned long long)(next / MS));
	ebs_waiter_free(w);
}

static void test_deadline_and_failures(void)
{
	EbsWaiter *w = waiter_new(0);
	char *err = NULL;

	world_reset();
	const char *never = object_add(0, USEC_INFINITY, false);
	usec_t start = now_usec(CLOCK_MONOTONIC);
	int r = ebs_waiter_wait(w, never, "attach", check, NULL, start + 300 * MS, &err);
	usec_t took = now_usec(CLOCK_MONOTONIC) - start;
	is_int(r, -ETIMEDOUT, "never ready: -ETIMEDOUT");
	ok(took >= 300 * MS && took < 500 * MS, "at the deadline (%llu ms)",
	   (unsigned long long)(took / MS));
	ok(err && strstr(err, "attach vol-000") && strstr(err, "deadline"),
	   "the message names the kind and the id: %s", err);
	free(err);
	err = NULL;

	const char *broken = object_add(0, 50 * MS, true);
	r = ebs_waiter_wait(w, broken, "create", check, NULL, now_usec(CLOCK_MONOTONIC) + 2000 * MS,
			    &err);
	is_int(r, -EIO, "a check that fails ends the wait with its error");
	is_str(err, "volume vol-001 is in state error", "and its message");
	free(err);
	err = NULL;

	const char *late = object_add(250 * MS, 300 * MS, false);
	r = ebs_waiter_wait(w, late, "create", check, NULL, now_usec(CLOCK_MONOTONIC) + 3000 * MS,
			    &err);
	is_int(r, 0, "an object not visible at first is waited for until it is");

	pthread_mutex_lock(&lock);
	fail_next = 2;
	fail_with = -EAGAIN;
	pthread_mutex_unlock(&lock);
	const char *flaky = object_add(0, 100 * MS, false);
	r = ebs_waiter_wait(w, flaky, "create", check, NULL, now_usec(CLOCK_MONOTONIC) + 3000 * MS,
			    &err);
	is_int(r, 0, "two failed calls (throttled) are asked again");

	pthread_mutex_lock(&lock);
	fail_next = 1;
	fail_with = -EACCES;
	pthread_mutex_unlock(&lock);
	const char *denied = object_add(0, 100 * MS, false);
	r = ebs_waiter_wait(w, denied, "create", check, NULL, now_usec(CLOCK_MONOTONIC) + 3000 * MS,
			    &err);
	is_int(r, -EACCES, "a permanent failure of the call ends the wait");
	is_str(err, "DescribeVolumes: AuthFailure: no", "with the call's message");
	free(err);
	ebs_waiter_free(w);
}

static void test_batch_size(void)
{
	EbsWaiter *w = waiter_new(5);
	Waiting x[12];

	world_reset();
	wait_many(w, x, 12, 100 * MS);
	bool all_ok = true;
	for (size_t i = 0; i < 12; i++)
		all_ok = all_ok && x[i].r == 0;
	ok(all_ok, "12 waits with 5 ids a call: all done");
	ok(largest_batch == 5, "no call asked about more than 5 (%u)", largest_batch);
	ebs_waiter_free(w);
	ebs_waiter_free(NULL);
}

typedef struct Looking {
	EbsWaiter *w;
	const char *id;
	int r;
	bool seen, ready;
	usec_t took;
} Looking;

static int look_check(const void *item, void *userdata, char **ret_error)
{
	const Item *it = item;
	Looking *l = userdata;

	(void)ret_error;
	l->seen = it != NULL;
	l->ready = it && it->ready;
	return 0; /* "wait on" ends a look too */
}

static void *look_thread(void *p)
{
	Looking *l = p;
	usec_t start = now_usec(CLOCK_MONOTONIC);

	l->r = ebs_waiter_look(l->w, l->id, look_check, l, start + 5 * USEC_PER_SEC, NULL);
	l->took = now_usec(CLOCK_MONOTONIC) - start;
	return NULL;
}

static void test_looks(void)
{
	EbsWaiter *w = waiter_new(0);
	pthread_t t[8];
	Looking l[8];
	bool all = true;

	world_reset();
	/* eight looks asked together, one at an object EC2 does not show: one call */
	for (size_t i = 0; i < 8; i++) {
		l[i] = (Looking){.w = w, .id = i < 7 ? object_add(0, 0, false) : "vol-absent"};
		pthread_create(&t[i], NULL, look_thread, &l[i]);
	}
	for (size_t i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		all = all && l[i].r == 0 && l[i].seen == (i < 7) && l[i].took < 500 * MS;
	}
	ok(all, "8 looks: each answered at once, the absent one as not there");
	ok(fetch_count() == 1, "8 looks asked together share one call (%u)", fetch_count());

	/* a look rides along with a wait's poll, and leaves the wait's plan alone */
	Waiting x = {.w = w,
		     .id = object_add(0, 300 * MS, false),
		     .deadline = now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC};
	pthread_t wt;
	pthread_create(&wt, NULL, wait_thread, &x);
	Looking one = {.w = w, .id = x.id};
	look_thread(&one);
	ok(one.r == 0 && one.seen && !one.ready,
	   "a look at an object being made sees it not ready");
	pthread_join(wt, NULL);
	ok(x.r == 0 && x.took >= 300 * MS, "the wait ends once it is ready (%llu ms)",
	   (unsigned long long)(x.took / MS));
	/* the wait alone polls at 100, 150, 225 and 337 ms: the look adds its own call at most */
	ok(fetch_count() - 1 <= 5, "the look and the wait: %u calls", fetch_count() - 1);
	ebs_waiter_free(w);
}

int main(void)
{
	test_batched_and_learned();
	test_wide_bounds();
	test_deadline_and_failures();
	test_batch_size();
	test_looks();
	return tap_done();
}
