/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "macro.h"

/* Per-key in-flight tracking: a second call for a key that is already being served is answered
 * ABORTED at once instead of queueing behind the first. Keys are plain strings chosen by the
 * handler: "create:NAME", "vol:ID", "pub:VOL:NODE", "snap:NAME". A hash set under one mutex;
 * begin and end are O(1) on average and never block on anything but that mutex. */
typedef struct Inflight Inflight;

/* A new, empty set. Never fails (aborts on OOM). */
Inflight *inflight_new(void);
/* Frees the set and any keys still held. No other thread may be using it. */
void inflight_free(Inflight *in);
DEFINE_TRIVIAL_CLEANUP_FUNC(Inflight *, inflight_free);

/* Marks key as in flight (the key is copied). Returns 0 when the caller now holds it, -EBUSY
 * when another call holds it (answer ABORTED). */
int inflight_begin(Inflight *in, const char *key);
/* Ends a hold taken with inflight_begin(); a key that is not held is ignored. */
void inflight_end(Inflight *in, const char *key);
/* Number of keys currently held. */
size_t inflight_count(Inflight *in);

/* A hold that ends when it goes out of scope:
 *     _cleanup_(inflight_releasep) InflightHold *h = NULL;
 *     r = inflight_hold(d->inflight, key, &h);
 *     if (r < 0)
 *             return errorf(ret_error, r, "an operation on volume %s is in progress", id);  */
typedef struct InflightHold InflightHold;

/* Like inflight_begin(); on success *ret owns the hold. Returns -EBUSY when already held. */
int inflight_hold(Inflight *in, const char *key, InflightHold **ret);
/* As inflight_hold() with the key built from a format ("pub:%s:%s"). */
int inflight_holdf(Inflight *in, InflightHold **ret, const char *fmt, ...) _printf_(3, 4);
/* Ends the hold and frees it; NULL is a no-op. Always returns NULL. */
InflightHold *inflight_release(InflightHold *h);

static inline void inflight_releasep(InflightHold **h)
{
	*h = inflight_release(*h);
}
