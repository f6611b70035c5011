/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's node service: the block-device node service (blocknode.h) over loop devices of
 * the volumes' data files, with the use records in the pool (volumes/<id>/node.json). */
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "blocknode.h"
#include "error-util.h"
#include "failpoint.h"
#include "loopdev.h"
#include "pool-internal.h"
#include "pool-node.h"

/* The loop device over the volume's data file (the kernel's word, compared by inode): 0, or
 * -ENODEV when none is attached. */
static int pool_device_find(void *userdata, const char *id, const Strmap *publish_context,
			    BlockDevice *ret)
{
	_cleanup_free_ char *data = pool_volume_data_path(userdata, id);
	_cleanup_free_ char *dev = NULL;
	struct stat st;

	(void)publish_context;
	int r = loop_find(data, &dev);
	if (r == -ENOENT)
		return -ENODEV;
	if (r < 0)
		return r;
	if (stat(dev, &st) < 0 || !S_ISBLK(st.st_mode))
		return -ENODEV;
	*ret = (BlockDevice){.path = TAKE_PTR(dev), .rdev = st.st_rdev};
	return 0;
}

/* The loop device, attached now when there is none. */
static int pool_device_get(void *userdata, const char *id, const Strmap *publish_context,
			   BlockDevice *ret, char **ret_error)
{
	Pool *p = userdata;

	int r = pool_device_find(p, id, publish_context, ret);
	if (r != -ENODEV)
		return r < 0 ? errorf(ret_error, r, "volume %s: looking for its loop device: %s",
				      id, strerror(-r))
			     : 0;
	_cleanup_free_ char *data = pool_volume_data_path(p, id);
	_cleanup_free_ char *dev = NULL;
	if ((r = loop_attach(data, false, &dev)) < 0)
		return errorf(ret_error, r, "volume %s: attaching a loop device failed: %s", id,
			      strerror(-r));
	failpoint("node-stage-after-attach");
	if ((r = pool_device_find(p, id, publish_context, ret)) < 0)
		return errorf(ret_error, r, "volume %s: its new loop device %s is gone", id, dev);
	ret->attached_now = true;
	return 0;
}

static int pool_device_release(void *userdata, const BlockDevice *d)
{
	(void)userdata;
	return loop_detach(d->path);
}

/* The loop device takes the data file's size (a ControllerExpandVolume grew it). */
static int pool_device_size(void *userdata, const BlockDevice *d, bool refresh, uint64_t *ret)
{
	(void)userdata;
	int r = refresh ? loop_refresh_size(d->path) : 0;
	return r < 0 ? r : loop_get_size(d->path, ret);
}

static bool pool_present(void *userdata, const char *id)
{
	return pool_volume_present(userdata, id);
}

static int pool_use_lock(void *userdata, const char *id, int *ret_lock_fd)
{
	return pool_volume_use_lock(userdata, id, ret_lock_fd);
}

static int pool_use_load(void *userdata, const char *id, NodeUse *ret)
{
	return pool_volume_use_load(userdata, id, ret);
}

static int pool_use_save(void *userdata, const char *id, const NodeUse *u)
{
	return pool_volume_use_save(userdata, id, u);
}

static const BlockNodeOps pool_node_ops = {
	.device_find = pool_device_find,
	.device_get = pool_device_get,
	.device_release = pool_device_release,
	.device_size = pool_device_size,
	.volume_present = pool_present,
	.not_found = pool_volume_not_found,
	.use_lock = pool_use_lock,
	.use_load = pool_use_load,
	.use_save = pool_use_save,
};

#define POOL_NODE(p, node) (&(BlockNode){.ops = &pool_node_ops, .userdata = (p), .node_id = (node)})

int pool_node_stage(Pool *p, const char *node_id, const BackendStage *r,
		    const BlockfsMkfsOptions *mkfs, char **ret_error)
{
	return blocknode_stage(POOL_NODE(p, node_id), r, mkfs, ret_error);
}

int pool_node_unstage(Pool *p, const char *volume_id, const char *staging_path, char **ret_error)
{
	return blocknode_unstage(POOL_NODE(p, NULL), volume_id, staging_path, ret_error);
}

int pool_node_publish(Pool *p, const char *node_id, const BackendPublish *r, char **ret_error)
{
	return blocknode_publish(POOL_NODE(p, node_id), r, ret_error);
}

int pool_node_unpublish(Pool *p, const char *volume_id, const char *target_path, char **ret_error)
{
	return blocknode_unpublish(POOL_NODE(p, NULL), volume_id, target_path, ret_error);
}

int pool_node_expand(Pool *p, const char *volume_id, const char *volume_path, uint64_t required,
		     uint64_t limit, uint64_t *ret_size, char **ret_error)
{
	return blocknode_expand(POOL_NODE(p, NULL), volume_id, volume_path, required, limit,
				ret_size, ret_error);
}

int pool_node_stats(Pool *p, const char *volume_id, const char *volume_path, BackendStats *ret,
		    char **ret_error)
{
	return blocknode_stats(POOL_NODE(p, NULL), volume_id, volume_path, ret, ret_error);
}
