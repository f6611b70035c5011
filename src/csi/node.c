/* SPDX-License-Identifier: Apache-2.0 */
/* Node service on the pool: a volume's data file becomes a loop device, formatted and mounted
 * at the staging path (or left raw for block volumes), then bind-mounted into each target.
 * Every decision is made from the machine's state (mountinfo, loop devices in sysfs), never
 * from memory, so a restart loses nothing and a retried call finds its finished work. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "alloc.h"
#include "blockfs.h"
#include "csi-util.h"
#include "failpoint.h"
#include "flex-volume.h"
#include "log.h"
#include "loopdev.h"
#include "mount-util.h"
#include "node.h"
#include "ownership.h"
#include "parse-util.h"

#define FSTYPE_KEY "csi.storage.k8s.io/fstype"
#define DEFAULT_FSTYPE "ext4"

/* Request paths: absolute, clean, and with no symlink in them, so a request cannot make us
 * mount somewhere it did not name. A path that does not exist yet is checked through its
 * parent. */
static int path_check_as(RpcCall *call, const char *field, const char *path, int bad)
{
	char resolved[PATH_MAX];

	if (!path || !*path)
		return rpc_fail(call, -EINVAL, "%s: missing", field);
	if (path[0] != '/' || strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../") ||
	    (strlen(path) > 1 && path[strlen(path) - 1] == '/') ||
	    (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0) ||
	    (strlen(path) >= 2 && strcmp(path + strlen(path) - 2, "/.") == 0))
		return rpc_fail(call, bad, "%s: '%s' is not a clean absolute path", field, path);
	if (strlen(path) >= PATH_MAX - 1)
		return rpc_fail(call, -EINVAL, "%s: too long", field);
	_cleanup_free_ char *copy = xstrdup(path);
	char *check = copy;
	struct stat st;
	if (lstat(path, &st) < 0) {
		char *slash = strrchr(copy, '/');
		if (slash == copy)
			return 0;
		*slash = 0; /* the parent must be real */
	} else if (S_ISLNK(st.st_mode))
		return rpc_fail(call, -EINVAL, "%s: '%s' is a symlink", field, path);
	if (!realpath(check, resolved))
		return 0; /* parent missing too: creating it below will fail with a clear error */
	if (strcmp(resolved, check) != 0)
		return rpc_fail(call, -EINVAL, "%s: '%s' goes through a symlink (to %s)", field,
				path, resolved);
	return 0;
}

static bool capability_block(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

static bool capability_readonly(const Csi__V1__VolumeCapability *cap)
{
	Csi__V1__VolumeCapability__AccessMode__Mode m = cap->access_mode->mode;
	return m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
}

static int path_check(RpcCall *call, const char *field, const char *path)
{
	return path_check_as(call, field, path, -EINVAL);
}

int node_path_check(RpcCall *call, const char *field, const char *path)
{
	return path_check(call, field, path);
}

/* The loop device of a volume: the one already attached to its data file, or a new one
 * (*ret_attached says which). -ENOENT for an unknown volume, -ENODEV for one without a device. */
static int volume_device(RpcCall *call, Driver *d, const char *volume_id, bool attach,
			 char **ret_dev, bool *ret_attached)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;

	if (!pool_volume_id_valid(volume_id) || pool_volume_load(d->pool, volume_id, &v) < 0)
		return rpc_fail(call, -ENOENT, "volume %s not found", volume_id);
	_cleanup_free_ char *data = pool_volume_data_path(d->pool, volume_id);
	int e = loop_find(data, ret_dev);
	if (e == 0 && ret_attached)
		*ret_attached = false;
	if (e == 0 || !attach)
		return e == 0 ? 0
			      : rpc_fail(call, -ENODEV, "volume %s is not staged on this node",
					 volume_id);
	e = loop_attach(data, false, ret_dev);
	if (e < 0)
		return rpc_fail(call, e, "volume %s: attaching a loop device failed: %s", volume_id,
				strerror(-e));
	log_info("volume %s attached as %s", volume_id, *ret_dev);
	if (ret_attached)
		*ret_attached = true;
	failpoint("node-stage-after-attach");
	return 0;
}

/* The filesystem options carried in the volume context, for mkfs. */
static int mkfs_options(RpcCall *call, Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **ctx,
			size_t n, BlockfsMkfsOptions *o)
{
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ ParamKV *kv = pbmap_to_kv((void *const *)ctx, n);
	VolumeParams p = {};

	if (volume_params_load(kv, n, &p, &err) < 0)
		return rpc_fail(call, -EINVAL, "volume_context: %s", err);
	*o = (BlockfsMkfsOptions){
		.block_size = p.block_size,
		.inode_size = p.inode_size,
		.bytes_per_inode = p.bytes_per_inode,
		.number_of_inodes = p.number_of_inodes,
		.ext4_bigalloc = p.ext4_bigalloc,
		.ext4_cluster_size = p.ext4_cluster_size,
	};
	volume_params_done(&p);
	return 0;
}

static const char *context_get(Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **ctx, size_t n,
			       const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ctx[i]->key, key) == 0)
			return ctx[i]->value;
	return NULL;
}

static char *join_flags(char **flags, size_t n)
{
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(flags[i]) + 1;
	char *s = xmalloc(len);
	s[0] = 0;
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(s, ",");
		strcat(s, flags[i]);
	}
	return s;
}

static int check_mount_flags(RpcCall *call, char **flags, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!*flags[i] || strchr(flags[i], ',') || strpbrk(flags[i], " \t\n"))
			return rpc_fail(call, -EINVAL,
					"volume_capability.mount.mount_flags[%zu]: '%s' is not one "
					"mount option",
					i, flags[i]);
	return 0;
}

/* Formats the device when it is blank, checks it when not; never destroys data. */
static int stage_prepare_fs(RpcCall *call, const Csi__V1__NodeStageVolumeRequest *r,
			    const char *dev, const char *fstype)
{
	_cleanup_free_ char *found = NULL, *err = NULL;
	BlockfsMkfsOptions o;

	int e = blockfs_probe(dev, &found);
	if (e < 0)
		return rpc_fail(call, e, "volume %s: probing %s failed: %s", r->volume_id, dev,
				strerror(-e));
	if (!*found) {
		if ((e = mkfs_options(call, r->volume_context, r->n_volume_context, &o)) < 0)
			return e;
		e = blockfs_mkfs(dev, fstype, &o, &err);
		if (e < 0)
			return rpc_fail(call, e, "volume %s: %s", r->volume_id,
					err ?: strerror(-e));
		log_info("volume %s: made %s on %s", r->volume_id, fstype, dev);
		failpoint("node-stage-after-mkfs");
		return 0;
	}
	if (strcmp(found, fstype) != 0)
		return rpc_fail(call, -ENOTEMPTY,
				"volume %s holds %s, not the requested %s: it is never reformatted",
				r->volume_id, found, fstype);
	e = blockfs_fsck(dev, found, &err);
	if (e < 0)
		return rpc_fail(call, -ENOTEMPTY,
				"volume %s: filesystem check found errors it could not fix, not "
				"mounting: %s",
				r->volume_id, err ?: strerror(-e));
	return 0;
}

/* Grows the filesystem when the device grew while nobody used it; a failure only warns. */
static void stage_grow(const Csi__V1__NodeStageVolumeRequest *r, const char *dev,
		       const char *mount_path, const char *fstype)
{
	_cleanup_free_ char *err = NULL;

	if (blockfs_needs_resize(dev, mount_path, fstype, &err) <= 0)
		return;
	int e = blockfs_resize(dev, mount_path, fstype, &err);
	if (e < 0)
		log_warning("volume %s: growing its filesystem failed: %s", r->volume_id,
			    err ?: strerror(-e));
}

static int stage_mount(RpcCall *call, const Csi__V1__NodeStageVolumeRequest *r, const char *dev)
{
	const Csi__V1__VolumeCapability__MountVolume *m = r->volume_capability->mount;
	const char *fstype = m->fs_type && *m->fs_type ? m->fs_type : NULL;
	_cleanup_free_ char *flags = NULL;
	bool readonly = capability_readonly(r->volume_capability);
	int e;

	if (!fstype)
		fstype = context_get(r->volume_context, r->n_volume_context, FSTYPE_KEY);
	if (!fstype || !*fstype)
		fstype = DEFAULT_FSTYPE;
	if ((e = check_mount_flags(call, m->mount_flags, m->n_mount_flags)) < 0)
		return e;
	if ((e = stage_prepare_fs(call, r, dev, fstype)) < 0)
		return e;
	/* ext grows unmounted: online resize needs CAP_SYS_RESOURCE. xfs grows only mounted. */
	bool grow_mounted = strcmp(fstype, "xfs") == 0;
	if (!readonly && !grow_mounted)
		stage_grow(r, dev, NULL, fstype);
	flags = join_flags(m->mount_flags, m->n_mount_flags);
	if (mkdir(r->staging_target_path, 0750) < 0 && errno != EEXIST)
		return rpc_fail(call, -errno, "staging_target_path: cannot create %s: %m",
				r->staging_target_path);
	e = mount_fs(dev, r->staging_target_path, fstype, flags, readonly);
	if (e < 0)
		return rpc_fail(call, e, "volume %s: mounting %s on %s failed: %s", r->volume_id,
				dev, r->staging_target_path, strerror(-e));
	if (!readonly && grow_mounted)
		stage_grow(r, dev, r->staging_target_path, fstype);
	log_info("volume %s: %s mounted on %s", r->volume_id, dev, r->staging_target_path);
	return 0;
}

/* What is mounted at a path already: 0 nothing, 1 our device (same source), or an error. */
static int mounted_here(RpcCall *call, const char *field, const char *path, const char *dev)
{
	MountInfo mi = {};
	struct stat st;

	int e = mount_find(path, &mi);
	if (e == -ENOENT)
		return 0;
	if (e < 0)
		return rpc_fail(call, e, "%s: reading the mount table failed: %s", field,
				strerror(-e));
	bool same = strcmp(mi.source, dev) == 0 ||
		    (stat(dev, &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == mi.devno);
	mount_info_done(&mi);
	if (!same)
		return rpc_fail(call, -EEXIST, "%s: %s already holds another device", field, path);
	return 1;
}

int node_stage_volume(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodeStageVolumeRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_free_ char *dev = NULL, *err = NULL;
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_stage(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if ((e = path_check(call, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if (capability_check(r->volume_capability, "volume_capability", &err) < 0)
		return rpc_fail(call, -EINVAL, "%s", err);
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return rpc_fail(call, -EBUSY, "an operation on volume %s is in progress",
				r->volume_id);
	bool attached = false;
	if ((e = volume_device(call, d, r->volume_id, true, &dev, &attached)) < 0)
		return e;
	if (!capability_block(r->volume_capability)) {
		e = mounted_here(call, "staging_target_path", r->staging_target_path, dev);
		if (e == 0)
			e = stage_mount(call, r, dev);
		if (e < 0) {
			/* A refused stage leaves no loop device it attached itself. */
			if (attached)
				(void)loop_detach(dev);
			return e;
		}
	}
	Csi__V1__NodeStageVolumeResponse *resp = xnew0(Csi__V1__NodeStageVolumeResponse, 1);
	csi__v1__node_stage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int node_unstage_volume(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodeUnstageVolumeRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_free_ char *dev = NULL;
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_unstage(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if ((e = path_check(call, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return rpc_fail(call, -EBUSY, "an operation on volume %s is in progress",
				r->volume_id);
	e = umount_all_at(r->staging_target_path);
	if (e < 0 && e != -ENOENT)
		return rpc_fail(call, e, "staging_target_path: unmounting %s failed: %s",
				r->staging_target_path, strerror(-e));
	_cleanup_free_ char *data = pool_volume_id_valid(r->volume_id)
					    ? pool_volume_data_path(d->pool, r->volume_id)
					    : NULL;
	if (data && loop_find(data, &dev) == 0) {
		e = loop_detach(dev);
		if (e < 0)
			return rpc_fail(call, e, "volume %s: detaching %s failed: %s%s",
					r->volume_id, dev, strerror(-e),
					e == -EBUSY ? " (still published somewhere?)" : "");
		log_info("volume %s: unstaged, %s detached", r->volume_id, dev);
	}
	Csi__V1__NodeUnstageVolumeResponse *resp = xnew0(Csi__V1__NodeUnstageVolumeResponse, 1);
	csi__v1__node_unstage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* Ownership for a volume_mount_group, right after the mount and before the pod sees it. The
 * volume's own policy (StorageClass parameter, carried in the context) wins over the default. */
static int publish_ownership(RpcCall *call, const Csi__V1__NodePublishVolumeRequest *r,
			     uint32_t gid)
{
	const Driver *d = rpc_call_userdata(call);
	const char *policy = NULL;

	for (size_t i = 0; i < r->n_volume_context; i++)
		if (strcmp(r->volume_context[i]->key, "fsGroupChangePolicy") == 0)
			policy = r->volume_context[i]->value;
	/* A read-only bind cannot be changed; the same tree through the staging mount can. */
	const char *where = r->readonly ? r->staging_target_path : r->target_path;
	int e = volume_ownership_apply(r->volume_id, where, gid, r->readonly, policy,
				       d->fs_group_policy);
	if (e < 0)
		return rpc_fail(call, e, "volume %s: giving %s to group %u failed: %s",
				r->volume_id, where, gid, strerror(-e));
	return 0;
}

/* A bind-mounted device node shows devtmpfs in mountinfo: compare the device numbers. */
static int block_published_here(RpcCall *call, const char *target, const char *dev)
{
	struct stat t, d;

	if (is_mount_point(target) <= 0)
		return 0;
	if (stat(target, &t) == 0 && stat(dev, &d) == 0 && S_ISBLK(t.st_mode) &&
	    t.st_rdev == d.st_rdev)
		return 1;
	return rpc_fail(call, -EEXIST, "target_path: %s already holds another device", target);
}

static int publish_block(RpcCall *call, const Csi__V1__NodePublishVolumeRequest *r, const char *dev)
{
	int e = block_published_here(call, r->target_path, dev);
	if (e != 0)
		return e < 0 ? e : 0;
	_cleanup_close_ int fd =
		open(r->target_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0)
		return rpc_fail(call, -errno, "target_path: cannot create %s: %m", r->target_path);
	e = mount_bind(dev, r->target_path, r->readonly, NULL);
	if (e < 0)
		return rpc_fail(call, e, "volume %s: binding %s to %s failed: %s", r->volume_id,
				dev, r->target_path, strerror(-e));
	return 0;
}

static int publish_mount(RpcCall *call, const Csi__V1__NodePublishVolumeRequest *r, const char *dev)
{
	const Csi__V1__VolumeCapability__MountVolume *m = r->volume_capability->mount;
	const char *group = m->volume_mount_group;
	_cleanup_free_ char *flags = NULL;
	uint32_t gid = OWNERSHIP_GID_NONE;
	int e;

	/* Checked before anything is mounted: a refused call leaves nothing behind. */
	if (group && *group && (parse_uint32(group, &gid) < 0 || gid == OWNERSHIP_GID_NONE))
		return rpc_fail(
			call, -EINVAL,
			"volume_capability.mount.volume_mount_group: '%s' is not a group id",
			group);
	if (mounted_here(call, "staging_target_path", r->staging_target_path, dev) != 1)
		return rpc_fail(call, -ENOTEMPTY,
				"volume %s is not staged at %s: call NodeStageVolume first",
				r->volume_id, r->staging_target_path);
	e = mounted_here(call, "target_path", r->target_path, dev);
	if (e < 0)
		return e;
	if (e == 0) {
		if ((e = check_mount_flags(call, m->mount_flags, m->n_mount_flags)) < 0)
			return e;
		if (mkdir(r->target_path, 0750) < 0 && errno != EEXIST)
			return rpc_fail(call, -errno, "target_path: cannot create %s: %m",
					r->target_path);
		flags = join_flags(m->mount_flags, m->n_mount_flags);
		e = mount_bind(r->staging_target_path, r->target_path, r->readonly, flags);
		if (e < 0)
			return rpc_fail(call, e, "volume %s: binding %s to %s failed: %s",
					r->volume_id, r->staging_target_path, r->target_path,
					strerror(-e));
		failpoint("node-publish-after-mount");
	}
	if (gid != OWNERSHIP_GID_NONE)
		return publish_ownership(call, r, gid);
	return 0;
}

int node_publish_volume(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodePublishVolumeRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_free_ char *dev = NULL, *err = NULL;
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_publish(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if ((e = path_check(call, "target_path", r->target_path)) < 0)
		return e;
	if (capability_check(r->volume_capability, "volume_capability", &err) < 0)
		return rpc_fail(call, -EINVAL, "%s", err);
	if ((e = path_check(call, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return rpc_fail(call, -EBUSY, "an operation on volume %s is in progress",
				r->volume_id);
	if ((e = volume_device(call, d, r->volume_id, false, &dev, NULL)) < 0)
		return e == -ENODEV ? rpc_fail(call, -ENOTEMPTY,
					       "volume %s is not staged on this node", r->volume_id)
				    : e;
	e = capability_block(r->volume_capability) ? publish_block(call, r, dev)
						   : publish_mount(call, r, dev);
	if (e < 0)
		return e;
	log_info("volume %s published at %s%s", r->volume_id, r->target_path,
		 r->readonly ? " (read-only)" : "");
	Csi__V1__NodePublishVolumeResponse *resp = xnew0(Csi__V1__NodePublishVolumeResponse, 1);
	csi__v1__node_publish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int node_unpublish_volume(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodeUnpublishVolumeRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	struct stat st;
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_unpublish(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if ((e = path_check(call, "target_path", r->target_path)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return rpc_fail(call, -EBUSY, "an operation on volume %s is in progress",
				r->volume_id);
	e = umount_all_at(r->target_path);
	if (e < 0 && e != -ENOENT)
		return rpc_fail(call, e, "target_path: unmounting %s failed: %s", r->target_path,
				strerror(-e));
	if (lstat(r->target_path, &st) == 0) {
		if (S_ISDIR(st.st_mode) ? rmdir(r->target_path) : unlink(r->target_path))
			return rpc_fail(call, -errno, "target_path: removing %s failed: %m",
					r->target_path);
	}
	log_info("volume %s unpublished from %s", r->volume_id, r->target_path);
	Csi__V1__NodeUnpublishVolumeResponse *resp = xnew0(Csi__V1__NodeUnpublishVolumeResponse, 1);
	csi__v1__node_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

static uint64_t device_size(const char *dev)
{
	uint64_t size = 0;
	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && ioctl(fd, BLKGETSIZE64, &size) < 0)
		size = 0;
	return size;
}

int node_expand_volume(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodeExpandVolumeRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_free_ char *dev = NULL, *err = NULL;
	MountInfo mi = {};
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_expand(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if (!r->volume_path || !*r->volume_path)
		return rpc_fail(call, -EINVAL, "volume_path: missing");
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return rpc_fail(call, -EBUSY, "an operation on volume %s is in progress",
				r->volume_id);
	if ((e = volume_device(call, d, r->volume_id, false, &dev, NULL)) < 0)
		return e;
	/* A path that cannot hold the volume means the volume is not found there. */
	if ((e = path_check_as(call, "volume_path", r->volume_path, -ENOENT)) < 0)
		return e;
	if ((e = loop_refresh_size(dev)) < 0)
		return rpc_fail(call, e, "volume %s: refreshing the size of %s failed: %s",
				r->volume_id, dev, strerror(-e));
	struct stat st;
	if (lstat(r->volume_path, &st) < 0)
		return rpc_fail(call, -ENOENT, "volume_path: %s does not exist", r->volume_path);
	bool block = r->volume_capability ? capability_block(r->volume_capability)
					  : !S_ISDIR(st.st_mode);
	if (!block) {
		if (mount_find(r->volume_path, &mi) < 0)
			return rpc_fail(call, -ENOTEMPTY, "volume_path: nothing is mounted at %s",
					r->volume_path);
		e = blockfs_resize(dev, r->volume_path, mi.fstype, &err);
		if (e < 0) {
			mount_info_done(&mi);
			return rpc_fail(call, e, "volume %s: growing the filesystem failed: %s",
					r->volume_id, err ?: strerror(-e));
		}
	}
	mount_info_done(&mi);
	log_info("volume %s expanded to %llu bytes", r->volume_id,
		 (unsigned long long)device_size(dev));
	Csi__V1__NodeExpandVolumeResponse *resp = xnew0(Csi__V1__NodeExpandVolumeResponse, 1);
	csi__v1__node_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)device_size(dev);
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

int node_get_volume_stats(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const Csi__V1__NodeGetVolumeStatsRequest *r = (const void *)req;
	Driver *d = rpc_call_userdata(call);
	_cleanup_free_ char *dev = NULL;
	BlockfsStats s = {};
	struct stat st;
	int e;

	/* Flexvolume volumes go to their driver. */
	if ((e = flex_node_get_volume_stats(call, req, ret)) <= 0)
		return e;
	if (!r->volume_id || !*r->volume_id)
		return rpc_fail(call, -EINVAL, "volume_id: missing");
	if (!r->volume_path || !*r->volume_path)
		return rpc_fail(call, -EINVAL, "volume_path: missing");
	if ((e = path_check_as(call, "volume_path", r->volume_path, -ENOENT)) < 0)
		return e;
	if (lstat(r->volume_path, &st) < 0)
		return rpc_fail(call, -ENOENT, "volume_path: %s does not exist", r->volume_path);
	if ((e = volume_device(call, d, r->volume_id, false, &dev, NULL)) < 0) {
		if (e != -ENODEV)
			return e;
		dev = NULL; /* known volume, device gone: report it abnormal below */
	}
	Csi__V1__NodeGetVolumeStatsResponse *resp = xnew0(Csi__V1__NodeGetVolumeStatsResponse, 1);
	csi__v1__node_get_volume_stats_response__init(resp);
	*ret = &resp->base;
	if (!dev) {
		resp->volume_condition = condition_new(
			true, xasprintf("the loop device of volume %s is gone", r->volume_id));
		return 0;
	}
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		resp->usage = xnew0(Csi__V1__VolumeUsage *, 1);
		resp->usage[0] =
			usage_new(CSI__V1__VOLUME_USAGE__UNIT__BYTES, device_size(dev), 0, 0);
		resp->n_usage = 1;
		resp->volume_condition = condition_new(false, xstrdup("device is attached"));
		return 0;
	}
	if (mounted_here(call, "volume_path", r->volume_path, dev) != 1) {
		resp->volume_condition =
			condition_new(true, xasprintf("volume %s is not mounted at %s",
						      r->volume_id, r->volume_path));
		return 0;
	}
	if ((e = blockfs_stats(r->volume_path, &s)) < 0)
		return rpc_fail(call, e, "volume_path: statvfs of %s failed: %s", r->volume_path,
				strerror(-e));
	resp->usage = xnew0(Csi__V1__VolumeUsage *, 2);
	resp->usage[0] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__BYTES, s.bytes_total, s.bytes_used,
				   s.bytes_available);
	resp->usage[1] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__INODES, s.inodes_total,
				   s.inodes_used, s.inodes_free);
	resp->n_usage = 2;
	MountInfo mi = {};
	bool fs_ro = mount_find(r->volume_path, &mi) == 0 && mi.fs_read_only;
	mount_info_done(&mi);
	resp->volume_condition =
		fs_ro ? condition_new(true, xstrdup("the filesystem turned read-only (errors?)"))
		      : condition_new(false, xstrdup("volume is mounted and writable"));
	return 0;
}

int node_get_capabilities(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	static const Csi__V1__NodeServiceCapability__RPC__Type types[] = {
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_MOUNT_GROUP,
	};
	(void)call;
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

int node_get_info(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	Driver *d = rpc_call_userdata(call);
	(void)req;
	Csi__V1__NodeGetInfoResponse *resp = xnew0(Csi__V1__NodeGetInfoResponse, 1);
	csi__v1__node_get_info_response__init(resp);
	resp->node_id = xstrdup(d->node_id);
	resp->max_volumes_per_node = d->max_volumes_per_node;
	resp->accessible_topology = topology_new(pool_zone(d->pool));
	*ret = &resp->base;
	return 0;
}
