/* SPDX-License-Identifier: Apache-2.0 */
/* The SnapshotMetadata service: GetMetadataAllocated and GetMetadataDelta. Both stream: the
 * backend walks the snapshot and hands ranges over one by one; they are sent in messages of at
 * most max_results ranges, each message waited for before the walk goes on, so memory holds one
 * message whatever the volume's size. Ranges are VARIABLE_LENGTH: extents as the walk finds
 * them (data ranges, runs of changed 4 KiB blocks), which FIXED_LENGTH would cut into many
 * more tuples. */
#include <inttypes.h>
#include <string.h>

#include "alloc.h"
#include "csi-util.h"
#include "error-util.h"
#include "log.h"
#include "snapshot-metadata.h"
#include "time-util.h"

/* Ranges in one message when the request says 0, and the most in one whatever it says: 10,000
 * tuples are about 220 KB on the wire, well inside any client's 4 MiB message limit. */
#define RESULTS_DEFAULT 1024
#define RESULTS_MAX 10000
#define DEADLINE_SLACK (50 * USEC_PER_MSEC)

typedef struct Batch {
	const CsiStream *out;
	bool delta;
	uint64_t capacity;
	size_t max;
	Csi__V1__BlockMetadata *items;
	Csi__V1__BlockMetadata **ptrs;
	size_t n;
	size_t messages;
	uint64_t ranges, bytes;
} Batch;

static int batch_send(Batch *b)
{
	Csi__V1__GetMetadataAllocatedResponse allocated;
	Csi__V1__GetMetadataDeltaResponse delta;
	ProtobufCMessage *m;

	/* Both messages have the same fields; each its own descriptor. */
	if (b->delta) {
		csi__v1__get_metadata_delta_response__init(&delta);
		delta.block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		delta.volume_capacity_bytes = (int64_t)b->capacity;
		delta.n_block_metadata = b->n;
		delta.block_metadata = b->ptrs;
		m = &delta.base;
	} else {
		csi__v1__get_metadata_allocated_response__init(&allocated);
		allocated.block_metadata_type = CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH;
		allocated.volume_capacity_bytes = (int64_t)b->capacity;
		allocated.n_block_metadata = b->n;
		allocated.block_metadata = b->ptrs;
		m = &allocated.base;
	}
	int r = b->out->send(m, b->out->userdata);
	b->n = 0;
	if (r == 0)
		b->messages++;
	return r;
}

static int batch_begin(uint64_t volume_size, void *userdata)
{
	Batch *b = userdata;

	b->capacity = volume_size;
	return 0;
}

static int batch_range(uint64_t offset, uint64_t length, void *userdata)
{
	Batch *b = userdata;
	Csi__V1__BlockMetadata *item = &b->items[b->n];

	csi__v1__block_metadata__init(item);
	item->byte_offset = (int64_t)offset;
	item->size_bytes = (int64_t)length;
	b->ptrs[b->n++] = item;
	b->ranges++;
	b->bytes += length;
	return b->n == b->max ? batch_send(b) : 0;
}

static int batch_check(void *userdata)
{
	Batch *b = userdata;
	usec_t deadline = call_deadline();

	if (b->out->cancelled && b->out->cancelled(b->out->userdata))
		return -ECANCELED;
	if (deadline != USEC_INFINITY && now_usec(CLOCK_MONOTONIC) >= deadline)
		return -ETIMEDOUT;
	return 0;
}

/* What both methods share: checks, the walk, the last message. */
static int metadata_stream(Driver *d, bool delta, const char *target, const char *base,
			   int64_t starting_offset, int32_t max_results, const Strmap *secrets,
			   const CsiStream *out, char **ret_error)
{
	const char *target_field = delta ? "target_snapshot_id" : "snapshot_id";
	_cleanup_free_ Csi__V1__BlockMetadata *items = NULL;
	_cleanup_free_ Csi__V1__BlockMetadata **ptrs = NULL;
	BackendRangesDone done = {};
	int e;

	if (delta && (!base || !*base))
		return errorf(ret_error, -EINVAL, "base_snapshot_id: missing");
	if (!target || !*target)
		return errorf(ret_error, -EINVAL, "%s: missing", target_field);
	if (starting_offset < 0)
		return errorf(ret_error, -ERANGE, "starting_offset: %" PRId64 " is negative",
			      starting_offset);
	if (max_results < 0)
		return errorf(ret_error, -EINVAL, "max_results: %" PRId32 " is negative",
			      max_results);

	Batch b = {.out = out, .delta = delta};
	b.max = max_results == 0 ? RESULTS_DEFAULT : MIN((size_t)max_results, RESULTS_MAX);
	b.items = items = xnew0(Csi__V1__BlockMetadata, b.max);
	b.ptrs = ptrs = xnew0(Csi__V1__BlockMetadata *, b.max);
	BackendRangesRequest q = {
		.snapshot_id = target,
		.base_snapshot_id = delta ? base : NULL,
		.secrets = secrets,
		.starting_offset = (uint64_t)starting_offset,
		.begin = batch_begin,
		.range = batch_range,
		.check = batch_check,
		.userdata = &b,
	};
	Backend *backend = backend_default(d->backends);
	usec_t start = now_usec(CLOCK_MONOTONIC);
	if (delta)
		e = BACKEND_CALL(backend, snapshot_delta, &q, &done, ret_error);
	else
		e = BACKEND_CALL(backend, snapshot_allocated, &q, &done, ret_error);
	/* The last ranges; a stream without any range still says the volume's capacity. */
	if (e == 0 && (b.n > 0 || b.messages == 0))
		e = batch_send(&b);
	/* A call whose deadline passed ends as a cancel: the client's gRPC resets the stream at
	 * its deadline, which reaches us a little before our view of the same deadline (the
	 * server's copy of it starts when the request came). A cancel within DEADLINE_SLACK of
	 * the deadline is taken as the deadline. */
	if (e == -ECANCELED && call_deadline() != USEC_INFINITY &&
	    now_usec(CLOCK_MONOTONIC) + DEADLINE_SLACK >= call_deadline())
		e = -ETIMEDOUT;
	if (e == -ECANCELED || e == -ETIMEDOUT) {
		free(*ret_error);
		*ret_error = xasprintf("%s %s: stopped after %zu messages: %s", target_field,
				       target, b.messages,
				       e == -ECANCELED ? "the client cancelled the call"
						       : "the client's deadline passed");
		return e;
	}
	if (e < 0)
		return e;
	unsigned long long ms = (now_usec(CLOCK_MONOTONIC) - start) / 1000;
	if (delta && done.manifests)
		log_info("delta of snapshot %s from %s: %" PRIu64 " ranges, %" PRIu64
			 " bytes in %zu messages; by the store's manifests: %" PRIu64
			 " chunks compared by hash, %" PRIu64 " bytes read and hashed; %llu ms",
			 target, base, b.ranges, b.bytes, b.messages, done.chunks, done.read, ms);
	else if (delta)
		log_info("delta of snapshot %s from %s: %" PRIu64 " ranges, %" PRIu64
			 " bytes in %zu messages; %" PRIu64 " bytes compared, %" PRIu64
			 " shared and %" PRIu64 " in holes skipped%s; %llu ms",
			 target, base, b.ranges, b.bytes, b.messages, done.read, done.shared,
			 done.holes, done.extents ? "" : " (no FIEMAP)", ms);
	else
		log_info("allocated ranges of snapshot %s: %" PRIu64 " ranges, %" PRIu64
			 " bytes in %zu messages; %llu ms",
			 target, b.ranges, b.bytes, b.messages, ms);
	return 0;
}

int snapshot_metadata_allocated(Driver *d, const ProtobufCMessage *req, const CsiStream *out,
				char **ret_error)
{
	const Csi__V1__GetMetadataAllocatedRequest *r = (const void *)req;
	_cleanup_(strmap_done) Strmap secrets = {};

	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	return metadata_stream(d, false, r->snapshot_id, NULL, r->starting_offset, r->max_results,
			       &secrets, out, ret_error);
}

int snapshot_metadata_delta(Driver *d, const ProtobufCMessage *req, const CsiStream *out,
			    char **ret_error)
{
	const Csi__V1__GetMetadataDeltaRequest *r = (const void *)req;
	_cleanup_(strmap_done) Strmap secrets = {};

	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	return metadata_stream(d, true, r->target_snapshot_id, r->base_snapshot_id,
			       r->starting_offset, r->max_results, &secrets, out, ret_error);
}

bool snapshot_metadata_served(Driver *d)
{
	Backend *b = backend_default(d->backends);
	return driver_has_controller(d) && b && b->ops->snapshot_allocated &&
	       b->ops->snapshot_delta;
}
