/* SPDX-License-Identifier: Apache-2.0 */
/* Node service: each handler checks what the CSI spec asks of the request, holds the volume's
 * in-flight key, turns the request into backend.h's plain request for the backend that serves
 * the volume (volume_backend()), which proves every path and object it acts on, and builds the
 * reply. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "csi-util.h"
#include "log.h"
#include "node.h"
#include "ownership.h"
#include "parse-util.h"

static int volume_id_check(const char *id, char **ret_error)
{
	if (!id || !*id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	return 0;
}

static int hold_volume(Driver *d, const char *id, InflightHold **ret, char **ret_error)
{
	if (inflight_holdf(d->inflight, ret, "node:%s", id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress", id);
	return 0;
}

static bool capability_block(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

int node_stage_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		      char **ret_error)
{
	const Csi__V1__NodeStageVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(strmap_done) Strmap ctx = {}, publish_ctx = {}, secrets = {};
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->staging_target_path || !*r->staging_target_path)
		return errorf(ret_error, -EINVAL, "staging_target_path: missing");
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &ctx);
	Backend *b = volume_backend(d, r->volume_id, &ctx);
	if ((e = capability_check(b, r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	bool block = capability_block(r->volume_capability);
	if ((e = hold_volume(d, r->volume_id, &hold, ret_error)) < 0)
		return e;
	pbmap_to_strmap((void *const *)r->publish_context, r->n_publish_context, &publish_ctx);
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	BackendStage s = {
		.volume_id = r->volume_id,
		.staging_path = r->staging_target_path,
		.mount_flags = block ? NULL : r->volume_capability->mount->mount_flags,
		.n_mount_flags = block ? 0 : r->volume_capability->mount->n_mount_flags,
		.volume_context = &ctx,
		.publish_context = &publish_ctx,
		.secrets = &secrets,
	};
	backend_access_from(r->volume_capability, &s.access);
	if ((e = BACKEND_CALL(b, stage, &s, NULL, ret_error)) < 0)
		return e;
	log_info("volume %s staged at %s%s", r->volume_id, r->staging_target_path,
		 block ? " (raw block)" : "");
	Csi__V1__NodeStageVolumeResponse *resp = xnew0(Csi__V1__NodeStageVolumeResponse, 1);
	csi__v1__node_stage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int node_unstage_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			char **ret_error)
{
	const Csi__V1__NodeUnstageVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->staging_target_path || !*r->staging_target_path)
		return errorf(ret_error, -EINVAL, "staging_target_path: missing");
	if ((e = hold_volume(d, r->volume_id, &hold, ret_error)) < 0)
		return e;
	BackendUnstage u = {.volume_id = r->volume_id, .staging_path = r->staging_target_path};
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if ((e = BACKEND_CALL(b, unstage, &u, NULL, ret_error)) < 0)
		return e;
	log_info("volume %s unstaged from %s", r->volume_id, r->staging_target_path);
	Csi__V1__NodeUnstageVolumeResponse *resp = xnew0(Csi__V1__NodeUnstageVolumeResponse, 1);
	csi__v1__node_unstage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* fsGroup on a new publish, before the pod sees it: the policy the backend asks for, else the
 * volume's own (StorageClass parameter, carried in the context), else the daemon's. */
typedef struct PublishOwnership {
	const char *volume_id;
	const Strmap *context;
	const Driver *driver;
	gid_t gid;
} PublishOwnership;

static int publish_ownership(int root_fd, bool read_only, const char *policy, void *userdata,
			     char **ret_error)
{
	const PublishOwnership *o = userdata;

	int e = volume_ownership_apply_fd(o->volume_id, root_fd, o->gid, read_only,
					  policy ?: strmap_get(o->context, "fsGroupChangePolicy"),
					  o->driver->fs_group_policy);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: giving it to group %u failed: %s",
			      o->volume_id, (unsigned)o->gid, strerror(-e));
	return 0;
}

/* volume_mount_group, checked before anything is mounted. */
static int publish_group(const Csi__V1__NodePublishVolumeRequest *r, gid_t *ret, char **ret_error)
{
	const char *group = r->volume_capability->mount
				    ? r->volume_capability->mount->volume_mount_group
				    : NULL;
	uint32_t gid = OWNERSHIP_GID_NONE;

	if (group && *group && (parse_uint32(group, &gid) < 0 || gid == OWNERSHIP_GID_NONE))
		return errorf(ret_error, -EINVAL,
			      "volume_capability.mount.volume_mount_group: '%s' is not a group id",
			      group);
	*ret = gid;
	return 0;
}

int node_publish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			char **ret_error)
{
	const Csi__V1__NodePublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(strmap_done) Strmap ctx = {}, publish_ctx = {}, secrets = {};
	PublishOwnership own = {
		.volume_id = r->volume_id,
		.context = &ctx,
		.driver = d,
		.gid = OWNERSHIP_GID_NONE,
	};
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->target_path || !*r->target_path)
		return errorf(ret_error, -EINVAL, "target_path: missing");
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &ctx);
	Backend *b = volume_backend(d, r->volume_id, &ctx);
	if ((e = capability_check(b, r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	bool block = capability_block(r->volume_capability);
	if (!block && (e = publish_group(r, &own.gid, ret_error)) < 0)
		return e;
	if ((e = hold_volume(d, r->volume_id, &hold, ret_error)) < 0)
		return e;
	pbmap_to_strmap((void *const *)r->publish_context, r->n_publish_context, &publish_ctx);
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &secrets);
	BackendPublish pub = {
		.volume_id = r->volume_id,
		.staging_path = r->staging_target_path,
		.target_path = r->target_path,
		.read_only = r->readonly,
		.mount_flags = block ? NULL : r->volume_capability->mount->mount_flags,
		.n_mount_flags = block ? 0 : r->volume_capability->mount->n_mount_flags,
		.group = own.gid,
		.volume_context = &ctx,
		.publish_context = &publish_ctx,
		.secrets = &secrets,
		.prepare = !block && own.gid != OWNERSHIP_GID_NONE ? publish_ownership : NULL,
		.userdata = &own,
	};
	backend_access_from(r->volume_capability, &pub.access);
	if ((e = BACKEND_CALL(b, publish, &pub, NULL, ret_error)) < 0)
		return e;
	log_info("volume %s published at %s%s", r->volume_id, r->target_path,
		 r->readonly ? " (read-only)" : "");
	Csi__V1__NodePublishVolumeResponse *resp = xnew0(Csi__V1__NodePublishVolumeResponse, 1);
	csi__v1__node_publish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int node_unpublish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  char **ret_error)
{
	const Csi__V1__NodeUnpublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->target_path || !*r->target_path)
		return errorf(ret_error, -EINVAL, "target_path: missing");
	if ((e = hold_volume(d, r->volume_id, &hold, ret_error)) < 0)
		return e;
	BackendUnpublish u = {.volume_id = r->volume_id, .target_path = r->target_path};
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if ((e = BACKEND_CALL(b, unpublish, &u, NULL, ret_error)) < 0)
		return e;
	log_info("volume %s unpublished from %s", r->volume_id, r->target_path);
	Csi__V1__NodeUnpublishVolumeResponse *resp = xnew0(Csi__V1__NodeUnpublishVolumeResponse, 1);
	csi__v1__node_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* A capacity range's bounds, or -EINVAL naming the one that is negative. */
static int range_bounds(const Csi__V1__CapacityRange *range, uint64_t *ret_required,
			uint64_t *ret_limit, char **ret_error)
{
	*ret_required = *ret_limit = 0;
	if (!range)
		return 0;
	if (range->required_bytes < 0)
		return errorf(ret_error, -EINVAL, "capacity_range.required_bytes: negative");
	if (range->limit_bytes < 0)
		return errorf(ret_error, -EINVAL, "capacity_range.limit_bytes: negative");
	if (range->limit_bytes && range->required_bytes > range->limit_bytes)
		return errorf(ret_error, -EINVAL,
			      "capacity_range: required_bytes %lld is more than limit_bytes %lld",
			      (long long)range->required_bytes, (long long)range->limit_bytes);
	*ret_required = (uint64_t)range->required_bytes;
	*ret_limit = (uint64_t)range->limit_bytes;
	return 0;
}

int node_expand_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		       char **ret_error)
{
	const Csi__V1__NodeExpandVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	uint64_t required, limit;
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->volume_path || !*r->volume_path)
		return errorf(ret_error, -EINVAL, "volume_path: missing");
	if ((e = range_bounds(r->capacity_range, &required, &limit, ret_error)) < 0)
		return e;
	/* Optional here; when given it must be whole, as the backend reads it. */
	if (r->volume_capability &&
	    (e = capability_check_spec(r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	if ((e = hold_volume(d, r->volume_id, &hold, ret_error)) < 0)
		return e;
	BackendNodeExpand x = {
		.volume_id = r->volume_id,
		.volume_path = r->volume_path,
		.staging_path = r->staging_target_path,
		.required = required,
		.limit = limit,
		.grow = d->distributed,
	};
	BackendAccess access;
	if (r->volume_capability) {
		backend_access_from(r->volume_capability, &access);
		x.access = &access;
	}
	BackendNodeExpanded expanded;
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if ((e = BACKEND_CALL(b, node_expand, &x, &expanded, ret_error)) < 0)
		return e;
	uint64_t size = expanded.size;
	log_info("volume %s expanded to %llu bytes", r->volume_id, (unsigned long long)size);
	Csi__V1__NodeExpandVolumeResponse *resp = xnew0(Csi__V1__NodeExpandVolumeResponse, 1);
	csi__v1__node_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)size;
	*ret = &resp->base;
	return 0;
}

static Csi__V1__VolumeCondition *condition_new(bool abnormal, char *message)
{
	Csi__V1__VolumeCondition *c = xnew0(Csi__V1__VolumeCondition, 1);
	csi__v1__volume_condition__init(c);
	c->abnormal = abnormal;
	c->message = message;
	return c;
}

static void stats_usage(Csi__V1__NodeGetVolumeStatsResponse *resp, const BackendStats *s)
{
	const BlockfsStats *f = &s->fs;

	if (s->block) {
		resp->usage = xnew0(Csi__V1__VolumeUsage *, 1);
		resp->usage[0] =
			usage_new(CSI__V1__VOLUME_USAGE__UNIT__BYTES, f->bytes_total, 0, 0);
		resp->n_usage = 1;
		return;
	}
	if (!s->has_usage)
		return; /* not mounted here: the condition says so */
	resp->usage = xnew0(Csi__V1__VolumeUsage *, 2);
	resp->usage[0] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__BYTES, f->bytes_total,
				   f->bytes_used, f->bytes_available);
	resp->usage[1] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__INODES, f->inodes_total,
				   f->inodes_used, f->inodes_free);
	resp->n_usage = 2;
}

int node_get_volume_stats(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  char **ret_error)
{
	const Csi__V1__NodeGetVolumeStatsRequest *r = (const void *)req;
	BackendStats s = {};
	int e;

	if ((e = volume_id_check(r->volume_id, ret_error)) < 0)
		return e;
	if (!r->volume_path || !*r->volume_path)
		return errorf(ret_error, -EINVAL, "volume_path: missing");
	BackendStatsRequest q = {
		.volume_id = r->volume_id,
		.volume_path = r->volume_path,
		.staging_path = r->staging_target_path,
	};
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if ((e = BACKEND_CALL(b, node_stats, &q, &s, ret_error)) < 0)
		return e;
	Csi__V1__NodeGetVolumeStatsResponse *resp = xnew0(Csi__V1__NodeGetVolumeStatsResponse, 1);
	csi__v1__node_get_volume_stats_response__init(resp);
	stats_usage(resp, &s);
	resp->volume_condition = condition_new(s.abnormal, TAKE_PTR(s.condition));
	backend_stats_done(&s);
	*ret = &resp->base;
	return 0;
}

int node_get_capabilities(_unused_ Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  _unused_ char **ret_error)
{
	static const Csi__V1__NodeServiceCapability__RPC__Type types[] = {
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_MOUNT_GROUP,
	};
	(void)req;
	Csi__V1__NodeGetCapabilitiesResponse *resp = xnew0(Csi__V1__NodeGetCapabilitiesResponse, 1);
	csi__v1__node_get_capabilities_response__init(resp);
	resp->capabilities = xnew0(Csi__V1__NodeServiceCapability *, ELEMENTSOF(types));
	for (size_t i = 0; i < ELEMENTSOF(types); i++) {
		Csi__V1__NodeServiceCapability *c = xnew0(Csi__V1__NodeServiceCapability, 1);
		csi__v1__node_service_capability__init(c);
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = xnew0(Csi__V1__NodeServiceCapability__RPC, 1);
		csi__v1__node_service_capability__rpc__init(c->rpc);
		c->rpc->type = types[i];
		resp->capabilities[i] = c;
	}
	resp->n_capabilities = ELEMENTSOF(types);
	*ret = &resp->base;
	return 0;
}

int node_get_info(Driver *d, _unused_ const ProtobufCMessage *req, ProtobufCMessage **ret,
		  char **ret_error)
{
	Backend *b = backend_default(d->backends);
	BackendNodeInfo info = {};
	int e;

	if ((e = BACKEND_CALL(b, node_info, NULL, &info, ret_error)) < 0)
		return e;
	Csi__V1__NodeGetInfoResponse *resp = xnew0(Csi__V1__NodeGetInfoResponse, 1);
	csi__v1__node_get_info_response__init(resp);
	resp->node_id = info.node_id ? TAKE_PTR(info.node_id) : xstrdup(d->node_id);
	resp->max_volumes_per_node = info.max_volumes;
	resp->accessible_topology = topology_from_strmap(&info.topology);
	strmap_done(&info.topology);
	*ret = &resp->base;
	return 0;
}
