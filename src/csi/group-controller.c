/* SPDX-License-Identifier: Apache-2.0 */
/* GroupController: group snapshots, made of one pool snapshot per source volume plus a group
 * record listing them. Member snapshots get names derived from the group's name and their
 * volume, so a retried create (after a timeout or a crash) finds the members it already made.
 * The members are taken one after the other: they are consistent per volume, not across
 * volumes (docs/pool.md). */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

int group_controller_get_capabilities(_unused_ Driver *d, const ProtobufCMessage *req,
				      ProtobufCMessage **ret, _unused_ char **ret_error)
{
	(void)req;
	Csi__V1__GroupControllerGetCapabilitiesResponse *resp =
		xnew0(Csi__V1__GroupControllerGetCapabilitiesResponse, 1);
	csi__v1__group_controller_get_capabilities_response__init(resp);
	Csi__V1__GroupControllerServiceCapability *c =
		xnew0(Csi__V1__GroupControllerServiceCapability, 1);
	csi__v1__group_controller_service_capability__init(c);
	c->type_case = CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	c->rpc = xnew0(Csi__V1__GroupControllerServiceCapability__RPC, 1);
	csi__v1__group_controller_service_capability__rpc__init(c->rpc);
	c->rpc->type =
		CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT;
	resp->capabilities = xnew0(Csi__V1__GroupControllerServiceCapability *, 1);
	resp->capabilities[0] = c;
	resp->n_capabilities = 1;
	*ret = &resp->base;
	return 0;
}

static Csi__V1__VolumeGroupSnapshot *group_to_csi(Driver *d, const PoolGroup *g)
{
	Csi__V1__VolumeGroupSnapshot *gs = xnew0(Csi__V1__VolumeGroupSnapshot, 1);

	csi__v1__volume_group_snapshot__init(gs);
	gs->group_snapshot_id = xstrdup(g->id);
	gs->creation_time = timestamp_new(g->created_ns);
	gs->ready_to_use = true;
	gs->snapshots = xnew0(Csi__V1__Snapshot *, g->n_snapshots);
	for (size_t i = 0; i < g->n_snapshots; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if (pool_snapshot_load(d->pool, g->snapshot_ids[i], &s) < 0) {
			gs->ready_to_use = false; /* a member is missing: damage, pool check says */
			continue;
		}
		gs->snapshots[gs->n_snapshots++] = snapshot_to_csi(s);
	}
	return gs;
}

/* Whether the request's snapshot_ids (if any) are exactly the group's. */
static bool members_match(const PoolGroup *g, char **ids, size_t n)
{
	if (n == 0)
		return true;
	if (n != g->n_snapshots)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (size_t k = 0; k < g->n_snapshots && !found; k++)
			found = strcmp(ids[i], g->snapshot_ids[k]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/* Makes (or finds, on a retry) the member snapshot of one volume. */
static int group_snapshot_member(char **ret_error, Driver *d, const char *group_name,
				 const char *group_id, const Strmap *params, const char *volume_id,
				 char ret_id[POOL_ID_MAX])
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *name = xasprintf("%s/%s", group_name, volume_id);
	PoolSnapshot spec = {.name = name, .source_volume_id = (char *)volume_id};
	CopyMethod method;

	if (pool_volume_load(d->pool, volume_id, &v) < 0)
		return errorf(ret_error, -ENOENT, "source_volume_ids: volume %s not found",
			      volume_id);
	pool_snapshot_id_for_name(name, spec.id);
	strmap_copy(&spec.params, params);
	strmap_set(&spec.params, SNAPSHOT_GROUP_KEY, group_id);
	spec.size = v->size;
	spec.created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;
	int e = pool_snapshot_create(d->pool, &spec, &method);
	strmap_done(&spec.params);
	if (e < 0 && e != -EEXIST)
		return errorf(ret_error, e, "snapshot of volume %s failed: %s", volume_id,
			      strerror(-e));
	memcpy(ret_id, spec.id, POOL_ID_MAX);
	return 0;
}

static bool same_sources(Driver *d, const PoolGroup *g, char **volume_ids, size_t n)
{
	if (g->n_snapshots != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if (pool_snapshot_load(d->pool, g->snapshot_ids[i], &s) < 0 ||
		    strcmp(s->source_volume_id, volume_ids[i]) != 0)
			return false;
	}
	return true;
}

static ProtobufCMessage *create_reply(Driver *d, const PoolGroup *g)
{
	Csi__V1__CreateVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__CreateVolumeGroupSnapshotResponse, 1);
	csi__v1__create_volume_group_snapshot_response__init(resp);
	resp->group_snapshot = group_to_csi(d, g);
	return &resp->base;
}

int group_controller_create_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				     char **ret_error)
{
	const Csi__V1__CreateVolumeGroupSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_group_freep) PoolGroup *existing = NULL;
	PoolGroup g = {};
	Strmap params = {};
	int e;

	if ((e = create_name_check(ret_error, r->name)) < 0)
		return e;
	if (r->n_source_volume_ids == 0)
		return errorf(ret_error, -EINVAL, "source_volume_ids: at least one is required");
	if ((e = snapshot_params_parse(ret_error, (void *const *)r->parameters, r->n_parameters,
				       &params)) < 0)
		goto out;
	if (inflight_holdf(d->inflight, &hold, "group:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateVolumeGroupSnapshot for '%s' is in progress",
			   r->name);
		goto out;
	}
	pool_group_id_for_name(r->name, g.id);
	if (pool_group_load(d->pool, g.id, &existing) == 0) {
		if (!same_sources(d, existing, r->source_volume_ids, r->n_source_volume_ids))
			e = errorf(ret_error, -EEXIST,
				   "group snapshot '%s' exists for other source volumes", r->name);
		else
			*ret = create_reply(d, existing);
		goto out;
	}
	g.name = r->name;
	g.created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;
	g.snapshot_ids = xnew0(char *, r->n_source_volume_ids + 1);
	for (size_t i = 0; i < r->n_source_volume_ids; i++) {
		char id[POOL_ID_MAX];
		if ((e = group_snapshot_member(ret_error, d, r->name, g.id, &params,
					       r->source_volume_ids[i], id)) < 0)
			goto out;
		g.snapshot_ids[g.n_snapshots++] = xstrdup(id);
	}
	e = pool_group_create(d->pool, &g);
	if (e < 0 && e != -EEXIST) {
		e = errorf(ret_error, e, "recording group snapshot '%s' failed: %s", r->name,
			   strerror(-e));
		goto out;
	}
	e = 0;
	log_info("created group snapshot %s (%s) of %zu volumes", g.id, r->name, g.n_snapshots);
	*ret = create_reply(d, &g);
out:
	strv_free(g.snapshot_ids);
	strmap_done(&params);
	return e;
}

int group_controller_delete_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				     char **ret_error)
{
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_group_freep) PoolGroup *g = NULL;

	if (!r->group_snapshot_id || !*r->group_snapshot_id)
		return errorf(ret_error, -EINVAL, "group_snapshot_id: missing");
	if (inflight_holdf(d->inflight, &hold, "groupid:%s", r->group_snapshot_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on group snapshot %s is in progress",
			      r->group_snapshot_id);
	Csi__V1__DeleteVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__DeleteVolumeGroupSnapshotResponse, 1);
	csi__v1__delete_volume_group_snapshot_response__init(resp);
	*ret = &resp->base;
	if (pool_group_load(d->pool, r->group_snapshot_id, &g) < 0)
		return 0; /* gone already */
	if (!members_match(g, r->snapshot_ids, r->n_snapshot_ids))
		return errorf(ret_error, -EINVAL,
			      "snapshot_ids: not the %zu snapshots of group snapshot %s",
			      g->n_snapshots, g->id);
	for (size_t i = 0; i < g->n_snapshots; i++) {
		int e = pool_snapshot_delete(d->pool, g->snapshot_ids[i]);
		if (e < 0 && e != -ENOENT)
			return errorf(ret_error, e, "deleting snapshot %s of group %s failed: %s",
				      g->snapshot_ids[i], g->id, strerror(-e));
	}
	int e = pool_group_delete(d->pool, g->id);
	if (e < 0 && e != -ENOENT)
		return errorf(ret_error, e, "deleting group snapshot %s failed: %s", g->id,
			      strerror(-e));
	log_info("deleted group snapshot %s and its %zu snapshots", g->id, g->n_snapshots);
	return 0;
}

int group_controller_get_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				  char **ret_error)
{
	const Csi__V1__GetVolumeGroupSnapshotRequest *r = (const void *)req;
	_cleanup_(pool_group_freep) PoolGroup *g = NULL;

	if (!r->group_snapshot_id || !*r->group_snapshot_id)
		return errorf(ret_error, -EINVAL, "group_snapshot_id: missing");
	if (pool_group_load(d->pool, r->group_snapshot_id, &g) < 0)
		return errorf(ret_error, -ENOENT, "group snapshot %s not found",
			      r->group_snapshot_id);
	if (!members_match(g, r->snapshot_ids, r->n_snapshot_ids))
		return errorf(ret_error, -EINVAL,
			      "snapshot_ids: not the %zu snapshots of group snapshot %s",
			      g->n_snapshots, g->id);
	Csi__V1__GetVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__GetVolumeGroupSnapshotResponse, 1);
	csi__v1__get_volume_group_snapshot_response__init(resp);
	resp->group_snapshot = group_to_csi(d, g);
	*ret = &resp->base;
	return 0;
}
