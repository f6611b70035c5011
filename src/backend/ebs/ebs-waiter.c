/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ebs-waiter.h"
#include "error-util.h"
#include "log.h"

#define MAX_BATCH_DEFAULT 200
#define WINDOW_DEFAULT (20 * USEC_PER_MSEC)
#define FIRST_GUESS_DEFAULT (500 * USEC_PER_MSEC)
#define RETRY_BASE_DEFAULT (100 * USEC_PER_MSEC)
#define RETRY_CAP_DEFAULT (2 * USEC_PER_SEC)
#define FETCH_TIMEOUT_DEFAULT (10 * USEC_PER_SEC)
#define LOOK_DELAY_DEFAULT (10 * USEC_PER_MSEC)
#define KINDS_MAX 8

/* What the poller knows of how long a kind of change takes: more than lo, at most hi (0:
 * unknown, the change took longer than it last did), from the latest polls. */
typedef struct Kind {
	const char *name;
	bool known;
	usec_t lo, hi;
} Kind;

/* One thread's wait. Lives on that thread's stack; the fields below `check` are guarded by
 * the waiter's lock. */
typedef struct Wait {
	struct Wait *next;
	const char *id;
	Kind *kind; /* NULL: a look (ebs_waiter_look()), which teaches nothing */
	EbsCheckFunc check;
	void *userdata;
	usec_t start;
	usec_t next_due;  /* when the poller should ask about it next */
	usec_t last_miss; /* elapsed at the last poll that found it not there yet; 0: none */
	unsigned late;	  /* polls past the upper bound */
	bool done;
	int result;
	char *error;
} Wait;

struct EbsWaiter {
	EbsWaiterConfig cfg;

	pthread_mutex_t lock;
	pthread_cond_t wake; /* the poller: a new wait, or stop */
	pthread_cond_t done; /* the waiting threads: some wait ended */
	/* guarded by lock: */
	Wait *waits;
	Kind kinds[KINDS_MAX];
	size_t n_kinds;
	bool started, stopping;
	unsigned fail_streak; /* Describe calls failed in a row */
	EbsWaiterStats stats;
	pthread_t thread;
};

static void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
}

/* Waits on c until woken or until (CLOCK_MONOTONIC). Hold w->lock. */
static void cond_wait_until(EbsWaiter *w, pthread_cond_t *c, usec_t until)
{
	if (until == USEC_INFINITY) {
		pthread_cond_wait(c, &w->lock);
		return;
	}
	struct timespec ts = {.tv_sec = (time_t)(until / USEC_PER_SEC),
			      .tv_nsec = (long)(until % USEC_PER_SEC * NSEC_PER_USEC)};
	pthread_cond_timedwait(c, &w->lock, &ts);
}

EbsWaiter *ebs_waiter_new(const EbsWaiterConfig *config)
{
	EbsWaiter *w = xnew0(EbsWaiter, 1);

	w->cfg = *config;
	if (!w->cfg.max_batch)
		w->cfg.max_batch = MAX_BATCH_DEFAULT;
	if (!w->cfg.window)
		w->cfg.window = WINDOW_DEFAULT;
	if (!w->cfg.first_guess)
		w->cfg.first_guess = FIRST_GUESS_DEFAULT;
	if (!w->cfg.retry_base)
		w->cfg.retry_base = RETRY_BASE_DEFAULT;
	if (!w->cfg.retry_cap)
		w->cfg.retry_cap = RETRY_CAP_DEFAULT;
	if (!w->cfg.fetch_timeout)
		w->cfg.fetch_timeout = FETCH_TIMEOUT_DEFAULT;
	if (!w->cfg.look_delay)
		w->cfg.look_delay = LOOK_DELAY_DEFAULT;
	pthread_mutex_init(&w->lock, NULL);
	cond_init_monotonic(&w->wake);
	cond_init_monotonic(&w->done);
	return w;
}

void ebs_waiter_free(EbsWaiter *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->wake);
	bool started = w->started;
	pthread_mutex_unlock(&w->lock);
	if (started)
		pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->done);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void ebs_waiter_stats(EbsWaiter *w, EbsWaiterStats *ret)
{
	pthread_mutex_lock(&w->lock);
	*ret = w->stats;
	pthread_mutex_unlock(&w->lock);
}

/* The rest, up to the poller, is called with the lock held. */

static Kind *kind_get(EbsWaiter *w, const char *name)
{
	for (size_t i = 0; i < w->n_kinds; i++)
		if (strcmp(w->kinds[i].name, name) == 0)
			return &w->kinds[i];
	if (w->n_kinds == KINDS_MAX)
		return &w->kinds[KINDS_MAX - 1]; /* shared by the rest: learns less, works */
	w->kinds[w->n_kinds] = (Kind){.name = name};
	return &w->kinds[w->n_kinds++];
}

/* When to ask first about a change of kind k, from its start. */
static usec_t kind_guess(const EbsWaiter *w, const Kind *k)
{
	if (!k->known)
		return w->cfg.first_guess;
	if (k->hi == 0)
		return k->lo + k->lo / 4; /* it took longer than last time: a little more */
	return k->lo + (k->hi - k->lo) / 2;
}

usec_t ebs_waiter_guess(EbsWaiter *w, const char *kind)
{
	pthread_mutex_lock(&w->lock);
	usec_t g = kind_guess(w, kind_get(w, kind));
	pthread_mutex_unlock(&w->lock);
	return g;
}

static usec_t backoff(const EbsWaiter *w, unsigned n)
{
	usec_t d = w->cfg.retry_base;
	for (unsigned i = 0; i < n && d < w->cfg.retry_cap; i++)
		d += d / 2;
	return MIN(d, w->cfg.retry_cap);
}

/* After a poll at t found the wait's object not there yet. */
static void reschedule(EbsWaiter *w, Wait *x, usec_t t)
{
	usec_t elapsed = t - x->start;

	x->last_miss = elapsed;
	if (x->kind->known && x->kind->hi > elapsed + 4 * w->cfg.window)
		/* Far below the upper bound (the bounds are wide): halfway there first. A wait
		 * served at the bound is late by the width of the bounds; a hit halfway narrows
		 * them for the next ones. */
		x->next_due = t + (x->kind->hi - elapsed) / 2;
	else if (x->kind->known && x->kind->hi > elapsed + w->cfg.window)
		x->next_due = x->start + x->kind->hi;
	else
		x->next_due = t + backoff(w, x->late++);
}

/* What one poll taught about a kind. */
typedef struct Lesson {
	bool hit, miss, hit_first; /* some wait done, some not, some done at its first poll */
	usec_t min_hit, max_miss;
} Lesson;

static void lesson_apply(Kind *k, const Lesson *l)
{
	if (l->miss) {
		if (k->known && k->hi && l->max_miss >= k->hi)
			k->hi = 0; /* it takes longer now */
		k->lo = MAX(k->lo, l->max_miss);
	}
	if (l->hit) {
		/* A hit late says nothing (the poll was late); only a miss past it raises hi. */
		k->hi = k->hi ? MIN(k->hi, l->min_hit) : l->min_hit;
		if (k->lo >= k->hi)
			k->lo = k->hi * 3 / 4;
		if (l->hit_first)
			/* Nothing said it was not there yet: it may be quicker now than lo says. */
			k->lo = k->lo * 31 / 32;
	}
	k->known = k->known || l->hit;
}

static void wait_finish(EbsWaiter *w, Wait *x, int result, char *error)
{
	x->done = true;
	x->result = result;
	x->error = error;
	pthread_cond_broadcast(&w->done);
}

/* The ids the next poll asks about: every waiting object, the first due first. */
static size_t batch_collect(EbsWaiter *w, char ***ret)
{
	char **ids = xnew0(char *, w->cfg.max_batch + 1);
	size_t n = 0;

	while (n < w->cfg.max_batch) {
		Wait *best = NULL;
		for (Wait *x = w->waits; x; x = x->next) {
			bool taken = false;
			for (size_t i = 0; i < n && !taken; i++)
				taken = strcmp(ids[i], x->id) == 0;
			if (!x->done && !taken && (!best || x->next_due < best->next_due))
				best = x;
		}
		if (!best)
			break;
		ids[n++] = xstrdup(best->id);
	}
	*ret = ids;
	return n;
}

static bool in_batch(char *const *ids, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

static const void *found_item(const EbsFound *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->ids[i], id) == 0)
			return f->items[i];
	return NULL;
}

/* A reply came: each wait registered before the call began is judged on it. */
static void poll_judge(EbsWaiter *w, char *const *ids, size_t n, const EbsFound *found,
		       usec_t began, usec_t t)
{
	Lesson lessons[KINDS_MAX] = {};

	for (Wait *x = w->waits; x; x = x->next) {
		if (x->done || x->start > began || !in_batch(ids, n, x->id))
			continue;
		char *error = NULL;
		int r = x->check(found_item(found, x->id), x->userdata, &error);
		if (!x->kind) {
			wait_finish(w, x, MIN(r, 0), error);
			continue;
		}
		Lesson *l = &lessons[x->kind - w->kinds];
		if (r == 0) {
			if (x->next_due > t + w->cfg.window)
				/* asked early, along with others: its plan stands */
				x->last_miss = t - x->start;
			else
				reschedule(w, x, t);
			l->max_miss = l->miss ? MAX(l->max_miss, x->last_miss) : x->last_miss;
			l->miss = true;
			continue;
		}
		usec_t elapsed = t - x->start;
		log_debug("%s %s: %s after %llu ms (last seen not yet at %llu ms)", x->kind->name,
			  x->id, r > 0 ? "done" : "failed",
			  (unsigned long long)(elapsed / USEC_PER_MSEC),
			  (unsigned long long)(x->last_miss / USEC_PER_MSEC));
		if (r > 0) {
			l->min_hit = l->hit ? MIN(l->min_hit, elapsed) : elapsed;
			l->hit = true;
			l->hit_first = l->hit_first || x->last_miss == 0;
		}
		wait_finish(w, x, r < 0 ? r : 0, error);
	}
	for (size_t k = 0; k < w->n_kinds; k++)
		lesson_apply(&w->kinds[k], &lessons[k]);
}

/* The call failed: a permanent failure ends every wait of the batch, another is tried again
 * a little later. */
static void poll_failed(EbsWaiter *w, char *const *ids, size_t n, int r, const char *error,
			usec_t began, usec_t t)
{
	bool permanent = r == -EACCES || r == -EPERM || r == -EINVAL || r == -EOPNOTSUPP;

	w->stats.failed++;
	w->fail_streak++;
	log_debug("%s of %zu ids failed: %s%s", w->cfg.name, n, error,
		  permanent ? "" : "; asking again later");
	for (Wait *x = w->waits; x; x = x->next) {
		if (x->done || x->start > began || !in_batch(ids, n, x->id))
			continue;
		if (permanent)
			wait_finish(w, x, r, xstrdup(error));
		else
			x->next_due = t + backoff(w, w->fail_streak);
	}
}

/* The next poll time: the first wait due, and those due within the window after it. */
static usec_t poll_time(EbsWaiter *w)
{
	usec_t first = USEC_INFINITY, last;

	for (Wait *x = w->waits; x; x = x->next)
		if (!x->done)
			first = MIN(first, x->next_due);
	if (first == USEC_INFINITY)
		return first;
	last = first;
	for (Wait *x = w->waits; x; x = x->next)
		if (!x->done && x->next_due <= first + w->cfg.window)
			last = MAX(last, x->next_due);
	return last;
}

static void poll_once(EbsWaiter *w)
{
	EbsFound found = {};
	char **ids = NULL, *error = NULL;

	size_t n = batch_collect(w, &ids);
	usec_t began = now_usec(CLOCK_MONOTONIC);
	w->stats.polls++;
	log_debug("%s of %zu id(s)", w->cfg.name, n);
	pthread_mutex_unlock(&w->lock);
	int r = w->cfg.fetch(w->cfg.userdata, ids, n, began + w->cfg.fetch_timeout, &found, &error);
	pthread_mutex_lock(&w->lock);
	usec_t t = now_usec(CLOCK_MONOTONIC);
	if (r < 0)
		poll_failed(w, ids, n, r, error ?: strerror(-r), began, t);
	else {
		w->fail_streak = 0;
		/* What the reply shows was true at some moment of the call: its middle. */
		poll_judge(w, ids, n, &found, began, began + (t - began) / 2);
	}
	for (size_t i = 0; i < found.n; i++) {
		free(found.ids[i]);
		w->cfg.free_item(found.items[i]);
	}
	free(found.ids);
	free(found.items);
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	free(error);
}

static void *poller(void *userdata)
{
	EbsWaiter *w = userdata;

	pthread_mutex_lock(&w->lock);
	while (!w->stopping) {
		usec_t when = poll_time(w);
		if (when == USEC_INFINITY || now_usec(CLOCK_MONOTONIC) < when) {
			cond_wait_until(w, &w->wake, when);
			continue;
		}
		poll_once(w);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void waits_remove(EbsWaiter *w, Wait *x)
{
	for (Wait **p = &w->waits; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			return;
		}
}

static int wait_for(EbsWaiter *w, const char *id, const char *kind, EbsCheckFunc check,
		    void *userdata, usec_t deadline, char **ret_error)
{
	Wait x = {.id = id, .check = check, .userdata = userdata};
	int r;

	pthread_mutex_lock(&w->lock);
	if (!w->started) {
		if (pthread_create(&w->thread, NULL, poller, w) != 0)
			abort();
		w->started = true;
	}
	x.kind = kind ? kind_get(w, kind) : NULL;
	x.start = now_usec(CLOCK_MONOTONIC);
	x.next_due = x.start + (kind ? kind_guess(w, x.kind) : w->cfg.look_delay);
	/* a guess past the deadline would leave the wait unasked: ask once before it */
	if (deadline != USEC_INFINITY && deadline > x.start && x.next_due >= deadline)
		x.next_due = x.start + (deadline - x.start) / 2;
	x.next = w->waits;
	w->waits = &x;
	w->stats.waits++;
	pthread_cond_signal(&w->wake);
	while (!x.done && now_usec(CLOCK_MONOTONIC) < deadline)
		cond_wait_until(w, &w->done, deadline);
	waits_remove(w, &x);
	pthread_mutex_unlock(&w->lock);
	if (!x.done) {
		if (ret_error)
			errorf(ret_error, -ETIMEDOUT, "%s %s: still waiting after %.1f s (%s)",
			       kind ?: "look at", id,
			       (double)(now_usec(CLOCK_MONOTONIC) - x.start) / USEC_PER_SEC,
			       deadline == USEC_INFINITY ? "no deadline" : "deadline reached");
		return -ETIMEDOUT;
	}
	r = x.result;
	if (r < 0 && ret_error) {
		free(*ret_error);
		*ret_error = x.error;
	} else
		free(x.error);
	return r;
}

int ebs_waiter_wait(EbsWaiter *w, const char *id, const char *kind, EbsCheckFunc check,
		    void *userdata, usec_t deadline, char **ret_error)
{
	return wait_for(w, id, kind, check, userdata, deadline, ret_error);
}

int ebs_waiter_look(EbsWaiter *w, const char *id, EbsCheckFunc check, void *userdata,
		    usec_t deadline, char **ret_error)
{
	return wait_for(w, id, NULL, check, userdata, deadline, ret_error);
}
