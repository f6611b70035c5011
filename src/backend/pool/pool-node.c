/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's node service: the block-device node service (blocknode.h) over loop devices of
 * the volumes' data files, with the use records in the pool (volumes/<id>/node.json). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "blocknode.h"
#include "error-util.h"
#include "failpoint.h"
#include "log.h"
#include "loopdev.h"
#include "pool-internal.h"
#include "pool-node.h"
#include "random-util.h"

#define SECTOR_SIZE 512

/* One call of the node service: the pool, and the volume as the request named it (shown: what
 * blocknode hands back to the operations below, and what messages name) beside its local ID
 * (its directory's name, what the pool's files and paths use). */
typedef struct PoolNodeCall {
	Pool *p;
	const char *local;
	const char *shown;
} PoolNodeCall;

/* The local ID of the volume blocknode names by id. */
static const char *local_of(const PoolNodeCall *c, const char *id)
{
	return c->shown && c->local && strcmp(id, c->shown) == 0 ? c->local : id;
}

/* A directory volume's "device": its tree/, always there (what blocknode binds and proves its
 * mounts by). 1 when the volume is one (its record says so), 0 when it is not or its record
 * cannot say (a loop volume's device is looked for then, whatever else is in its directory),
 * -ENODEV when its tree/ is no directory of the pool (damaged: nothing of it is bound). */
static int dir_device_find(PoolNodeCall *c, const char *local, BlockDevice *ret)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	struct stat st;

	if (pool_volume_load(c->p, local, &v) < 0 || !v->directory)
		return 0;
	_cleanup_close_ int fd = pool_dirvol_open(c->p, local, O_PATH);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -ENODEV;
	*ret = (BlockDevice){
		.path = xasprintf("%s/volumes/%s/" TREE_DIR, c->p->path, local),
		.rdev = st.st_dev,
		.dir_ino = st.st_ino,
		.dir_size = v->size,
	};
	return 1;
}

static int pool_dir_open(void *userdata, const char *id)
{
	PoolNodeCall *c = userdata;

	return pool_dirvol_open(c->p, local_of(c, id), O_PATH);
}

/* The loop device over the volume's data file (the kernel's word, compared by inode): 0, or
 * -ENODEV when none is attached. A directory volume: its directory. */
static int pool_device_find(void *userdata, const char *id, const Strmap *publish_context,
			    BlockDevice *ret)
{
	PoolNodeCall *c = userdata;
	_cleanup_free_ char *dev = NULL;
	struct stat st;

	(void)publish_context;
	int r = dir_device_find(c, local_of(c, id), ret);
	if (r != 0)
		return r < 0 ? r : 0;
	/* The file the pool holds: what a symlink there points to is not the volume. */
	_cleanup_close_ int data = pool_volume_data_open(c->p, local_of(c, id), O_PATH);
	if (data == -ENOENT || data == -EUCLEAN)
		return -ENODEV;
	if (data < 0)
		return data;
	r = loop_find_fd(data, &dev);
	if (r == -ENOENT)
		return -ENODEV;
	if (r < 0)
		return r;
	if (stat(dev, &st) < 0 || !S_ISBLK(st.st_mode))
		return -ENODEV;
	*ret = (BlockDevice){.path = TAKE_PTR(dev), .rdev = st.st_rdev};
	return 0;
}

/* The loop device of a volume whose records are gone (deleted, or lost with its pool): bound to
 * its data file at this pool's path, unlinked since, on the pool's filesystem. The kernel keeps
 * the path it was attached with and the inode it holds; only volplug attaches loop devices over
 * a volume's data file, so that is the volume's device still, and what it has mounted is the
 * volume's. -ENODEV when there is none. */
static int pool_device_find_lost(void *userdata, const char *shown, BlockDevice *ret)
{
	PoolNodeCall *c = userdata;
	Pool *p = c->p;
	const char *id = local_of(c, shown);
	_cleanup_free_ char *data = NULL, *dev = NULL;
	struct stat st;

	if (!p->real_path || !pool_volume_id_valid(id) || pool_volume_present(p, id) ||
	    fstat(p->dir_fd, &st) < 0)
		return -ENODEV;
	data = xasprintf("%s/volumes/%s/" DATA_FILE, p->real_path, id);
	int r = loop_find_deleted(data, st.st_dev, &dev);
	if (r < 0)
		return r == -ENOENT ? -ENODEV : r;
	if (stat(dev, &st) < 0 || !S_ISBLK(st.st_mode))
		return -ENODEV;
	*ret = (BlockDevice){.path = TAKE_PTR(dev), .rdev = st.st_rdev};
	return 0;
}

/* The logical block size of a new loop device over data: what passes direct I/O straight to
 * the pool's filesystem (loop_block_size_for()), lowered to the unit of a filesystem already
 * on the volume (made under 512-byte sectors before volplug chose larger ones, it would not
 * mount under larger ones) and to what the stage allows (max). */
static uint32_t block_size_for(int data_fd, uint32_t max)
{
	uint32_t size = SECTOR_SIZE, unit = 0;
	char path[64];

	(void)loop_block_size_for_fd(data_fd, &size);
	/* The file open as data_fd, whatever happens to its name meanwhile. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", data_fd);
	if (blockfs_probe_block_size(path, &unit) == 0 && unit >= SECTOR_SIZE && unit < size)
		size = unit;
	if (max >= SECTOR_SIZE && max < size)
		size = max;
	return size;
}

/* The loop device, attached now when there is none: with direct I/O, so the volume's data is
 * cached once (by the filesystem in it), not a second time as the data file's pages. */
static int pool_device_get(void *userdata, const char *id, const Strmap *publish_context,
			   uint32_t block_size_max, BlockDevice *ret, char **ret_error)
{
	PoolNodeCall *c = userdata;
	Pool *p = c->p;
	const char *local = local_of(c, id);

	int r = pool_device_find(c, id, publish_context, ret);
	if (r != -ENODEV)
		return r < 0 ? errorf(ret_error, r, "volume %s: looking for its loop device: %s",
				      id, strerror(-r))
			     : 0;
	_cleanup_free_ char *name = pool_volume_data_path(p, local);
	_cleanup_free_ char *dev = NULL;
	/* A damaged volume is never attached: a symlinked data file would give the node a file
	 * from outside the pool to format and mount. */
	if ((r = pool_volume_damaged(p, local, id, ret_error)) < 0)
		return r;
	_cleanup_close_ int data = pool_volume_data_open(p, local, O_RDWR);
	if (data == -EUCLEAN) /* changed since the look above */
		return errorf(
			ret_error, data,
			"volume %s is damaged: volumes/%s/data is no file of the pool: it can "
			"only be deleted",
			id, local);
	if (data < 0)
		return errorf(ret_error, data, "volume %s: opening its data file failed: %s", id,
			      strerror(-data));
	LoopAttach how = {.direct_io = true, .block_size = block_size_for(data, block_size_max)};
	if ((r = loop_attach_fd(data, name, &how, &dev)) < 0)
		return errorf(ret_error, r, "volume %s: attaching a loop device failed: %s", id,
			      strerror(-r));
	pool_metrics_device_attached(dev);
	failpoint("node-stage-after-attach");
	if ((r = pool_device_find(c, id, publish_context, ret)) < 0)
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

/* The pool's filesystem full for real, or a loop device without direct I/O. */
static char *pool_device_condition(void *userdata, const char *id, const BlockDevice *d,
				   bool *ret_abnormal)
{
	LoopInfo info;

	(void)id;
	char *full = pool_space_full_condition(((PoolNodeCall *)userdata)->p);
	if (full) {
		*ret_abnormal = true;
		return full;
	}
	if (loop_get_info(d->path, &info) < 0)
		return NULL;
	bool direct = info.direct_io;
	loop_info_done(&info);
	if (direct)
		return NULL;
	*ret_abnormal = false;
	return xasprintf("its loop device %s works without direct I/O (attached so before, or "
			 "the pool's filesystem refuses it): its data is cached twice and direct "
			 "writes in it are not direct; a new stage asks for it again",
			 d->path);
}

static bool pool_present(void *userdata, const char *id)
{
	PoolNodeCall *c = userdata;

	return pool_volume_present(c->p, local_of(c, id));
}

static int pool_use_lock(void *userdata, const char *id, int *ret_lock_fd)
{
	PoolNodeCall *c = userdata;

	return pool_volume_use_lock(c->p, local_of(c, id), ret_lock_fd);
}

/* The lock's path in the pool: by the volume's local ID, the name of its directory. */
static char *pool_use_lock_name(void *userdata, const char *id)
{
	PoolNodeCall *c = userdata;

	return xasprintf("volumes/%s/" USE_LOCK " in pool %s", local_of(c, id), c->p->path);
}

static int pool_use_load(void *userdata, const char *id, NodeUse *ret)
{
	PoolNodeCall *c = userdata;

	return pool_volume_use_load(c->p, local_of(c, id), ret);
}

static int pool_use_save(void *userdata, const char *id, const NodeUse *u, bool durable)
{
	PoolNodeCall *c = userdata;

	return pool_volume_use_save(c->p, local_of(c, id), u, durable);
}

static const BlockNodeOps pool_node_ops = {
	.device_find = pool_device_find,
	.device_find_lost = pool_device_find_lost,
	.device_get = pool_device_get,
	.device_release = pool_device_release,
	.device_size = pool_device_size,
	.device_condition = pool_device_condition,
	.dir_open = pool_dir_open,
	.volume_present = pool_present,
	.not_found = pool_volume_not_found,
	.use_lock = pool_use_lock,
	.lock_name = pool_use_lock_name,
	.use_load = pool_use_load,
	.use_save = pool_use_save,
};

/* The block node service of one call on the volume of local ID local, which the request named
 * shown (NULL: local). */
#define POOL_NODE(pool, node, local_id, shown_id)                                     \
	(&(BlockNode){.ops = &pool_node_ops,                                          \
		      .userdata = &(PoolNodeCall){.p = (pool),                        \
						  .local = (local_id),                \
						  .shown = (shown_id) ?: (local_id)}, \
		      .node_id = (node)})

int pool_node_stage(Pool *p, const char *node_id, const char *local, const BackendStage *r,
		    const BlockfsMkfsOptions *mkfs, char **ret_error)
{
	/* A damaged volume is never staged, not even found staged: it can only be deleted. */
	int e = pool_volume_damaged(p, local, r->volume_id, ret_error);
	if (e < 0)
		return e;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	if (r->access.block && pool_volume_load(p, local, &v) == 0 && v->directory)
		return errorf(ret_error, -EINVAL,
			      "volume_capability: volume %s is a directory volume: it is staged as "
			      "a filesystem only",
			      r->volume_id);
	return blocknode_stage(POOL_NODE(p, node_id, local, r->volume_id), r, mkfs, ret_error);
}

int pool_node_unstage(Pool *p, const char *local, const char *volume_id, const char *staging_path,
		      char **ret_error)
{
	return blocknode_unstage(POOL_NODE(p, NULL, local, volume_id), volume_id, staging_path,
				 ret_error);
}

int pool_node_publish(Pool *p, const char *node_id, const char *local, const BackendPublish *r,
		      char **ret_error)
{
	return blocknode_publish(POOL_NODE(p, node_id, local, r->volume_id), r, ret_error);
}

int pool_node_unpublish(Pool *p, const char *local, const char *volume_id, const char *target_path,
			char **ret_error)
{
	return blocknode_unpublish(POOL_NODE(p, NULL, local, volume_id), volume_id, target_path,
				   ret_error);
}

int pool_node_expand(Pool *p, const char *local, const char *volume_id, const char *volume_path,
		     uint64_t required, uint64_t limit, uint64_t *ret_size, char **ret_error)
{
	return blocknode_expand(POOL_NODE(p, NULL, local, volume_id), volume_id, volume_path,
				required, limit, ret_size, ret_error);
}

int pool_node_stats(Pool *p, const char *local, const char *volume_id, const char *volume_path,
		    BackendStats *ret, char **ret_error)
{
	return blocknode_stats(POOL_NODE(p, NULL, local, volume_id), volume_id, volume_path, ret,
			       ret_error);
}

bool pool_node_loop_volume(const char *volumes, const LoopInfo *l, char ret_id[POOL_ID_MAX])
{
	size_t n = strlen(volumes);

	if (l->deleted || strncmp(l->backing_file, volumes, n) != 0 || l->backing_file[n] != '/')
		return false;
	const char *id = l->backing_file + n + 1, *slash = strchr(id, '/');
	if (!slash || strcmp(slash, "/" DATA_FILE) != 0 || (size_t)(slash - id) >= POOL_ID_MAX)
		return false;
	memcpy(ret_id, id, (size_t)(slash - id));
	ret_id[slash - id] = 0;
	return pool_volume_id_valid(ret_id);
}

int pool_node_trim_all(Pool *p, uint64_t *ret_trimmed)
{
	_cleanup_free_ char *dir = xasprintf("%s/volumes", p->path);
	_cleanup_free_ char *volumes = realpath(dir, NULL);
	LoopInfo *loops = NULL;
	size_t n = 0;
	uint64_t total = 0;
	int count = 0;

	if (!volumes)
		return negative_errno();
	int r = loop_list_for_dir(volumes, &loops, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		char id[POOL_ID_MAX];
		uint64_t trimmed = 0;
		if (!pool_node_loop_volume(volumes, &loops[i], id))
			continue;
		r = blocknode_trim(POOL_NODE(p, NULL, id, NULL), id, &trimmed);
		if (r < 0) {
			/* Not mounted, or a device that cannot discard (a pool on ramfs). */
			log_debug_errno(r, "volume %s: not trimmed: %m", id);
			continue;
		}
		total += trimmed;
		count++;
	}
	loop_info_array_free(loops, n);
	*ret_trimmed = total;
	return count;
}

int pool_node_direct_io_check(Pool *p)
{
	char name[64];

	/* In tmp/: a name nobody else uses, removed by the next open if we die holding it. */
	snprintf(name, sizeof(name), ".direct-io-%016" PRIx64, random_u64());
	int fd = openat(p->tmp_fd, name, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EINVAL)
		return -EOPNOTSUPP;
	if (fd < 0)
		return negative_errno();
	close(fd);
	(void)unlinkat(p->tmp_fd, name, 0);
	return 0;
}
