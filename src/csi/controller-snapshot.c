/* SPDX-License-Identifier: Apache-2.0 */
/* CreateSnapshot, DeleteSnapshot, ListSnapshots. */
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

#define LIST_MAX_DEFAULT 1000

Csi__V1__Snapshot *snapshot_to_csi(const PoolSnapshot *s)
{
	Csi__V1__Snapshot *snap = xnew0(Csi__V1__Snapshot, 1);
	csi__v1__snapshot__init(snap);
	snap->size_bytes = (int64_t)s->size;
	snap->snapshot_id = xstrdup(s->id);
	snap->source_volume_id = xstrdup(s->source_volume_id);
	snap->creation_time = timestamp_new(s->created_ns);
	snap->ready_to_use = true; /* a pool snapshot is whole once it exists */
	snap->group_snapshot_id = xstrdup(strmap_get(&s->params, SNAPSHOT_GROUP_KEY) ?: "");
	return snap;
}

/* VolumeSnapshotClass parameters the EBS driver knows and the pool can keep: tags. The
 * external-snapshotter's own csi.storage.k8s.io/ keys are ignored. */
int snapshot_params_parse(char **ret_error, void *const *entries, size_t n, Strmap *ret)
{
	_cleanup_free_ ParamKV *kv = pbmap_to_kv(entries, n);
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].key, *v = kv[i].value;
		if (strncasecmp(k, "csi.storage.k8s.io/", 19) == 0)
			continue;
		if (strncasecmp(k, "tagSpecification_", 17) != 0)
			return errorf(ret_error, -EINVAL,
				      "parameters: '%s' is not a snapshot parameter (want "
				      "tagSpecification_N)",
				      k);
		if (!strchr(v, '=') || v[0] == '=')
			return errorf(ret_error, -EINVAL,
				      "parameters: %s: want key=value, got '%s'", k, v);
		strmap_set(ret, k, v);
	}
	return 0;
}

static ProtobufCMessage *create_reply(const PoolSnapshot *s)
{
	Csi__V1__CreateSnapshotResponse *resp = xnew0(Csi__V1__CreateSnapshotResponse, 1);
	csi__v1__create_snapshot_response__init(resp);
	resp->snapshot = snapshot_to_csi(s);
	return &resp->base;
}

int controller_create_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			       char **ret_error)
{
	const Csi__V1__CreateSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_snapshot_freep) PoolSnapshot *existing = NULL;
	_cleanup_(pool_volume_freep) PoolVolume *source = NULL;
	PoolSnapshot spec = {};
	CopyMethod method;
	int e;

	if ((e = create_name_check(ret_error, r->name)) < 0)
		return e;
	if (!r->source_volume_id || !*r->source_volume_id)
		return errorf(ret_error, -EINVAL, "source_volume_id: missing");
	if ((e = snapshot_params_parse(ret_error, (void *const *)r->parameters, r->n_parameters,
				       &spec.params)) < 0)
		goto out;
	if (inflight_holdf(d->inflight, &hold, "snap:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateSnapshot for '%s' is already in progress",
			   r->name);
		goto out;
	}
	pool_snapshot_id_for_name(r->name, spec.id);
	if (pool_snapshot_load(d->pool, spec.id, &existing) == 0) {
		if (strcmp(existing->source_volume_id, r->source_volume_id) != 0)
			e = errorf(ret_error, -EEXIST,
				   "snapshot '%s' exists for another volume (%s)", r->name,
				   existing->source_volume_id);
		else
			*ret = create_reply(existing);
		goto out;
	}
	if (pool_volume_load(d->pool, r->source_volume_id, &source) < 0) {
		e = errorf(ret_error, -ENOENT, "source_volume_id: volume %s not found",
			   r->source_volume_id);
		goto out;
	}
	spec.name = r->name;
	spec.source_volume_id = r->source_volume_id;
	spec.size = source->size;
	spec.created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;
	usec_t start = now_usec(CLOCK_MONOTONIC);
	e = pool_snapshot_create(d->pool, &spec, &method);
	if (e == -EEXIST && pool_snapshot_load(d->pool, spec.id, &existing) == 0) {
		e = 0; /* another process made it meanwhile */
		*ret = create_reply(existing);
		goto out;
	}
	if (e < 0) {
		e = errorf(ret_error, e, "snapshot '%s' of volume %s failed: %s", r->name,
			   r->source_volume_id, strerror(-e));
		goto out;
	}
	log_info("created snapshot %s (%s) of volume %s by %s in %llu ms", spec.id, r->name,
		 r->source_volume_id, copy_method_to_string(method),
		 (unsigned long long)((now_usec(CLOCK_MONOTONIC) - start) / 1000));
	*ret = create_reply(&spec);
out:
	strmap_done(&spec.params);
	return e;
}

int controller_delete_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			       char **ret_error)
{
	const Csi__V1__DeleteSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;

	if (!r->snapshot_id || !*r->snapshot_id)
		return errorf(ret_error, -EINVAL, "snapshot_id: missing");
	if (inflight_holdf(d->inflight, &hold, "snapid:%s", r->snapshot_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on snapshot %s is in progress",
			      r->snapshot_id);
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	if (pool_snapshot_load(d->pool, r->snapshot_id, &s) == 0 &&
	    strmap_get(&s->params, SNAPSHOT_GROUP_KEY))
		return errorf(ret_error, -ENOTEMPTY,
			      "snapshot %s belongs to group snapshot %s: delete the group",
			      r->snapshot_id, strmap_get(&s->params, SNAPSHOT_GROUP_KEY));
	int e = pool_snapshot_delete(d->pool, r->snapshot_id);
	if (e < 0 && e != -ENOENT)
		return errorf(ret_error, e, "deleting snapshot %s failed: %s", r->snapshot_id,
			      strerror(-e));
	if (e == 0)
		log_info("deleted snapshot %s", r->snapshot_id);
	Csi__V1__DeleteSnapshotResponse *resp = xnew0(Csi__V1__DeleteSnapshotResponse, 1);
	csi__v1__delete_snapshot_response__init(resp);
	*ret = &resp->base;
	return 0;
}

static bool snapshot_selected(const Csi__V1__ListSnapshotsRequest *r, const PoolSnapshot *s)
{
	if (r->source_volume_id && *r->source_volume_id &&
	    strcmp(s->source_volume_id, r->source_volume_id) != 0)
		return false;
	return true;
}

int controller_list_snapshots(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			      char **ret_error)
{
	const Csi__V1__ListSnapshotsRequest *r = (const void *)req;
	char **ids = NULL;
	size_t n = 0, start = 0;

	if (r->max_entries < 0)
		return errorf(ret_error, -EINVAL, "max_entries: must not be negative");
	if (page_token_check(r->starting_token, pool_snapshot_id_valid) < 0)
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListSnapshots gave",
			      r->starting_token);
	Csi__V1__ListSnapshotsResponse *resp = xnew0(Csi__V1__ListSnapshotsResponse, 1);
	csi__v1__list_snapshots_response__init(resp);
	*ret = &resp->base;

	if (r->snapshot_id && *r->snapshot_id) {
		/* One snapshot by ID: absent (or not an ID of ours) means an empty list. */
		if (pool_snapshot_id_valid(r->snapshot_id)) {
			size_t cap = 0;
			strv_push(&ids, &n, &cap, xstrdup(r->snapshot_id));
		}
	} else {
		int e = pool_snapshot_list(d->pool, &ids, &n);
		if (e < 0)
			return errorf(ret_error, e, "listing the pool failed: %s", strerror(-e));
	}
	if (r->starting_token && *r->starting_token)
		while (start < n && strcmp(ids[start], r->starting_token) < 0)
			start++;
	size_t max = r->max_entries > 0 ? (size_t)r->max_entries : LIST_MAX_DEFAULT;
	resp->entries = xnew0(Csi__V1__ListSnapshotsResponse__Entry *, MIN(max, n - start));
	size_t i = start;
	for (; i < n && resp->n_entries < max; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if (pool_snapshot_load(d->pool, ids[i], &s) < 0 || !snapshot_selected(r, s))
			continue;
		Csi__V1__ListSnapshotsResponse__Entry *e =
			xnew0(Csi__V1__ListSnapshotsResponse__Entry, 1);
		csi__v1__list_snapshots_response__entry__init(e);
		e->snapshot = snapshot_to_csi(s);
		resp->entries[resp->n_entries++] = e;
	}
	if (i < n)
		resp->next_token = xstrdup(ids[i]);
	strv_free(ids);
	return 0;
}
