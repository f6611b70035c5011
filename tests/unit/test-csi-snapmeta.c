/* SPDX-License-Identifier: Apache-2.0 */
/* The SnapshotMetadata handlers on a backend that makes up its ranges: the checks before the
 * backend, replies of at most max_results ranges each with the capacity, one reply when there
 * is no range, and the walk stopped when the client is gone. No socket, no disk. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "csi.pb-c.h"
#include "driver.h"
#include "snapshot-metadata.h"
#include "tap.h"

#define CAPACITY (1ULL << 30)

/* A backend with n ranges of 4 KiB every 64 KiB, from the request's starting offset on. */
typedef struct Ranged {
	Backend base;
	uint64_t n;
	uint64_t emitted; /* ranges handed over by the last walk */
	uint64_t checked;
	const char *last_target, *last_base;
} Ranged;

static int ranged_walk(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
		       char **ret_error)
{
	Ranged *f = (Ranged *)b;
	(void)ret_error;
	f->emitted = f->checked = 0;
	f->last_target = r->snapshot_id;
	f->last_base = r->base_snapshot_id;
	int e = r->begin(CAPACITY, r->userdata);
	for (uint64_t i = 0; e == 0 && i < f->n; i++) {
		if (r->check && (e = r->check(r->userdata)) < 0)
			break;
		f->checked++;
		uint64_t off = i * 65536;
		if (off + 4096 <= r->starting_offset)
			continue;
		if ((e = r->range(off, 4096, r->userdata)) < 0)
			break;
		f->emitted++;
	}
	if (e < 0)
		return e;
	*ret = (BackendRangesDone){.volume_size = CAPACITY};
	return 0;
}

static const BackendOps ranged_ops = {
	.name = "ranged",
	.snapshot_allocated = ranged_walk,
	.snapshot_delta = ranged_walk,
};

static const BackendOps bare_ops = {.name = "bare"};

/* The replies a stream sent, checked as they come. */
typedef struct Sent {
	size_t messages, ranges;
	size_t most; /* the most ranges in one reply */
	bool same;   /* every reply VARIABLE_LENGTH with the capacity */
	int64_t last_end;
	bool ordered;
	size_t fail_after; /* > 0: send() fails once that many went */
	bool cancelled;
} Sent;

static int sent_take(const ProtobufCMessage *m, void *userdata)
{
	Sent *s = userdata;
	size_t n;
	Csi__V1__BlockMetadata **items;
	int type;
	int64_t cap;

	if (s->fail_after > 0 && s->messages == s->fail_after)
		return -ECANCELED;
	if (m->descriptor == &csi__v1__get_metadata_delta_response__descriptor) {
		const Csi__V1__GetMetadataDeltaResponse *r = (const void *)m;
		n = r->n_block_metadata, items = r->block_metadata;
		type = r->block_metadata_type, cap = r->volume_capacity_bytes;
	} else {
		const Csi__V1__GetMetadataAllocatedResponse *r = (const void *)m;
		n = r->n_block_metadata, items = r->block_metadata;
		type = r->block_metadata_type, cap = r->volume_capacity_bytes;
	}
	s->messages++;
	s->ranges += n;
	s->most = MAX(s->most, n);
	s->same &=
		type == CSI__V1__BLOCK_METADATA_TYPE__VARIABLE_LENGTH && cap == (int64_t)CAPACITY;
	for (size_t i = 0; i < n; i++) {
		s->ordered &= items[i]->byte_offset >= s->last_end && items[i]->size_bytes > 0;
		s->last_end = items[i]->byte_offset + items[i]->size_bytes;
	}
	return 0;
}

static bool sent_cancelled(void *userdata)
{
	return ((Sent *)userdata)->cancelled;
}

static int allocated(Backend *b, const char *id, int64_t start, int32_t max, Sent *s,
		     char **ret_error)
{
	Backend *list[] = {b, NULL};
	Driver d = {.mode = DRIVER_MODE_ALL, .backends = list};
	Csi__V1__GetMetadataAllocatedRequest r;
	CsiStream out = {.send = sent_take, .cancelled = sent_cancelled, .userdata = s};

	csi__v1__get_metadata_allocated_request__init(&r);
	r.snapshot_id = (char *)id;
	r.starting_offset = start;
	r.max_results = max;
	s->same = s->ordered = true;
	s->last_end = 0;
	return csi_call_stream(&d, snapshot_metadata_allocated, &r.base, &out, ret_error);
}

static int delta(Backend *b, const char *base, const char *target, int64_t start, Sent *s,
		 char **ret_error)
{
	Backend *list[] = {b, NULL};
	Driver d = {.mode = DRIVER_MODE_ALL, .backends = list};
	Csi__V1__GetMetadataDeltaRequest r;
	CsiStream out = {.send = sent_take, .cancelled = sent_cancelled, .userdata = s};

	csi__v1__get_metadata_delta_request__init(&r);
	r.base_snapshot_id = (char *)base;
	r.target_snapshot_id = (char *)target;
	r.starting_offset = start;
	s->same = s->ordered = true;
	s->last_end = 0;
	return csi_call_stream(&d, snapshot_metadata_delta, &r.base, &out, ret_error);
}

static void test_batches(void)
{
	Ranged f = {.base.ops = &ranged_ops, .n = 2500};
	char *error = NULL;
	Sent s = {};

	int r = allocated(&f.base, "snap-1", 0, 1000, &s, &error);
	ok(r == 0 && s.messages == 3 && s.ranges == 2500 && s.most == 1000 && s.same && s.ordered,
	   "max_results 1000: 2500 ranges in 3 replies of at most 1000, each VARIABLE_LENGTH with "
	   "the capacity (%zu replies, %zu ranges, %zu at most)",
	   s.messages, s.ranges, s.most);
	s = (Sent){};
	r = allocated(&f.base, "snap-1", 0, 0, &s, &error);
	ok(r == 0 && s.messages == 3 && s.most == 1024, "max_results 0: 1024 a reply (%zu at most)",
	   s.most);
	f.n = 25000;
	s = (Sent){};
	r = allocated(&f.base, "snap-1", 0, 1000000, &s, &error);
	ok(r == 0 && s.most == 10000 && s.messages == 3 && s.ranges == 25000,
	   "max_results 1000000: at most 10000 a reply all the same (%zu at most)", s.most);
	f.n = 0;
	s = (Sent){};
	r = allocated(&f.base, "snap-1", 0, 0, &s, &error);
	ok(r == 0 && s.messages == 1 && s.ranges == 0 && s.same,
	   "no range: one reply, which says the capacity (%zu replies)", s.messages);
	f.n = 100;
	s = (Sent){};
	r = delta(&f.base, "snap-a", "snap-b", 0, &s, &error);
	ok(r == 0 && s.ranges == 100 && s.same && f.last_base &&
		   strcmp(f.last_base, "snap-a") == 0 && strcmp(f.last_target, "snap-b") == 0,
	   "delta: base and target handed to the backend as named");
	free(error);
}

static void test_client_gone(void)
{
	Ranged f = {.base.ops = &ranged_ops, .n = 5000};
	char *error = NULL;
	Sent s = {.fail_after = 1};

	int r = allocated(&f.base, "snap-1", 0, 10, &s, &error);
	/* The second reply (ranges 11-20) fails at the 20th range: nothing after it is walked. */
	ok(r == -ECANCELED && f.emitted == 19 && f.checked == 20 && s.messages == 1,
	   "a send that fails stops the walk at once (%d, %llu ranges walked of 5000)", r,
	   (unsigned long long)f.checked);
	ok(error && strstr(error, "snapshot_id snap-1: stopped after 1 messages: the client "
				  "cancelled the call"),
	   "and says so: %s", error ?: "(none)");
	free(error);
	error = NULL;

	s = (Sent){.cancelled = true};
	r = allocated(&f.base, "snap-1", 0, 10, &s, &error);
	ok(r == -ECANCELED && f.checked == 0 && s.messages == 0,
	   "a client gone before the first range: nothing walked, nothing sent (%d)", r);
	free(error);
}

static void test_checks_before_the_backend(void)
{
	Ranged f = {.base.ops = &ranged_ops, .n = 10};
	Backend bare = {.ops = &bare_ops};
	struct {
		int r;
		const char *want;
	} cases[6];
	char *errors[6] = {};
	Sent s = {};

	f.last_target = "untouched";
	cases[0].r = allocated(&f.base, "", 0, 0, &s, &errors[0]);
	cases[0].want = "snapshot_id: missing";
	cases[1].r = delta(&f.base, "", "snap-b", 0, &s, &errors[1]);
	cases[1].want = "base_snapshot_id: missing";
	cases[2].r = delta(&f.base, "snap-a", NULL, 0, &s, &errors[2]);
	cases[2].want = "target_snapshot_id: missing";
	cases[3].r = allocated(&f.base, "snap-1", -1, 0, &s, &errors[3]);
	cases[3].want = "starting_offset: -1 is negative";
	cases[4].r = allocated(&f.base, "snap-1", 0, -2, &s, &errors[4]);
	cases[4].want = "max_results: -2 is negative";
	cases[5].r = allocated(&bare, "snap-1", 0, 0, &s, &errors[5]);
	cases[5].want = "the bare backend has no snapshot_allocated";
	int codes[] = {-EINVAL, -EINVAL, -EINVAL, -ERANGE, -EINVAL, -EOPNOTSUPP};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		ok(cases[i].r == codes[i] && errors[i] && strcmp(errors[i], cases[i].want) == 0,
		   "refused: %s (%d)", errors[i] ?: "(no message)", cases[i].r);
		free(errors[i]);
	}
	ok(strcmp(f.last_target, "untouched") == 0 && s.messages == 0,
	   "nothing reached the backend, nothing was sent");
}

int main(void)
{
	test_batches();
	test_client_gone();
	test_checks_before_the_backend();
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
