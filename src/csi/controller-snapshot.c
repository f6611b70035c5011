/* SPDX-License-Identifier: Apache-2.0 */
/* CreateSnapshot, DeleteSnapshot, ListSnapshots. */
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

Csi__V1__Snapshot *snapshot_to_csi(const BackendSnapshot *s)
{
	Csi__V1__Snapshot *snap = xnew0(Csi__V1__Snapshot, 1);
	csi__v1__snapshot__init(snap);
	snap->size_bytes = (int64_t)s->size;
	snap->snapshot_id = xstrdup(s->id);
	snap->source_volume_id = xstrdup(s->source_volume_id);
	snap->creation_time = timestamp_new(s->created_ns);
	snap->ready_to_use = s->ready;
	snap->group_snapshot_id = xstrdup(s->group_id ?: "");
	return snap;
}

/* The class's parameter location: "local" or "store", into *ret_location; which of them a
 * backend takes is its own to say. The value stays the request's. */
static int location_parse(const char *v, const char **ret_location, char **ret_error)
{
	if (strcmp(v, "local") != 0 && strcmp(v, "store") != 0)
		return errorf(ret_error, -EINVAL,
			      "parameters: location: want local (beside the volume) or store (the "
			      "snapshot store), got '%s'",
			      v);
	*ret_location = v;
	return 0;
}

/* VolumeSnapshotClass parameters the EBS driver knows and the backends keep: tags, and where
 * the snapshot goes (location). The external-snapshotter's own csi.storage.k8s.io/ keys are
 * ignored. */
int snapshot_params_parse(void *const *entries, size_t n, Strmap *ret, const char **ret_location,
			  char **ret_error)
{
	_cleanup_free_ ParamKV *kv = NULL;
	size_t tags = 0;

	/* the limits first: no key is looked at when there are too many */
	if (n > VOLUME_PARAMS_MAX_KEYS)
		return errorf(ret_error, -EINVAL, "parameters: wanted at most %d, got %zu",
			      VOLUME_PARAMS_MAX_KEYS, n);
	kv = pbmap_to_kv(entries, n);
	for (size_t i = 0; i < n; i++)
		if (strncasecmp(kv[i].key, "tagSpecification_", 17) == 0)
			tags++;
	if (tags > VOLUME_PARAMS_MAX_TAGS)
		return errorf(ret_error, -EINVAL,
			      "parameters: tagSpecification_N: wanted at most %d tags, got %zu",
			      VOLUME_PARAMS_MAX_TAGS, tags);
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].key, *v = kv[i].value;
		if (strncasecmp(k, "csi.storage.k8s.io/", 19) == 0)
			continue;
		if (strcmp(k, "location") == 0) {
			int e = location_parse(v, ret_location, ret_error);
			if (e < 0)
				return e;
			continue;
		}
		if (strncasecmp(k, "tagSpecification_", 17) != 0)
			return errorf(ret_error, -EINVAL,
				      "parameters: '%s' is not a snapshot parameter (want "
				      "tagSpecification_N or location)",
				      k);
		if (!strchr(v, '=') || v[0] == '=')
			return errorf(ret_error, -EINVAL,
				      "parameters: %s: want key=value, got '%s'", k, v);
		strmap_set(ret, k, v);
	}
	return 0;
}

static ProtobufCMessage *create_reply(const BackendSnapshot *s)
{
	Csi__V1__CreateSnapshotResponse *resp = xnew0(Csi__V1__CreateSnapshotResponse, 1);
	csi__v1__create_snapshot_response__init(resp);
	resp->snapshot = snapshot_to_csi(s);
	return &resp->base;
}

/* A snapshot of that name exists: the same request gets it back, another one ALREADY_EXISTS. */
static int create_compare(const Csi__V1__CreateSnapshotRequest *r, const BackendSnapshot *existing,
			  char **ret_error)
{
	if (!existing->id) /* the backend found it incompatible and said why */
		return -EEXIST;
	if (strcmp(existing->source_volume_id, r->source_volume_id) != 0)
		return errorf(ret_error, -EEXIST, "snapshot '%s' exists for another volume (%s)",
			      r->name, existing->source_volume_id);
	return 0;
}

int controller_create_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			       char **ret_error)
{
	const Csi__V1__CreateSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(strmap_done) Strmap secrets = {};
	const char *location = NULL;
	BackendSnapshot s = {};
	Strmap params = {};
	int e;

	if ((e = create_name_check(r->name, ret_error)) < 0)
		return e;
	if (!r->source_volume_id || !*r->source_volume_id)
		return errorf(ret_error, -EINVAL, "source_volume_id: missing");
	if ((e = snapshot_params_parse((void *const *)r->parameters, r->n_parameters, &params,
				       &location, ret_error)) < 0)
		goto out;
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	if (inflight_holdf(d->inflight, &hold, "snap:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateSnapshot for '%s' is already in progress",
			   r->name);
		goto out;
	}
	BackendCreateSnapshot c = {
		.name = r->name,
		.source_volume_id = r->source_volume_id,
		.params = &params,
		.location = location,
		.secrets = &secrets,
	};
	Backend *b = backend_default(d->backends);
	usec_t start = now_usec(CLOCK_MONOTONIC);
	e = BACKEND_CALL(b, create_snapshot, &c, &s, ret_error);
	if (e == -EEXIST)
		e = create_compare(r, &s, ret_error);
	else if (e == 0)
		log_info("created snapshot %s (%s) of volume %s by %s in %llu ms", s.id, r->name,
			 r->source_volume_id, s.copy_method ?: "copy",
			 (unsigned long long)((now_usec(CLOCK_MONOTONIC) - start) / 1000));
	if (e == 0)
		*ret = create_reply(&s);
out:
	backend_snapshot_done(&s);
	strmap_done(&params);
	return e;
}

int controller_delete_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			       char **ret_error)
{
	const Csi__V1__DeleteSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(strmap_done) Strmap secrets = {};
	BackendDeleted gone = {};

	if (!r->snapshot_id || !*r->snapshot_id)
		return errorf(ret_error, -EINVAL, "snapshot_id: missing");
	if (inflight_holdf(d->inflight, &hold, "snapid:%s", r->snapshot_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on snapshot %s is in progress",
			      r->snapshot_id);
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	Backend *b = backend_default(d->backends);
	BackendRef ref = {.id = r->snapshot_id, .secrets = &secrets};
	int e = BACKEND_CALL(b, delete_snapshot, &ref, &gone, ret_error);
	if (e < 0)
		return e;
	if (gone.found)
		log_info("deleted snapshot %s", r->snapshot_id);
	if (gone.leftover)
		log_warning("snapshot %s: %s", r->snapshot_id, gone.leftover);
	backend_deleted_done(&gone);
	Csi__V1__DeleteSnapshotResponse *resp = xnew0(Csi__V1__DeleteSnapshotResponse, 1);
	csi__v1__delete_snapshot_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int controller_list_snapshots(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			      char **ret_error)
{
	const Csi__V1__ListSnapshotsRequest *r = (const void *)req;
	_cleanup_(strmap_done) Strmap secrets = {};
	BackendSnapshotList l = {};

	if (r->max_entries < 0)
		return errorf(ret_error, -EINVAL, "max_entries: must not be negative");
	BackendListRequest q = {
		.starting_token = r->starting_token,
		.max_entries = (size_t)r->max_entries,
		.source_volume_id = r->source_volume_id,
		.snapshot_id = r->snapshot_id,
		.secrets = &secrets,
	};
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	Backend *b = backend_default(d->backends);
	int e = BACKEND_CALL(b, list_snapshots, &q, &l, ret_error);
	if (e < 0)
		return e;
	Csi__V1__ListSnapshotsResponse *resp = xnew0(Csi__V1__ListSnapshotsResponse, 1);
	csi__v1__list_snapshots_response__init(resp);
	resp->entries = xnew0(Csi__V1__ListSnapshotsResponse__Entry *, l.n_snapshots);
	for (size_t i = 0; i < l.n_snapshots; i++) {
		Csi__V1__ListSnapshotsResponse__Entry *entry =
			xnew0(Csi__V1__ListSnapshotsResponse__Entry, 1);
		csi__v1__list_snapshots_response__entry__init(entry);
		entry->snapshot = snapshot_to_csi(&l.snapshots[i]);
		resp->entries[resp->n_entries++] = entry;
	}
	resp->next_token = TAKE_PTR(l.next_token);
	backend_snapshot_list_done(&l);
	*ret = &resp->base;
	return 0;
}
