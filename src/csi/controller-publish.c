/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerPublishVolume / ControllerUnpublishVolume: the request checked, then the volume's
 * backend attaches it to the node (a device name, the node's limit: the backend's business) or
 * detaches it. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

static ProtobufCMessage *publish_reply(const Strmap *context)
{
	Csi__V1__ControllerPublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerPublishVolumeResponse, 1);

	csi__v1__controller_publish_volume_response__init(resp);
	resp->publish_context = pbmap_from_strmap(
		&csi__v1__controller_publish_volume_response__publish_context_entry__descriptor,
		context, &resp->n_publish_context);
	return &resp->base;
}

int controller_publish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			      char **ret_error)
{
	const Csi__V1__ControllerPublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(strmap_done) Strmap context = {};
	BackendAttachment done = {};
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->node_id || !*r->node_id)
		return errorf(ret_error, -EINVAL, "node_id: missing");
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &context);
	Backend *b = volume_backend(d, r->volume_id, &context);
	if ((e = capability_check(b, r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	BackendAttach a = {
		.volume_id = r->volume_id,
		.node_id = r->node_id,
		.read_only = r->readonly,
		.volume_context = &context,
	};
	backend_access_from(r->volume_capability, &a.access);
	if ((e = BACKEND_CALL(b, attach, &a, &done, ret_error)) < 0)
		return e;
	if (!done.existed)
		log_info("published volume %s to node %s%s%s (%s backend)%s", r->volume_id,
			 r->node_id, done.device ? " as " : "", done.device ?: "", b->ops->name,
			 r->readonly ? " (read-only)" : "");
	*ret = publish_reply(&done.publish_context);
	backend_attachment_done(&done);
	return 0;
}

int controller_unpublish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				char **ret_error)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendDetached gone = {};
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	BackendDetach q = {.volume_id = r->volume_id, .node_id = r->node_id};
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if ((e = BACKEND_CALL(b, detach, &q, &gone, ret_error)) < 0)
		return e;
	for (size_t i = 0; gone.nodes && gone.nodes[i]; i++)
		log_info("unpublished volume %s from node %s (%s backend%s%s)", r->volume_id,
			 gone.nodes[i], b->ops->name, *gone.devices[i] ? ", was " : "",
			 gone.devices[i]);
	backend_detached_done(&gone);
	Csi__V1__ControllerUnpublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerUnpublishVolumeResponse, 1);
	csi__v1__controller_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}
