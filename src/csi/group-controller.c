/* SPDX-License-Identifier: Apache-2.0 */
/* GroupController: group snapshots, one snapshot per source volume, made, found and deleted
 * by the default backend (the pool's: src/backend/pool/pool-snapshot.c). */
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

static Csi__V1__VolumeGroupSnapshot *group_to_csi(const BackendGroup *g)
{
	Csi__V1__VolumeGroupSnapshot *gs = xnew0(Csi__V1__VolumeGroupSnapshot, 1);

	csi__v1__volume_group_snapshot__init(gs);
	gs->group_snapshot_id = xstrdup(g->id);
	gs->creation_time = timestamp_new(g->created_ns);
	gs->ready_to_use = g->ready;
	gs->snapshots = xnew0(Csi__V1__Snapshot *, g->n_snapshots);
	for (size_t i = 0; i < g->n_snapshots; i++)
		gs->snapshots[gs->n_snapshots++] = snapshot_to_csi(&g->snapshots[i]);
	return gs;
}

/* A group of that name exists: the same request (the same source volumes, in order, each
 * member there) gets it back, another one ALREADY_EXISTS. */
static int create_compare(const Csi__V1__CreateVolumeGroupSnapshotRequest *r,
			  const BackendGroup *existing, char **ret_error)
{
	bool same = existing->ready && existing->n_snapshots == r->n_source_volume_ids;

	for (size_t i = 0; same && i < r->n_source_volume_ids; i++)
		same = strcmp(existing->snapshots[i].source_volume_id, r->source_volume_ids[i]) ==
		       0;
	if (!same)
		return errorf(ret_error, -EEXIST,
			      "group snapshot '%s' exists for other source volumes", r->name);
	return 0;
}

static ProtobufCMessage *create_reply(const BackendGroup *g)
{
	Csi__V1__CreateVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__CreateVolumeGroupSnapshotResponse, 1);
	csi__v1__create_volume_group_snapshot_response__init(resp);
	resp->group_snapshot = group_to_csi(g);
	return &resp->base;
}

int group_controller_create_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				     char **ret_error)
{
	const Csi__V1__CreateVolumeGroupSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendGroup g = {};
	Strmap params = {};
	const char *location = NULL;
	int e;

	if ((e = create_name_check(r->name, ret_error)) < 0)
		return e;
	if (r->n_source_volume_ids == 0)
		return errorf(ret_error, -EINVAL, "source_volume_ids: at least one is required");
	if ((e = snapshot_params_parse((void *const *)r->parameters, r->n_parameters, &params,
				       &location, ret_error)) < 0)
		goto out;
	if (inflight_holdf(d->inflight, &hold, "group:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateVolumeGroupSnapshot for '%s' is in progress",
			   r->name);
		goto out;
	}
	BackendCreateGroup c = {
		.name = r->name,
		.volume_ids = r->source_volume_ids,
		.n_volume_ids = r->n_source_volume_ids,
		.params = &params,
		.location = location,
	};
	Backend *b = backend_default(d->backends);
	e = BACKEND_CALL(b, create_group, &c, &g, ret_error);
	if (e == -EEXIST)
		e = create_compare(r, &g, ret_error);
	else if (e == 0)
		log_info("created group snapshot %s (%s) of %zu volumes", g.id, r->name,
			 g.n_snapshots);
	if (e == 0)
		*ret = create_reply(&g);
out:
	backend_group_done(&g);
	strmap_done(&params);
	return e;
}

int group_controller_delete_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				     char **ret_error)
{
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendDeleted gone = {};

	if (!r->group_snapshot_id || !*r->group_snapshot_id)
		return errorf(ret_error, -EINVAL, "group_snapshot_id: missing");
	if (inflight_holdf(d->inflight, &hold, "groupid:%s", r->group_snapshot_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on group snapshot %s is in progress",
			      r->group_snapshot_id);
	BackendGroupRequest q = {
		.id = r->group_snapshot_id,
		.snapshot_ids = r->snapshot_ids,
		.n_snapshot_ids = r->n_snapshot_ids,
	};
	Backend *b = backend_default(d->backends);
	int e = BACKEND_CALL(b, delete_group, &q, &gone, ret_error);
	if (e < 0)
		return e;
	if (gone.found)
		log_info("deleted group snapshot %s and its %zu snapshots", r->group_snapshot_id,
			 gone.n_members);
	backend_deleted_done(&gone);
	Csi__V1__DeleteVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__DeleteVolumeGroupSnapshotResponse, 1);
	csi__v1__delete_volume_group_snapshot_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int group_controller_get_snapshot(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				  char **ret_error)
{
	const Csi__V1__GetVolumeGroupSnapshotRequest *r = (const void *)req;
	BackendGroup g = {};

	if (!r->group_snapshot_id || !*r->group_snapshot_id)
		return errorf(ret_error, -EINVAL, "group_snapshot_id: missing");
	BackendGroupRequest q = {
		.id = r->group_snapshot_id,
		.snapshot_ids = r->snapshot_ids,
		.n_snapshot_ids = r->n_snapshot_ids,
	};
	Backend *b = backend_default(d->backends);
	int e = BACKEND_CALL(b, get_group, &q, &g, ret_error);
	if (e < 0)
		return e;
	Csi__V1__GetVolumeGroupSnapshotResponse *resp =
		xnew0(Csi__V1__GetVolumeGroupSnapshotResponse, 1);
	csi__v1__get_volume_group_snapshot_response__init(resp);
	resp->group_snapshot = group_to_csi(&g);
	backend_group_done(&g);
	*ret = &resp->base;
	return 0;
}
