/* SPDX-License-Identifier: Apache-2.0 */
/* Waiting for EC2 objects to reach a state, in batches: every thread that waits registers the
 * object's id, and one poller thread asks EC2 about all of them in one Describe call (up to
 * max_batch ids), then tells each waiter what it found. A hundred volumes being created share
 * each DescribeVolumes; there is never a poll loop per volume.
 *
 * When to ask is learned per kind of wait ("create", "attach", ...): the poller keeps, for
 * each kind, the last bounds it saw on how long the change takes (the last time a waiter was
 * still not there, the first time it was), and polls a new waiter first between the two, then
 * at the upper bound, then with growing intervals. Waits that fall due within a short window
 * are served by one call. So after a few changes of a kind the poller asks about as often as
 * there are groups of changes, shortly after each is done.
 *
 * Thread-safe; the poller thread starts with the first wait and runs until the waiter is
 * freed. */
#pragma once

#include <stddef.h>

#include "time-util.h"

typedef struct EbsWaiter EbsWaiter;

/* What one Describe call found: the items of the ids asked, in any order. An id that is not
 * among them was not in the reply (gone, or not visible yet). */
typedef struct EbsFound {
	char **ids;   /* the item's id, for each item */
	void **items; /* parsed items, freed with the config's free_item */
	size_t n;
} EbsFound;

/* Fetches ids (n > 0) in one call, bounded by deadline. Returns 0 and fills *ret, or a negative
 * errno with *ret_error (a message naming the call and EC2's code). */
typedef int (*EbsFetchFunc)(void *userdata, char *const *ids, size_t n, usec_t deadline,
			    EbsFound *ret, char **ret_error);

/* Judges what a poll found of a waiter's object (item NULL: not in the reply): 1 when the wait
 * is over (success: it may copy what it needs from item into userdata), 0 to wait on, a
 * negative errno with *ret_error when the wait failed. Called by the poller thread, with the
 * waiter's lock held: quick and without calls. */
typedef int (*EbsCheckFunc)(const void *item, void *userdata, char **ret_error);

typedef struct EbsWaiterConfig {
	const char *name; /* the Describe action, for logs ("DescribeVolumes") */
	EbsFetchFunc fetch;
	void (*free_item)(void *item);
	void *userdata;
	size_t max_batch;     /* ids per call; 0: 200 (the values EC2 takes in one filter) */
	usec_t window;	      /* waits due within this of the first are polled with it; 0: 20 ms */
	usec_t first_guess;   /* the first poll of a kind never seen: after this; 0: 500 ms */
	usec_t retry_base;    /* after the upper bound: base, x1.5 each time, up to retry_cap; */
	usec_t retry_cap;     /*     0: 100 ms and 2 s */
	usec_t fetch_timeout; /* one Describe call at most; 0: 10 s */
	usec_t look_delay;    /* a look falls due this long after it is asked; 0: 10 ms */
} EbsWaiterConfig;

/* A waiter; the poller thread starts with the first wait. Never fails. */
EbsWaiter *ebs_waiter_new(const EbsWaiterConfig *config);
/* Stops the poller; no wait may be running. NULL is a no-op. */
void ebs_waiter_free(EbsWaiter *w);

/* Blocks until check says the wait for id is over, or the deadline (CLOCK_MONOTONIC) passes.
 * kind names the change waited for (static storage), for what the poller learns. Returns 0,
 * check's error, a permanent error of the Describe call (-EACCES, -EPERM, -EINVAL) with its
 * message, or -ETIMEDOUT with *ret_error saying what was last seen (last_seen, may be NULL:
 * filled by check through userdata, read after the wait). */
int ebs_waiter_wait(EbsWaiter *w, const char *id, const char *kind, EbsCheckFunc check,
		    void *userdata, usec_t deadline, char **ret_error);

/* One look at id's object, as the next poll finds it: the look falls due look_delay after it
 * is asked (every look and wait due within the window is served by the same call), and rides
 * along with any poll that starts before. check judges the item (NULL: not in the reply) as for
 * ebs_waiter_wait(), except that its 0 ends the look as well. Returns 0, check's error, a
 * permanent error of the Describe call with its message, or -ETIMEDOUT. Blocks. */
int ebs_waiter_look(EbsWaiter *w, const char *id, EbsCheckFunc check, void *userdata,
		    usec_t deadline, char **ret_error);

typedef struct EbsWaiterStats {
	unsigned long long polls;  /* Describe calls made */
	unsigned long long waits;  /* waits and looks registered */
	unsigned long long failed; /* Describe calls that failed */
} EbsWaiterStats;

void ebs_waiter_stats(EbsWaiter *w, EbsWaiterStats *ret);

/* How the poller times a new wait of kind: the first poll after this long (for tests). */
usec_t ebs_waiter_guess(EbsWaiter *w, const char *kind);
