/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "coalescer.h"
#include "tap.h"

#define WINDOW (150 * USEC_PER_MSEC)
#define MAX_APPLIES 8
#define GiB (UINT64_C(1) << 30)

/* What the backend saw: one record per apply() call. */
typedef struct Applied {
	char *volume_id;
	uint64_t new_size;
	ParamKV *params;
	size_t n_params;
	size_t n_callers;
	usec_t start, end;
} Applied;

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static Applied applied[MAX_APPLIES];
static size_t n_applied;
static int running, max_running; /* concurrent apply() calls of one volume */
static usec_t apply_delay;
static int apply_fail; /* negative errno to return, 0: succeed */
static usec_t t0;

static int backend_apply(void *userdata, const char *volume_id, const CoalescedChange *m,
			 CoalescedResult *ret, char **ret_error)
{
	(void)userdata;
	usec_t start = now_usec(CLOCK_MONOTONIC);

	pthread_mutex_lock(&rec_lock);
	running++;
	max_running = MAX(max_running, running);
	pthread_mutex_unlock(&rec_lock);

	if (apply_delay)
		usleep((useconds_t)apply_delay);

	pthread_mutex_lock(&rec_lock);
	running--;
	if (n_applied < MAX_APPLIES) {
		Applied *a = &applied[n_applied++];
		a->volume_id = xstrdup(volume_id);
		a->new_size = m->new_size;
		a->n_callers = m->n_callers;
		a->params = xnew0(ParamKV, m->n_params);
		for (size_t i = 0; i < m->n_params; i++) {
			a->params[i].key = xstrdup(m->params[i].key);
			a->params[i].value = xstrdup(m->params[i].value);
		}
		a->n_params = m->n_params;
		a->start = start - t0;
		a->end = now_usec(CLOCK_MONOTONIC) - t0;
	}
	pthread_mutex_unlock(&rec_lock);

	if (apply_fail) {
		*ret_error = xstrdup("pool: no space left for volume vol-1");
		return apply_fail;
	}
	/* What a backend answers: the size after the change, and whether the node must act. */
	*ret = (CoalescedResult){.size = m->new_size ?: GiB,
				 .node_expansion_required = m->new_size > 0};
	return 0;
}

static void reset(void)
{
	for (size_t i = 0; i < n_applied; i++) {
		free(applied[i].volume_id);
		param_kv_free_many(applied[i].params, applied[i].n_params);
	}
	memset(applied, 0, sizeof(applied));
	n_applied = 0;
	running = max_running = 0;
	apply_delay = 0;
	apply_fail = 0;
	t0 = now_usec(CLOCK_MONOTONIC);
}

/* The merged value of key in apply number i, or NULL. */
static const char *applied_param(size_t i, const char *key)
{
	for (size_t j = 0; j < applied[i].n_params; j++)
		if (strcmp(applied[i].params[j].key, key) == 0)
			return applied[i].params[j].value;
	return NULL;
}

/* One CSI caller on its own thread. */
typedef struct Caller {
	Coalescer *c;
	const char *volume_id;
	uint64_t new_size;
	ParamKV params[4];
	size_t n_params;
	usec_t delay;	/* after t0 */
	usec_t timeout; /* the caller's deadline, from its submit; 0: none */
	pthread_t thread;
	int r;
	CoalescedResult result;
	char *error;
	usec_t returned; /* after t0 */
} Caller;

static void *caller_run(void *arg)
{
	Caller *k = arg;
	usec_t now = now_usec(CLOCK_MONOTONIC);

	if (t0 + k->delay > now)
		usleep((useconds_t)(t0 + k->delay - now));
	CoalesceRequest req = {
		.volume_id = k->volume_id,
		.new_size = k->new_size,
		.params = k->params,
		.n_params = k->n_params,
		.deadline = k->timeout ? now_usec(CLOCK_MONOTONIC) + k->timeout : USEC_INFINITY,
	};
	k->r = coalescer_submit(k->c, &req, &k->result, &k->error);
	k->returned = now_usec(CLOCK_MONOTONIC) - t0;
	return NULL;
}

static void run(Caller *callers, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pthread_create(&callers[i].thread, NULL, caller_run, &callers[i]);
	for (size_t i = 0; i < n; i++)
		pthread_join(callers[i].thread, NULL);
}

static void callers_done(Caller *callers, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(callers[i].error);
}

#define P(k, v) ((ParamKV){(char *)(k), (char *)(v)})

int main(void)
{
	_cleanup_(coalescer_freep) Coalescer *c = coalescer_new(&(CoalescerConfig){
		.window = WINDOW,
		.apply = backend_apply,
	});

	{
		reset();
		Caller k[] = {
			{.c = c, .volume_id = "vol-1", .new_size = 2 * GiB},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "4000")},
			 .n_params = 1,
			 .delay = 40 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r, 0, "expand: success");
		is_int(k[1].r, 0, "modify within the window: success");
		is_int(n_applied, 1, "expand + modify within the window: one backend change");
		is_int(applied[0].new_size, 2 * GiB, "the change carries the new size");
		is_str(applied_param(0, "iops"), "4000", "and the new iops");
		is_int(applied[0].n_callers, 2, "two callers merged");
		ok(applied[0].start >= WINDOW, "applied once the window ended (at %llu us)",
		   (unsigned long long)applied[0].start);
		ok(k[0].returned >= applied[0].end && k[1].returned >= applied[0].end,
		   "both callers returned after the change was applied");
		ok(k[0].result.size == 2 * GiB && k[1].result.size == 2 * GiB &&
			   k[0].result.node_expansion_required &&
			   k[1].result.node_expansion_required,
		   "both callers get the backend's answer to the merged change");
		callers_done(k, 2);
	}
	{
		reset();
		Caller k[] = {
			{.c = c, .volume_id = "vol-1", .new_size = 2 * GiB},
			{.c = c,
			 .volume_id = "vol-1",
			 .new_size = 3 * GiB,
			 .delay = 40 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r, 0, "first size: success");
		is_int(k[1].r, -EBUSY, "conflicting size: -EBUSY (ABORTED)");
		is_str(k[1].error,
		       "capacity_range.required_bytes: conflicts with 2147483648 requested by a "
		       "concurrent call",
		       "the message names the field and the other value");
		ok(k[1].returned < WINDOW, "the conflicting caller fails at once (%llu us)",
		   (unsigned long long)k[1].returned);
		is_int(n_applied, 1, "one backend change");
		is_int(applied[0].new_size, 2 * GiB, "with the first size");
		is_int(applied[0].n_callers, 1, "the failed caller was not merged");
		callers_done(k, 2);
	}
	{
		reset();
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("throughput", "250")},
			 .n_params = 1},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("throughput", "500")},
			 .n_params = 1,
			 .delay = 30 * USEC_PER_MSEC},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "4000")},
			 .n_params = 1,
			 .delay = 60 * USEC_PER_MSEC},
		};
		run(k, 3);
		is_int(k[1].r, -EBUSY, "conflicting throughput: -EBUSY (ABORTED)");
		is_str(k[1].error, "throughput: conflicts with 250 requested by a concurrent call",
		       "the message names the parameter and the value already merged");
		is_int(k[0].r, 0, "the first caller succeeds");
		is_int(k[2].r, 0, "a later, compatible caller succeeds");
		is_int(n_applied, 1, "one backend change");
		is_str(applied_param(0, "throughput"), "250", "with throughput 250");
		is_str(applied_param(0, "iops"), "4000", "and iops 4000");
		callers_done(k, 3);
	}
	{
		reset();
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "4000")},
			 .n_params = 1},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "5000")},
			 .n_params = 1,
			 .delay = WINDOW + 100 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r, 0, "first request: success");
		is_int(k[1].r, 0, "a request after the window: success, no conflict");
		is_int(n_applied, 2, "requests spaced beyond the window: two backend changes");
		is_str(applied_param(0, "iops"), "4000", "the first with its value");
		is_str(applied_param(1, "iops"), "5000", "the second with its value");
		callers_done(k, 2);
	}
	{
		reset();
		apply_fail = -ENOSPC;
		Caller k[] = {
			{.c = c, .volume_id = "vol-1", .new_size = 5 * GiB},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("type", "io2")},
			 .n_params = 1,
			 .delay = 40 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(n_applied, 1, "failing change: applied once");
		is_int(k[0].r, -ENOSPC, "the first caller gets the backend's error");
		is_int(k[1].r, -ENOSPC, "so does the second");
		is_str(k[0].error, "pool: no space left for volume vol-1", "with its message");
		is_str(k[1].error, "pool: no space left for volume vol-1", "both of them");
		callers_done(k, 2);
	}
	{
		reset();
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .new_size = 4 * GiB,
			 .params = {P("iops", "4000")},
			 .n_params = 1},
			{.c = c,
			 .volume_id = "vol-1",
			 .new_size = 4 * GiB,
			 .params = {P("IOPS", "4000")},
			 .n_params = 1,
			 .delay = 40 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r, 0, "a retried request: first succeeds");
		is_int(k[1].r, 0, "the same values again (key spelled otherwise): success");
		is_int(n_applied, 1, "one backend change");
		is_int(applied[0].n_params, 1, "iops once in the merged change");
		is_int(applied[0].n_callers, 2, "both callers merged");
		callers_done(k, 2);
	}
	{
		reset();
		apply_delay = 200 * USEC_PER_MSEC;
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "4000")},
			 .n_params = 1},
			/* arrives while the first batch is in apply() (WINDOW .. WINDOW + 200 ms)
			 */
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "6000")},
			 .n_params = 1,
			 .delay = WINDOW + 50 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r, 0, "first batch: success");
		is_int(k[1].r, 0, "a request arriving during apply: success, no conflict");
		is_int(n_applied, 2, "it went into the next batch");
		is_str(applied_param(1, "iops"), "6000", "which carries only its value");
		is_int(max_running, 1, "batches of one volume never run at once");
		ok(applied[1].start >= applied[0].end, "the second started after the first ended");
		callers_done(k, 2);
	}
	{
		reset();
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("tagSpecification_1", "env=prod")},
			 .n_params = 1},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("tagSpecification_1", "team=db"), P("iops", "3000")},
			 .n_params = 2,
			 .delay = 30 * USEC_PER_MSEC},
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("tagSpecification_3", "env=dev")},
			 .n_params = 1,
			 .delay = 60 * USEC_PER_MSEC},
		};
		run(k, 3);
		is_int(k[0].r, 0, "tag env=prod: success");
		is_int(k[1].r, 0, "another tag under the same N: merged, success");
		is_int(k[2].r, -EBUSY, "another value for tag env: -EBUSY (ABORTED)");
		is_str(k[2].error,
		       "tagSpecification_3: tag 'env' conflicts with 'prod' requested by a "
		       "concurrent call",
		       "the message names the parameter, the tag and the value merged");
		is_int(n_applied, 1, "one backend change");
		is_str(applied_param(0, "tagSpecification_1"), "env=prod", "tags renumbered: 1");
		is_str(applied_param(0, "tagSpecification_2"), "team=db", "tags renumbered: 2");
		is_str(applied_param(0, "iops"), "3000", "with the other parameter");
		callers_done(k, 3);
	}
	{
		reset();
		apply_delay = 100 * USEC_PER_MSEC;
		Caller k[] = {
			{.c = c,
			 .volume_id = "vol-1",
			 .params = {P("iops", "4000")},
			 .n_params = 1},
			{.c = c,
			 .volume_id = "vol-2",
			 .params = {P("iops", "5000")},
			 .n_params = 1,
			 .delay = 20 * USEC_PER_MSEC},
		};
		run(k, 2);
		is_int(k[0].r + k[1].r, 0, "two volumes: both succeed");
		is_int(n_applied, 2, "one change per volume");
		ok(applied[0].start < applied[1].end && applied[1].start < applied[0].end,
		   "different volumes are applied at the same time");
		callers_done(k, 2);
	}
	{
		reset();
		ParamKV dup[] = {P("iops", "4000"), P("IOPS", "5000")};
		_cleanup_free_ char *error = NULL;
		CoalesceRequest req = {.volume_id = "vol-1", .params = dup, .n_params = 2};
		is_int(coalescer_submit(c, &req, NULL, &error), -EINVAL,
		       "one request with two values for a key: -EINVAL");
		is_str(error, "IOPS: given twice with different values", "message for it");
		is_int(n_applied, 0, "nothing applied");

		CoalesceRequest empty = {.volume_id = "vol-1"};
		usec_t before = now_usec(CLOCK_MONOTONIC);
		CoalescedResult untouched = {.size = 7};
		is_int(coalescer_submit(c, &empty, &untouched, NULL), 0,
		       "a request without changes: success");
		is_int(untouched.size, 7, "no result without a change");
		ok(now_usec(CLOCK_MONOTONIC) - before < WINDOW, "at once");
		is_int(n_applied, 0, "without a backend change");
	}
	reset();
	/* The window never outlives a caller's deadline: `volplugctl -t 500ms volume expand`
	 * against the default 2 s window must reach the backend in time. */
	{
		_cleanup_(coalescer_freep) Coalescer *slow = coalescer_new(&(CoalescerConfig){
			.window = COALESCER_WINDOW_DEFAULT,
			.apply = backend_apply,
		});
		reset();
		Caller k[] = {
			{.c = slow,
			 .volume_id = "vol-d",
			 .new_size = 2 * GiB,
			 .timeout = 500 * USEC_PER_MSEC},
		};
		run(k, 1);
		is_int(k[0].r, 0, "expand with a 500 ms deadline, 2 s window: success");
		is_int(n_applied, 1, "one backend change");
		ok(n_applied == 1 && applied[0].start < 300 * USEC_PER_MSEC,
		   "applied at %llu us: half the caller's time, not the 2 s window",
		   (unsigned long long)(n_applied ? applied[0].start : 0));
		ok(k[0].returned < 500 * USEC_PER_MSEC,
		   "the caller returned within its deadline "
		   "(%llu us)",
		   (unsigned long long)k[0].returned);
		callers_done(k, 1);

		/* a caller that joins with a short deadline closes the batch another opened */
		reset();
		Caller j[] = {
			{.c = slow, .volume_id = "vol-d", .new_size = 3 * GiB},
			{.c = slow,
			 .volume_id = "vol-d",
			 .params = {P("iops", "5000")},
			 .n_params = 1,
			 .delay = 40 * USEC_PER_MSEC,
			 .timeout = 200 * USEC_PER_MSEC},
		};
		run(j, 2);
		is_int(j[0].r + j[1].r, 0, "both callers: success");
		is_int(n_applied, 1, "merged into one backend change");
		ok(n_applied == 1 && applied[0].n_callers == 2, "with both callers");
		ok(n_applied == 1 && applied[0].start >= 130 * USEC_PER_MSEC &&
			   applied[0].start < 240 * USEC_PER_MSEC,
		   "applied at %llu us: when the joiner had half its 200 ms left",
		   (unsigned long long)(n_applied ? applied[0].start : 0));
		ok(j[1].returned < 240 * USEC_PER_MSEC, "the joiner returned within its deadline");
		callers_done(j, 2);
		reset();
	}
	return tap_done();
}
