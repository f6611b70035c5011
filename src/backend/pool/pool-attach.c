/* SPDX-License-Identifier: Apache-2.0 */
/* Attach and detach (ControllerPublishVolume / ControllerUnpublishVolume): a volume's
 * attachment to a node is a record in its metadata, with a device name picked from the node's
 * ordered list (devnames.h). Which names a node's volumes hold, and so how many it has, comes
 * from the pool under the node's lock (volume lock first, then node lock), so that every
 * controller process on the pool sees the others' publishes and unpublishes. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "log.h"
#include "pool-backend.h"

#define PUBLISH_CONTEXT_DEVICE "devicePath"

static ssize_t attachment_find(const PoolVolume *v, const char *node)
{
	for (size_t i = 0; i < v->n_attachments; i++)
		if (strcmp(v->attachments[i].node, node) == 0)
			return (ssize_t)i;
	return -1;
}

static void attachment_result(const char *device, bool existed, BackendAttachment *ret)
{
	*ret = (BackendAttachment){.device = xstrdup(device), .existed = existed};
	strmap_set(&ret->publish_context, PUBLISH_CONTEXT_DEVICE, device);
}

/* Loads the names node's volumes hold, as the pool records them, into the allocator. Hold the
 * node's lock. */
static int devnames_load(PoolBackend *pb, const char *node, PoolNodeDevice **ret, size_t *ret_n)
{
	int e = pool_node_devices_load(pb->pool, node, ret, ret_n);
	if (e < 0)
		return e;
	devnames_forget_node(pb->devnames, node);
	for (size_t i = 0; i < *ret_n; i++)
		if (devnames_restore(pb->devnames, node, (*ret)[i].volume_id, (*ret)[i].device) < 0)
			log_debug("node %s: %s held by volume %s is not a name of the list, or "
				  "held twice",
				  node, (*ret)[i].device, (*ret)[i].volume_id);
	return 0;
}

/* Picks v's name on node and records it: the claim in the node's index first, then the
 * attachment in v's metadata, both under the node's lock. A process killed between the two
 * leaves a claim that the next load drops, never an attachment that others do not see. */
static int attach_locked(PoolBackend *pb, PoolVolume *v, const PoolNode *node, bool readonly,
			 char **ret_device, char **ret_error)
{
	_cleanup_free_ char *device = NULL;
	const char *node_id = node->id;
	PoolNodeDevice *claims = NULL;
	size_t n = 0;

	int e = devnames_load(pb, node_id, &claims, &n);
	if (e < 0)
		return errorf(ret_error, e, "node %s: cannot read its device names: %s", node_id,
			      strerror(-e));
	/* The limit is checked under the node's lock, so two publishes racing to a node's last
	 * slot, from any process, cannot both win. */
	e = devnames_allocate_max(pb->devnames, node_id, v->id, node->max_volumes, &device);
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
	if ((e = pool_node_devices_save(pb->pool, node_id, claims, n)) < 0) {
		devnames_release(pb->devnames, node_id, v->id);
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
	if ((e = pool_volume_save(pb->pool, v)) < 0) {
		devnames_mark_failed(pb->devnames, node_id, device);
		devnames_release(pb->devnames, node_id, v->id);
		(void)pool_node_devices_save(pb->pool, node_id, claims, n - 1);
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

static int attach_new(PoolBackend *pb, PoolVolume *v, const PoolNode *node, bool readonly,
		      char **ret_device, char **ret_error)
{
	int lock = -EBADF;

	int e = pool_node_lock(pb->pool, node->id, &lock);
	if (e == -ELOOP || e == -EISDIR || e == -EBADFD)
		return errorf(ret_error, -EUCLEAN,
			      "node %s: cannot lock its device names: nodes/%s.lock is %s, not a "
			      "file of the pool",
			      node->id, node->id,
			      e == -ELOOP ? "a symbolic link" : "no regular file");
	if (e < 0)
		return errorf(ret_error, e, "node %s: cannot lock its device names: %s", node->id,
			      strerror(-e));
	e = attach_locked(pb, v, node, readonly, ret_device, ret_error);
	pool_unlock(lock);
	return e;
}

/* Under the volume's lock: the same node again, other nodes, a new attachment. */
static int attach_volume_locked(PoolBackend *pb, const char *local, const BackendAttach *r,
				const PoolNode *node, BackendAttachment *ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *device = NULL;

	int e = pool_backend_volume_load(pb, "volume_id", r->volume_id, local, &v, ret_error);
	if (e < 0)
		return e;
	ssize_t i = attachment_find(v, r->node_id);
	if (i >= 0) {
		if (v->attachments[i].readonly != r->read_only)
			return errorf(ret_error, -EEXIST,
				      "volume %s is already published to node %s with readonly=%s",
				      r->volume_id, r->node_id,
				      v->attachments[i].readonly ? "true" : "false");
		attachment_result(v->attachments[i].device, true, ret);
		return 0;
	}
	if (v->n_attachments > 0 && !r->access.multi_node)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is published to node %s and its access mode %s allows "
			      "one node only",
			      r->volume_id, v->attachments[0].node, r->access.mode);
	if ((e = attach_new(pb, v, node, r->read_only, &device, ret_error)) < 0)
		return e;
	attachment_result(device, false, ret);
	return 0;
}

int pool_backend_attach(Backend *b, const BackendAttach *r, BackendAttachment *ret,
			char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	PoolNode *node = NULL;
	char local[POOL_ID_MAX];
	int lock = -EBADF;

	int e = pool_backend_id_find(pb, POOL_ID_VOLUME, "volume_id", r->volume_id, local,
				     ret_error);
	if (e < 0 || (e = pool_backend_usable(pb, ret_error)) < 0)
		return e;
	/* The volume's data is on this node: no other node reaches it. */
	if (strcmp(r->node_id, pb->node_id) != 0)
		return errorf(ret_error, -ENOENT,
			      "node_id: volume %s is on node %s and cannot be published to node %s",
			      r->volume_id, pb->node_id, r->node_id);
	e = pool_backend_volume_lock(pb, "volume_id", r->volume_id, local, &lock, ret_error);
	if (e < 0)
		return e;
	if (pool_node_load(pb->pool, r->node_id, &node) < 0)
		e = errorf(ret_error, -ENOENT,
			   "node %s not found: no volplugd node serves this pool under that id",
			   r->node_id);
	else
		e = attach_volume_locked(pb, local, r, node, ret, ret_error);
	pool_node_free(node);
	pool_unlock(lock);
	return e;
}

/* Takes v's attachments to node (to every node when node is empty, as the spec says) out of
 * v, into *ret (nodes and devices). */
static void attachments_remove(PoolVolume *v, const char *node, BackendDetached *ret)
{
	size_t kept = 0;

	*ret = (BackendDetached){};
	for (size_t i = 0; i < v->n_attachments; i++) {
		PoolAttachment *a = &v->attachments[i];
		if (node && *node && strcmp(a->node, node) != 0) {
			v->attachments[kept++] = *a;
			continue;
		}
		strv_append(&ret->nodes, TAKE_PTR(a->node));
		strv_append(&ret->devices, a->device ? TAKE_PTR(a->device) : xstrdup(""));
	}
	v->n_attachments = kept;
}

/* Rewrites node's index without the claims its volumes' records no longer confirm. */
static void detach_release(PoolBackend *pb, const char *node)
{
	PoolNodeDevice *claims = NULL;
	size_t n = 0;
	int lock = -EBADF;

	if (pool_node_lock(pb->pool, node, &lock) < 0)
		return;
	if (devnames_load(pb, node, &claims, &n) == 0) {
		(void)pool_node_devices_save(pb->pool, node, claims, n);
		pool_node_devices_free(claims, n);
	}
	pool_unlock(lock);
}

static int detach_locked(PoolBackend *pb, const char *local, const BackendDetach *r,
			 BackendDetached *ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	BackendDetached gone;

	/* A volume whose record is sound can always be unpublished, damaged elsewhere or not:
	 * its attachments are known, and the CO must be able to detach it before a delete. */
	int e = pool_volume_load(pb->pool, local, &v);
	if (e < 0 &&
	    (e = pool_backend_volume_load(pb, "volume_id", r->volume_id, local, &v, ret_error)) < 0)
		return e;
	attachments_remove(v, r->node_id, &gone);
	if (gone.nodes && (e = pool_volume_save(pb->pool, v)) < 0) {
		backend_detached_done(&gone);
		return errorf(ret_error, e, "volume %s: recording the detach failed: %s", v->id,
			      strerror(-e));
	}
	/* The attachments are gone, so their claims are no longer confirmed: dropping them
	 * from the indexes is tidying, a failure here loses nothing. */
	for (char **node = gone.nodes; node && *node; node++)
		detach_release(pb, *node);
	*ret = gone;
	return 0;
}

int pool_backend_detach(Backend *b, const BackendDetach *r, BackendDetached *ret, char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	char local[POOL_ID_MAX];
	_cleanup_free_ char *err = NULL;
	int lock = -EBADF;

	int e = pool_backend_id_local(pb, POOL_ID_VOLUME, "volume_id", r->volume_id, local, &err);
	if (e == -EXDEV)
		return error_pass(-ENOENT, &err, ret_error);
	if (e == 0)
		e = pool_volume_lock(pb->pool, local, &lock);
	if (e == -ENOENT) {
		*ret = (BackendDetached){}; /* no volume: nothing is attached */
		return 0;
	}
	if (e == -EUCLEAN && pool_volume_damaged(pb->pool, local, r->volume_id, ret_error) < 0)
		return -EUCLEAN;
	if (e < 0)
		return errorf(ret_error, e, "volume %s: cannot lock it: %s", r->volume_id,
			      strerror(-e));
	e = detach_locked(pb, local, r, ret, ret_error);
	pool_unlock(lock);
	return e;
}
