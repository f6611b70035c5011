/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerPublishVolume, ControllerUnpublishVolume, ControllerExpandVolume and
 * ControllerModifyVolume for the volumes of backends other than the default: the CSI spec's
 * checks, the volume's in-flight key, then the backend's attach, detach or change_volume. */
#include <string.h>

#include "alloc.h"
#include "controller.h"
#include "csi-util.h"
#include "error-util.h"
#include "log.h"

static int hold_volume(char **ret_error, Driver *d, const char *id, InflightHold **ret)
{
	if (inflight_holdf(d->inflight, ret, "vol:%s", id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress", id);
	return 0;
}

int controller_publish_through(Driver *d, Backend *b,
			       const Csi__V1__ControllerPublishVolumeRequest *r,
			       const Strmap *context, ProtobufCMessage **ret, char **ret_error)
{
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendAttachment att = {};
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->node_id || !*r->node_id)
		return errorf(ret_error, -EINVAL, "node_id: missing");
	if ((e = capability_check_spec(r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	if ((e = hold_volume(ret_error, d, r->volume_id, &hold)) < 0)
		return e;
	BackendAttach a = {
		.volume_id = r->volume_id,
		.node_id = r->node_id,
		.read_only = r->readonly,
		.volume_context = context,
	};
	backend_access_from(r->volume_capability, &a.access);
	if ((e = BACKEND_CALL(b, attach, &a, &att, ret_error)) < 0)
		return e;
	log_info("published volume %s to node %s (%s backend)%s", r->volume_id, r->node_id,
		 b->ops->name, r->readonly ? " (read-only)" : "");
	Csi__V1__ControllerPublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerPublishVolumeResponse, 1);
	csi__v1__controller_publish_volume_response__init(resp);
	resp->publish_context = pbmap_from_strmap(
		&csi__v1__controller_publish_volume_response__publish_context_entry__descriptor,
		&att.publish_context, &resp->n_publish_context);
	backend_attachment_done(&att);
	*ret = &resp->base;
	return 0;
}

int controller_unpublish_through(Driver *d, Backend *b,
				 const Csi__V1__ControllerUnpublishVolumeRequest *r,
				 ProtobufCMessage **ret, char **ret_error)
{
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if ((e = hold_volume(ret_error, d, r->volume_id, &hold)) < 0)
		return e;
	BackendDetach x = {.volume_id = r->volume_id, .node_id = r->node_id};
	BackendDetached gone = {};
	if ((e = BACKEND_CALL(b, detach, &x, &gone, ret_error)) < 0)
		return e;
	backend_detached_done(&gone);
	log_info("unpublished volume %s from %s%s (%s backend)", r->volume_id,
		 r->node_id && *r->node_id ? "node " : "every node", r->node_id ?: "",
		 b->ops->name);
	Csi__V1__ControllerUnpublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerUnpublishVolumeResponse, 1);
	csi__v1__controller_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* The size an expansion asks for, in bytes as given: required_bytes, else limit_bytes. */
static int expand_size(char **ret_error, const Csi__V1__CapacityRange *range, uint64_t *ret)
{
	if (!range)
		return errorf(ret_error, -EINVAL, "capacity_range: missing");
	if (range->required_bytes < 0 || range->limit_bytes < 0)
		return errorf(ret_error, -EINVAL, "capacity_range: bytes must not be negative");
	if (range->limit_bytes > 0 && range->required_bytes > range->limit_bytes)
		return errorf(ret_error, -ERANGE,
			      "capacity_range: required_bytes %lld exceeds limit_bytes %lld",
			      (long long)range->required_bytes, (long long)range->limit_bytes);
	*ret = (uint64_t)(range->required_bytes > 0 ? range->required_bytes : range->limit_bytes);
	if (*ret == 0)
		return errorf(ret_error, -EINVAL, "capacity_range: no size given");
	return 0;
}

int controller_expand_through(Driver *d, Backend *b,
			      const Csi__V1__ControllerExpandVolumeRequest *r,
			      ProtobufCMessage **ret, char **ret_error)
{
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendChanged changed;
	uint64_t size;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if ((e = expand_size(ret_error, r->capacity_range, &size)) < 0)
		return e;
	if (r->volume_capability &&
	    (e = capability_check_spec(r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	if ((e = hold_volume(ret_error, d, r->volume_id, &hold)) < 0)
		return e;
	BackendChange c = {.volume_id = r->volume_id, .new_size = size, .n_callers = 1};
	if ((e = BACKEND_CALL(b, change_volume, &c, &changed, ret_error)) < 0)
		return e;
	log_info("volume %s expanded to %llu bytes (%s backend)", r->volume_id,
		 (unsigned long long)changed.size, b->ops->name);
	Csi__V1__ControllerExpandVolumeResponse *resp =
		xnew0(Csi__V1__ControllerExpandVolumeResponse, 1);
	csi__v1__controller_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)changed.size;
	resp->node_expansion_required = changed.node_expansion_required;
	*ret = &resp->base;
	return 0;
}

int controller_modify_through(Driver *d, Backend *b,
			      const Csi__V1__ControllerModifyVolumeRequest *r,
			      ProtobufCMessage **ret, char **ret_error)
{
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_free_ ParamKV *kv = NULL;
	BackendChanged changed;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if ((e = hold_volume(ret_error, d, r->volume_id, &hold)) < 0)
		return e;
	kv = pbmap_to_kv((void *const *)r->mutable_parameters, r->n_mutable_parameters);
	BackendChange c = {
		.volume_id = r->volume_id,
		.params = kv,
		.n_params = r->n_mutable_parameters,
		.n_callers = 1,
	};
	if ((e = BACKEND_CALL(b, change_volume, &c, &changed, ret_error)) < 0)
		return e;
	log_info("volume %s modified: %zu parameter(s) (%s backend)", r->volume_id, c.n_params,
		 b->ops->name);
	Csi__V1__ControllerModifyVolumeResponse *resp =
		xnew0(Csi__V1__ControllerModifyVolumeResponse, 1);
	csi__v1__controller_modify_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}
