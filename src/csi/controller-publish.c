/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerPublishVolume / ControllerUnpublishVolume: a volume's attachment to a node is a
 * record in its metadata, with a device name picked from the node's ordered list. Which names
 * a node's volumes hold, and so how many it has, comes from the pool under the node's lock
 * (volume lock first, then node lock), so that every controller process on the pool sees the
 * others' publishes and unpublishes. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

#define PUBLISH_CONTEXT_DEVICE "devicePath"

static ssize_t attachment_find(const PoolVolume *v, const char *node)
{
	for (size_t i = 0; i < v->n_attachments; i++)
		if (strcmp(v->attachments[i].node, node) == 0)
			return (ssize_t)i;
	return -1;
}

static ProtobufCMessage *publish_reply(const char *device)
{
	Csi__V1__ControllerPublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerPublishVolumeResponse, 1);
	Strmap m = {};

	csi__v1__controller_publish_volume_response__init(resp);
	strmap_set(&m, PUBLISH_CONTEXT_DEVICE, device);
	resp->publish_context = pbmap_from_strmap(
		&csi__v1__controller_publish_volume_response__publish_context_entry__descriptor, &m,
		&resp->n_publish_context);
	strmap_done(&m);
	return &resp->base;
}

static int publish_check_request(char **ret_error, const Csi__V1__ControllerPublishVolumeRequest *r)
{
	_cleanup_free_ char *err = NULL;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->node_id || !*r->node_id)
		return errorf(ret_error, -EINVAL, "node_id: missing");
	if (capability_check(r->volume_capability, "volume_capability", &err) < 0)
		return errorf(ret_error, -EINVAL, "%s", err);
	return 0;
}

/* The checks against what the volume already has: same node again, other nodes, limit. */
static int publish_check_volume(char **ret_error, const PoolVolume *v,
				const Csi__V1__ControllerPublishVolumeRequest *r)
{
	Csi__V1__VolumeCapability__AccessMode__Mode mode = r->volume_capability->access_mode->mode;

	if (v->n_attachments > 0 && !access_mode_multi_node(mode))
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is published to node %s and its access mode %s allows "
			      "one node only",
			      v->id, v->attachments[0].node, access_mode_name(mode));
	return 0;
}

/* Loads the names node's volumes hold, as the pool records them, into the allocator. Hold the
 * node's lock. */
static int devnames_load(Driver *d, const char *node, PoolNodeDevice **ret, size_t *ret_n)
{
	int e = pool_node_devices_load(d->pool, node, ret, ret_n);
	if (e < 0)
		return e;
	devnames_forget_node(d->devnames, node);
	for (size_t i = 0; i < *ret_n; i++)
		if (devnames_restore(d->devnames, node, (*ret)[i].volume_id, (*ret)[i].device) < 0)
			log_debug("node %s: %s held by volume %s is not a name of the list, or "
				  "held twice",
				  node, (*ret)[i].device, (*ret)[i].volume_id);
	return 0;
}

/* Picks v's name on node and records it: the claim in the node's index first, then the
 * attachment in v's metadata, both under the node's lock. A process killed between the two
 * leaves a claim that the next load drops, never an attachment that others do not see. */
static int publish_attach_locked(char **ret_error, Driver *d, PoolVolume *v, const PoolNode *node,
				 bool readonly, char **ret_device)
{
	_cleanup_free_ char *device = NULL;
	const char *node_id = node->id;
	PoolNodeDevice *claims = NULL;
	size_t n = 0;

	int e = devnames_load(d, node_id, &claims, &n);
	if (e < 0)
		return errorf(ret_error, e, "node %s: cannot read its device names: %s", node_id,
			      strerror(-e));
	/* The limit is checked under the node's lock, so two publishes racing to a node's last
	 * slot, from any process, cannot both win. */
	e = devnames_allocate_max(d->devnames, node_id, v->id, node->max_volumes, &device);
	if (e == -EMLINK)
		e = errorf(ret_error, -EMLINK,
			   "node %s already has %u volumes published, its limit", node_id,
			   node->max_volumes);
	else if (e < 0)
		e = errorf(ret_error, -EMLINK, "node %s has no free device name left", node_id);
	if (e < 0)
		goto out;
	claims = xrealloc(claims, (n + 1) * sizeof(PoolNodeDevice));
	claims[n++] = (PoolNodeDevice){.device = xstrdup(device), .volume_id = xstrdup(v->id)};
	if ((e = pool_node_devices_save(d->pool, node_id, claims, n)) < 0) {
		devnames_release(d->devnames, node_id, v->id);
		e = errorf(ret_error, e, "node %s: recording device name %s failed: %s", node_id,
			   device, strerror(-e));
		goto out;
	}
	v->attachments = xrealloc(v->attachments, (v->n_attachments + 1) * sizeof(PoolAttachment));
	v->attachments[v->n_attachments++] = (PoolAttachment){
		.node = xstrdup(node_id),
		.device = xstrdup(device),
		.readonly = readonly,
	};
	if ((e = pool_volume_save(d->pool, v)) < 0) {
		devnames_mark_failed(d->devnames, node_id, device);
		devnames_release(d->devnames, node_id, v->id);
		(void)pool_node_devices_save(d->pool, node_id, claims, n - 1);
		e = errorf(ret_error, e,
			   "volume %s: recording the attachment to node %s failed: %s", v->id,
			   node_id, strerror(-e));
		goto out;
	}
	*ret_device = TAKE_PTR(device);
out:
	pool_node_devices_free(claims, n);
	return e;
}

static int publish_attach(char **ret_error, Driver *d, PoolVolume *v, const PoolNode *node,
			  bool readonly, char **ret_device)
{
	int lock = -EBADF;

	int e = pool_node_lock(d->pool, node->id, &lock);
	if (e < 0)
		return errorf(ret_error, e, "node %s: cannot lock its device names: %s", node->id,
			      strerror(-e));
	e = publish_attach_locked(ret_error, d, v, node, readonly, ret_device);
	pool_unlock(lock);
	return e;
}

int controller_publish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			      char **ret_error)
{
	const Csi__V1__ControllerPublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *device = NULL;
	_cleanup_(strmap_done) Strmap context = {};
	PoolNode *node = NULL;
	int lock = -EBADF, e;

	/* The volumes of other backends go through their operations. */
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &context);
	Backend *b = volume_backend(d, r->volume_id, &context);
	if (!backend_is_default(d, b))
		return controller_publish_through(d, b, r, &context, ret, ret_error);
	if ((e = publish_check_request(ret_error, r)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	e = pool_volume_lock(d->pool, r->volume_id, &lock);
	if (e == -ENOENT)
		return volume_not_found(ret_error, r->volume_id);
	if (e < 0)
		return errorf(ret_error, -EIO, "volume %s: cannot lock it: %s", r->volume_id,
			      strerror(-e));
	if (pool_node_load(d->pool, r->node_id, &node) < 0) {
		e = errorf(ret_error, -ENOENT,
			   "node %s not found: no volplugd node serves this pool "
			   "under that id",
			   r->node_id);
		goto out;
	}
	if ((e = pool_volume_load(d->pool, r->volume_id, &v)) < 0) {
		e = errorf(ret_error, e, "volume %s: cannot read it: %s", r->volume_id,
			   strerror(-e));
		goto out;
	}
	ssize_t i = attachment_find(v, r->node_id);
	if (i >= 0) {
		if (v->attachments[i].readonly != r->readonly)
			e = errorf(ret_error, -EEXIST,
				   "volume %s is already published to node %s with readonly=%s",
				   v->id, r->node_id,
				   v->attachments[i].readonly ? "true" : "false");
		else
			*ret = publish_reply(v->attachments[i].device);
		goto out;
	}
	if ((e = publish_check_volume(ret_error, v, r)) < 0)
		goto out;
	if ((e = publish_attach(ret_error, d, v, node, r->readonly, &device)) < 0)
		goto out;
	log_info("published volume %s to node %s as %s%s", v->id, r->node_id, device,
		 r->readonly ? " (read-only)" : "");
	*ret = publish_reply(device);
out:
	pool_node_free(node);
	pool_unlock(lock);
	return e;
}

/* Takes v's attachments to node (to every node when node is empty, as the spec says) out of
 * v; returns how many, and them in *ret_gone. */
static size_t attachments_remove(PoolVolume *v, const char *node, PoolAttachment **ret_gone)
{
	PoolAttachment *gone = xnew0(PoolAttachment, v->n_attachments);
	size_t kept = 0, n_gone = 0;

	for (size_t i = 0; i < v->n_attachments; i++)
		if (!node || !*node || strcmp(v->attachments[i].node, node) == 0)
			gone[n_gone++] = v->attachments[i];
		else
			v->attachments[kept++] = v->attachments[i];
	v->n_attachments = kept;
	*ret_gone = gone;
	return n_gone;
}

/* Rewrites node's index without the claims its volumes' records no longer confirm. */
static void unpublish_release(Driver *d, const char *node)
{
	PoolNodeDevice *claims = NULL;
	size_t n = 0;
	int lock = -EBADF;

	if (pool_node_lock(d->pool, node, &lock) < 0)
		return;
	if (devnames_load(d, node, &claims, &n) == 0) {
		(void)pool_node_devices_save(d->pool, node, claims, n);
		pool_node_devices_free(claims, n);
	}
	pool_unlock(lock);
}

int controller_unpublish_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				char **ret_error)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	int lock = -EBADF, e;

	/* The volumes of other backends go through their operations. */
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if (!backend_is_default(d, b))
		return controller_unpublish_through(d, b, r, ret, ret_error);
	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	Csi__V1__ControllerUnpublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerUnpublishVolumeResponse, 1);
	csi__v1__controller_unpublish_volume_response__init(resp);
	*ret = &resp->base;

	e = pool_volume_lock(d->pool, r->volume_id, &lock);
	if (e == -ENOENT)
		return 0; /* no volume: nothing is published */
	if (e < 0)
		return errorf(ret_error, e, "volume %s: cannot lock it: %s", r->volume_id,
			      strerror(-e));
	if ((e = pool_volume_load(d->pool, r->volume_id, &v)) < 0) {
		e = errorf(ret_error, e, "volume %s: cannot read it: %s", r->volume_id,
			   strerror(-e));
		goto out;
	}
	PoolAttachment *gone = NULL;
	size_t n_gone = attachments_remove(v, r->node_id, &gone);
	if (n_gone > 0 && (e = pool_volume_save(d->pool, v)) < 0)
		e = errorf(ret_error, e, "volume %s: recording the detach failed: %s", v->id,
			   strerror(-e));
	for (size_t i = 0; i < n_gone; i++) {
		if (e >= 0) {
			log_info("unpublished volume %s from node %s (%s)", v->id, gone[i].node,
				 gone[i].device);
			/* The attachment is gone, so its claim is no longer confirmed: dropping
			 * it from the index is tidying, a failure here loses nothing. */
			unpublish_release(d, gone[i].node);
		}
		free(gone[i].node);
		free(gone[i].device);
	}
	free(gone);
out:
	pool_unlock(lock);
	return e;
}
