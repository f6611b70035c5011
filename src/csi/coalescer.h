/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "params.h"
#include "time-util.h"

/* Expand + modify coalescing, as the AWS EBS driver does it: ControllerExpandVolume and
 * ControllerModifyVolume calls for one volume that arrive within a window are merged into ONE
 * backend change. Each caller blocks until that change is applied and gets its result; a
 * caller whose value conflicts with one already merged (another size, another value for the
 * same parameter, another value for the same tag key) fails alone with -EBUSY (ABORTED: the
 * request itself is fine, the concurrent one is in its way; a retry after it succeeds).
 *
 * Timing: the first request for a volume opens a batch and starts the window; requests that
 * arrive before the window ends join it; when it ends the batch closes and is applied, and a
 * request arriving from then on opens the next batch. Batches of one volume are applied one
 * after another, never at once; batches of different volumes are independent. The window
 * never outlives a caller: a request with a deadline closes its batch once half the time it
 * had left when it arrived is gone, so that the backend change starts within its deadline.
 *
 * Threads: the caller that opened a batch sleeps out the window and runs apply() on its own
 * thread; the others wait on a condition variable. No thread of its own: nothing to start or
 * stop, and every caller is a worker thread that would block for the answer anyway. */
typedef struct Coalescer Coalescer;

#define COALESCER_WINDOW_DEFAULT (2 * USEC_PER_SEC)

/* The merged change handed to apply(): the new size (0: unchanged) and the union of the
 * callers' parameters, one entry per key, with tags renumbered tagSpecification_1..N. The
 * keys are those the callers sent (check them with volume_params_check_mutable() before
 * coalescing); the strings live until apply() returns. */
typedef struct CoalescedChange {
	uint64_t new_size;
	const ParamKV *params;
	size_t n_params;
	size_t n_callers; /* how many requests were merged */
} CoalescedChange;

/* What the backend answered to a change, which every caller of its batch gets. */
typedef struct CoalescedResult {
	uint64_t size; /* the volume's size after it */
	bool node_expansion_required;
} CoalescedResult;

/* Applies one merged change to the backend; runs without any coalescer lock held. Returns 0 and
 * *ret, or a negative errno, which every caller of the batch gets, with a message in *ret_error
 * (malloc'ed, optional). */
typedef int (*CoalescerApply)(void *userdata, const char *volume_id, const CoalescedChange *merged,
			      CoalescedResult *ret, char **ret_error);

typedef struct CoalescerConfig {
	usec_t window; /* 0: COALESCER_WINDOW_DEFAULT */
	CoalescerApply apply;
	void *userdata;
} CoalescerConfig;

/* One caller's request: size 0 means "no resize"; params are borrowed, keys and values
 * non-NULL. */
typedef struct CoalesceRequest {
	const char *volume_id;
	usec_t deadline; /* CLOCK_MONOTONIC, the caller's (call_deadline()); 0 or USEC_INFINITY:
			  * none */
	uint64_t new_size;
	const ParamKV *params;
	size_t n_params;
} CoalesceRequest;

/* A new coalescer. Never fails. */
Coalescer *coalescer_new(const CoalescerConfig *config);
/* Frees it. No request may be in progress. */
void coalescer_free(Coalescer *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Coalescer *, coalescer_free);

/* Merges req into the volume's open batch (or opens one) and blocks until the batch is
 * applied: up to the window plus the apply time, plus the apply time of a previous batch of
 * the same volume still running. Returns 0 when the change was applied, with apply()'s result
 * in *ret (may be NULL); the window ends early for a request with a deadline; -EBUSY when req
 * conflicts with a request already merged (only this caller fails; "iops: conflicts with 4000
 * requested by a concurrent call"); or apply()'s error. A request with nothing to change returns 0
 * at once, *ret untouched. *ret_error is set on failure only (caller frees); it may be NULL. */
int coalescer_submit(Coalescer *c, const CoalesceRequest *req, CoalescedResult *ret,
		     char **ret_error);
