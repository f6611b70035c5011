/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "error-util.h"
#include "failpoint.h"
#include "log.h"
#include "mount-util.h"
#include "params.h"
#include "pinned-path.h"
#include "random-util.h"
#include "strv.h"
#include "blocknode.h"

#define MAX_STACKED 64
#define XFS "xfs"

/* ---- the volume's device ---- */

void block_device_done(BlockDevice *d)
{
	free(d->path);
	*d = (BlockDevice){};
}

/* The volume's device as it is now: 0, -ENODEV when it has none here. */
static int device_find(const BlockNode *n, const char *id, BlockDevice *ret)
{
	return n->ops->device_find(n->userdata, id, NULL, ret);
}

/* The device of a volume without records, when the backend proves one: else none (dev empty),
 * and such a volume owns nothing on this machine. */
static void device_find_lost(const BlockNode *n, const char *id, BlockDevice *ret)
{
	*ret = (BlockDevice){};
	if (n->ops->device_find_lost && n->ops->device_find_lost(n->userdata, id, ret) < 0)
		*ret = (BlockDevice){};
}

/* The first mount of the volume (mount_find_by_devno() for a device; for a directory, the
 * first mount of its filesystem whose root is the directory): 0, or -ENOENT. */
static int device_mount_find(const BlockDevice *d, MountInfo *ret)
{
	_cleanup_strv_free_ char **targets = NULL;
	struct stat st;

	if (!d->dir_ino)
		return mount_find_by_devno(d->rdev, ret);
	int r = mount_list_by_devno(d->rdev, &targets);
	if (r < 0)
		return r;
	for (size_t i = 0; targets && targets[i]; i++)
		if (lstat(targets[i], &st) == 0 && st.st_dev == d->rdev &&
		    st.st_ino == d->dir_ino && mount_find(targets[i], ret) == 0)
			return 0;
	return -ENOENT;
}

static int device_release(const BlockNode *n, const BlockDevice *d)
{
	MountInfo mi = {};

	if (d->dir_ino)
		return 0; /* a directory: nothing to give up once its binds are gone */

	if (n->ops->device_release)
		return n->ops->device_release(n->userdata, d);
	/* A device the backend keeps is in use while anything mounts it. */
	if (device_mount_find(d, &mi) < 0)
		return 0;
	mount_info_done(&mi);
	return -EBUSY;
}

/* ---- what is at a request path ---- */

static int pin_path(const char *field, const char *path, int bad, PinnedPath *ret, char **ret_error)
{
	const char *why;

	if (request_path_check(path, &why) < 0)
		return errorf(ret_error, bad, "%s: '%s' is %s", field, path ?: "", why);
	int r = pinned_path_open(path, ret);
	if (r == -ELOOP)
		return errorf(ret_error, bad, "%s: '%s' goes through a symlink", field, path);
	if (r == -ENOENT || r == -ENOTDIR)
		return errorf(ret_error, bad, "%s: the parent directory of '%s' does not exist",
			      field, path);
	if (r < 0)
		return errorf(ret_error, r, "%s: cannot open the directory of '%s': %s", field,
			      path, strerror(-r));
	return 0;
}

static const char *kind_name(mode_t mode)
{
	return S_ISDIR(mode)   ? "a directory"
	       : S_ISREG(mode) ? "a regular file"
	       : S_ISLNK(mode) ? "a symlink"
	       : S_ISBLK(mode) ? "a block device"
	       : S_ISCHR(mode) ? "a character device"
			       : "a special file";
}

/* "a mount of tmpfs (tmpfs)", "a regular file": what a user needs to know to look for it. */
static char *describe(const PathObject *o)
{
	MountInfo mi = {};

	if (!o->mount_root)
		return xstrdup(kind_name(o->mode));
	if (mount_find_by_id(o->mnt_id, &mi) < 0)
		return xasprintf("a mount (%s)", kind_name(o->mode));
	char *s = xasprintf("a mount of %s (%s)", mi.fstype, mi.source);
	mount_info_done(&mi);
	return s;
}

/* The volume's filesystem mounted here (a staging mount, or a bind of it). */
static bool is_volume_fs(const PathObject *o, const BlockDevice *d)
{
	return d->path && o->mount_root && !S_ISBLK(o->mode) && o->dev == d->rdev &&
	       (!d->dir_ino || (S_ISDIR(o->mode) && o->ino == d->dir_ino));
}

/* The volume's device node bound here. */
static bool is_volume_dev(const PathObject *o, const BlockDevice *d)
{
	return d->path && !d->dir_ino && o->mount_root && S_ISBLK(o->mode) && o->rdev == d->rdev;
}

static bool is_volume(const PathObject *o, const BlockDevice *d)
{
	return is_volume_fs(o, d) || is_volume_dev(o, d);
}

static int stat_or_fail(const char *field, const char *path, const PinnedPath *pin, PathObject *ret,
			char **ret_error)
{
	int r = pinned_path_stat(pin, ret);
	if (r < 0)
		return r == -ENOENT ? r
				    : errorf(ret_error, r, "%s: cannot look at '%s': %s", field,
					     path, strerror(-r));
	if (S_ISLNK(ret->mode))
		return errorf(ret_error, -EINVAL, "%s: '%s' is a symlink", field, path);
	return 0;
}

static int in_the_way(const char *field, const char *path, const PathObject *o, const char *id,
		      char **ret_error)
{
	_cleanup_free_ char *what = describe(o);
	return errorf(ret_error, -ENOTEMPTY, "%s: '%s' holds %s, not volume %s: left as it is",
		      field, path, what, id);
}

/* Gets a mount point ready at the pinned path: 1 when the volume is mounted there already,
 * 0 when there is an empty directory (or, for a device, an empty file made here earlier) to
 * mount on, made now when missing. *ret_target describes what is there. */
static int mountpoint_prepare(const char *field, const char *path, const PinnedPath *pin,
			      const BlockDevice *dev, bool file, const NodeTarget *earlier,
			      const char *id, NodeTarget *ret_target, char **ret_error)
{
	PathObject o;

	int r = stat_or_fail(field, path, pin, &o, ret_error);
	bool created = false;
	if (r == -ENOENT) {
		if (file) {
			_cleanup_close_ int fd =
				openat(pin->parent_fd, pin->base,
				       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
			r = fd < 0 ? negative_errno() : 0;
		} else
			r = mkdirat(pin->parent_fd, pin->base, 0750) < 0 ? negative_errno() : 0;
		if (r < 0)
			return errorf(ret_error, r, "%s: cannot create '%s': %s", field, path,
				      strerror(-r));
		if ((r = stat_or_fail(field, path, pin, &o, ret_error)) < 0)
			return r == -ENOENT
				       ? errorf(ret_error, -EBUSY, "%s: '%s' vanished", field, path)
				       : r;
		created = true;
	} else if (r < 0)
		return r;
	else if (o.mount_root)
		return is_volume(&o, dev) ? 1 : in_the_way(field, path, &o, id, ret_error);
	else if (file) {
		/* Only a file made here for this volume (an earlier try that stopped half-way). */
		if (!S_ISREG(o.mode) || !earlier || !earlier->created || earlier->ino != o.ino ||
		    earlier->dev != o.dev)
			return errorf(
				ret_error, -ENOTEMPTY,
				"%s: '%s' exists (%s) and was not made by volplug: refusing to "
				"bind a device over it",
				field, path, kind_name(o.mode));
		created = true;
	} else if (!S_ISDIR(o.mode))
		return errorf(ret_error, -ENOTEMPTY, "%s: '%s' is %s, not a directory", field, path,
			      kind_name(o.mode));
	else {
		_cleanup_close_ int fd = pinned_path_open_object(pin, O_PATH | O_DIRECTORY);
		if (fd < 0 && (fd == -ENOTDIR || fd == -ELOOP || fd == -ENOENT))
			return errorf(ret_error, -EBUSY, "%s: '%s' changed during the call", field,
				      path);
		r = fd < 0 ? fd : dir_is_empty(fd);
		if (r < 0)
			return errorf(ret_error, r, "%s: cannot read '%s': %s", field, path,
				      strerror(-r));
		if (r == 0)
			return errorf(ret_error, -ENOTEMPTY,
				      "%s: '%s' is not empty: refusing to mount over it", field,
				      path);
		created = earlier && earlier->created && earlier->ino == o.ino;
	}
	*ret_target = (NodeTarget){
		.path = (char *)path,
		.created = created,
		.dev = o.dev,
		.ino = o.ino,
	};
	return 0;
}

/* Opens the mount point prepared above, checking it is still the same inode. */
static int mountpoint_open(const char *field, const PinnedPath *pin, const NodeTarget *t,
			   char **ret_error)
{
	struct stat st;

	int fd = pinned_path_open_object(pin, O_PATH);
	if (fd < 0)
		return errorf(ret_error, fd == -ENOENT ? -EBUSY : fd,
			      "%s: '%s' changed during the call", field, t->path);
	if (fstat(fd, &st) < 0 || st.st_ino != t->ino || st.st_dev != t->dev) {
		close(fd);
		return errorf(ret_error, -EBUSY, "%s: '%s' changed during the call", field,
			      t->path);
	}
	return fd;
}

/* Unmounts every mount of the volume stacked at the pinned path, topmost first, and stops at
 * anything else (left in place, -ENOTEMPTY). 0 when nothing is mounted there any more. */
static int unmount_volume(const char *field, const char *path, const PinnedPath *pin,
			  const BlockDevice *dev, const char *id, char **ret_error)
{
	for (int i = 0; i < MAX_STACKED; i++) {
		PathObject o;
		int r = stat_or_fail(field, path, pin, &o, ret_error);
		if (r == -ENOENT)
			return 0;
		if (r < 0)
			return r;
		if (!o.mount_root)
			return 0;
		if (!is_volume(&o, dev))
			return in_the_way(field, path, &o, id, ret_error);
		r = umount_at(pin);
		if (r == -EBUSY)
			return errorf(ret_error, -EBUSY,
				      "%s: '%s' is busy: a process still uses it", field, path);
		if (r < 0)
			return errorf(ret_error, r, "%s: unmounting '%s' failed: %s", field, path,
				      strerror(-r));
		if (r == 0)
			return errorf(ret_error, -EBUSY, "%s: '%s' changed during the call", field,
				      path);
	}
	return errorf(ret_error, -ELOOP, "%s: more than %d mounts at '%s'", field, MAX_STACKED,
		      path);
}

/* Removes what was made at the pinned path (t), once nothing is mounted there; anything else
 * stays. */
static int remove_made(const char *field, const PinnedPath *pin, const NodeTarget *t,
		       char **ret_error)
{
	PathObject o;

	if (!t || !t->created || pinned_path_stat(pin, &o) < 0)
		return 0;
	if (o.mount_root || o.ino != t->ino || o.dev != t->dev) {
		log_debug("%s: %s is not what was made there: left", field, t->path);
		return 0;
	}
	if (unlinkat(pin->parent_fd, pin->base, S_ISDIR(o.mode) ? AT_REMOVEDIR : 0) < 0 &&
	    errno != ENOENT)
		return errorf(ret_error, errno == ENOTEMPTY ? -ENOTEMPTY : negative_errno(),
			      "%s: removing '%s' failed: %m", field, t->path);
	return 0;
}

/* Once the volume's mounts are gone from the pinned path: what was made here goes; what the
 * CO made for the volume (recorded, or an empty directory) stays for the CO to remove;
 * anything else never was the volume's and is reported, untouched. */
static int undo_place(const char *field, const char *path, const PinnedPath *pin,
		      const NodeTarget *t, const char *id, char **ret_error)
{
	PathObject o;

	int r = stat_or_fail(field, path, pin, &o, ret_error);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (t)
		return remove_made(field, pin, t, ret_error);
	if (S_ISDIR(o.mode) && !o.mount_root) {
		_cleanup_close_ int fd = pinned_path_open_object(pin, O_PATH | O_DIRECTORY);
		if (fd >= 0 && dir_is_empty(fd) == 1)
			return 0;
		return errorf(ret_error, -ENOTEMPTY,
			      "%s: '%s' is a directory with files, not volume %s's: left as it is",
			      field, path, id);
	}
	return in_the_way(field, path, &o, id, ret_error);
}

/* ---- the use record, under the volume's node lock ---- */

typedef struct Use {
	const BlockNode *n;
	const char *id;
	int lock_fd;
	NodeUse rec;
} Use;

#define USE_NULL ((Use){.lock_fd = -EBADF})

static void use_end(Use *u)
{
	if (u->lock_fd >= 0) {
		if (u->n->ops->use_unlock)
			u->n->ops->use_unlock(u->n->userdata, u->id, u->lock_fd);
		close(u->lock_fd); /* closing drops the lock */
	}
	u->lock_fd = -EBADF;
	node_use_done(&u->rec);
}

static int use_begin(const BlockNode *n, const char *id, Use *ret, char **ret_error)
{
	int r = n->ops->use_lock(n->userdata, id, &ret->lock_fd);
	if (r == -ENOENT) {
		*ret_error = n->ops->not_found("volume_id", id);
		return r;
	}
	if (r == -ELOOP || r == -EISDIR || r == -EBADFD) {
		/* Never followed nor replaced: what is there is not the node service's. */
		_cleanup_free_ char *name = n->ops->lock_name(n->userdata, id);
		return errorf(ret_error, -EUCLEAN,
			      "volume %s is damaged: its node lock %s is %s, not a file of its "
			      "own: left as it is, nothing of the volume is changed",
			      id, name,
			      r == -ELOOP    ? "a symbolic link"
			      : r == -EISDIR ? "a directory"
					     : "not a regular file");
	}
	if (r < 0)
		return errorf(ret_error, r, "volume %s: cannot lock it: %s", id, strerror(-r));
	ret->n = n;
	ret->id = id;
	if ((r = n->ops->use_load(n->userdata, id, &ret->rec)) < 0)
		return errorf(ret_error, r, "volume %s: its node record is unreadable: %s", id,
			      strerror(-r));
	return 0;
}

static int use_save(Use *u, bool durable, char **ret_error)
{
	int r = u->n->ops->use_save(u->n->userdata, u->id, &u->rec, durable);
	if (r < 0)
		return errorf(ret_error, r, "volume %s: writing its node record failed: %s", u->id,
			      strerror(-r));
	return 0;
}

/* Saving on the way out of a failed step: the step's own error is what the caller hears. */
static void use_save_quietly(Use *u)
{
	(void)u->n->ops->use_save(u->n->userdata, u->id, &u->rec, false);
}

static void use_set_staging(Use *u, const NodeTarget *t, bool block, const char *fstype)
{
	free(u->rec.node);
	free(u->rec.staging.path);
	free(u->rec.fstype);
	u->rec.node = xstrdup(u->n->node_id);
	u->rec.staging = *t;
	u->rec.staging.path = xstrdup(t->path);
	u->rec.staged_block = block;
	u->rec.fstype = xstrdup(fstype ?: "");
}

/* Where the backend records which device it staged (a device name given at attach has no
 * other proof on later calls), the record gets it once the device is there. */
static int use_set_device(Use *u, const BlockDevice *dev, char **ret_error)
{
	if (!u->n->record_device || (u->rec.device && strcmp(u->rec.device, dev->path) == 0))
		return 0;
	free(u->rec.device);
	u->rec.device = xstrdup(dev->path);
	return use_save(u, false, ret_error);
}

static void use_clear_staging(Use *u)
{
	free(u->rec.staging.path);
	free(u->rec.fstype);
	free(u->rec.device);
	u->rec.staging = (NodeTarget){};
	u->rec.fstype = NULL;
	u->rec.device = NULL;
	u->rec.staged_block = false;
}

/* ---- mount options ---- */

/* Every option must be one the kernel takes for fstype (a per-mount flag, or the filesystem's
 * own): each is checked alone so the reply names it. */
static int check_mount_flags(const char *fstype, char *const *flags, size_t n, char **ret_error)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *why = NULL;
		if (!*flags[i] || strpbrk(flags[i], ", \t\n"))
			return errorf(ret_error, -EINVAL,
				      "volume_capability.mount.mount_flags[%zu]: '%s' is not one "
				      "mount option",
				      i, flags[i]);
		if (mount_options_check(fstype, flags[i], &why) < 0)
			return errorf(
				ret_error, -EINVAL,
				"volume_capability.mount.mount_flags[%zu]: '%s' is not an option "
				"of %s: %s",
				i, flags[i], fstype, why ?: "refused");
	}
	return 0;
}

static char *join_flags(char *const *flags, size_t n, const char *extra)
{
	char *s = xstrdup(extra ?: "");
	for (size_t i = 0; i < n; i++) {
		char *t = *s ? xasprintf("%s,%s", s, flags[i]) : xstrdup(flags[i]);
		free(s);
		s = t;
	}
	return s;
}

/* ---- NodeStageVolume ---- */

bool blocknode_fstype_supported(const char *fstype)
{
	static const char *const fs_types[] = {"", "ext2", "ext3", "ext4", XFS};

	for (size_t i = 0; i < ELEMENTSOF(fs_types); i++)
		if (strcmp(fstype, fs_types[i]) == 0)
			return true;
	return false;
}

int blocknode_stage_defaults(const BackendStage *r, const char **ret_fstype,
			     BlockfsMkfsOptions *ret_mkfs, char **ret_error)
{
	static const Strmap no_context = {};
	const Strmap *context = r->volume_context ?: &no_context;
	const char *fstype = r->access.fstype;
	_cleanup_free_ char *err = NULL;
	VolumeParams p = {};

	if (!fstype || !*fstype)
		fstype = strmap_get(context, BLOCKNODE_CONTEXT_FSTYPE);
	if (fstype && !blocknode_fstype_supported(fstype))
		return errorf(ret_error, -EINVAL,
			      "volume_context: " BLOCKNODE_CONTEXT_FSTYPE " '%s' is not made here "
			      "(want ext2, ext3, ext4 or xfs)",
			      fstype);
	if (volume_params_load_strmap(context, &p, &err) < 0)
		return errorf(ret_error, -EINVAL, "volume_context: %s", err);
	*ret_mkfs = (BlockfsMkfsOptions){
		.block_size = p.block_size,
		.inode_size = p.inode_size,
		.bytes_per_inode = p.bytes_per_inode,
		.number_of_inodes = p.number_of_inodes,
		.ext4_bigalloc = p.ext4_bigalloc,
		.ext4_cluster_size = p.ext4_cluster_size,
		.ext4_encryption = p.ext4_encryption,
		.ext4_fast_commit = p.ext4_fast_commit,
	};
	volume_params_done(&p);
	*ret_fstype = fstype && *fstype ? fstype : BLOCKNODE_DEFAULT_FSTYPE;
	return 0;
}

/* A UUID for a new filesystem (version 4, random). Caller frees. */
static char *new_uuid(void)
{
	uint64_t a = random_u64(), b = random_u64();

	a = (a & ~UINT64_C(0xf000)) | UINT64_C(0x4000);	      /* version 4 */
	b = (b & ~(UINT64_C(3) << 62)) | (UINT64_C(2) << 62); /* RFC 4122 variant */
	return xasprintf("%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
			 (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff),
			 (unsigned)(b >> 48), (unsigned long long)(b & UINT64_C(0xffffffffffff)));
}

/* Whether what is on dev is the filesystem a mkfs under mark left: it has the UUID that mkfs
 * was given, and no mark says the mkfs finished. */
static bool is_half_made(const BlockMkfsMark *mark, const char *dev)
{
	_cleanup_free_ char *uuid = NULL;

	if (mark->state != NODE_MKFS_STARTED || !mark->uuid || !*mark->uuid)
		return false;
	if (blockfs_probe_uuid(dev, &uuid) < 0)
		return false;
	return strcasecmp(uuid, mark->uuid) == 0;
}

/* mkfs under the volume's mark: "started" (durable) before, "done" (durable) after, so that a
 * crash at any point leaves either a blank device, a filesystem the mark proves half made (made
 * again by the next try), or a finished one marked done. A failed mkfs leaves "started". */
static int format_marked(const char *volume_id, const char *dev, const char *fstype,
			 const BlockfsMkfsOptions *mkfs, const BlockMkfsMark *mark,
			 const char *uuid, char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	BlockfsMkfsOptions o = mkfs ? *mkfs : (BlockfsMkfsOptions){};
	int e;

	_cleanup_free_ char *id = xstrdup(uuid); /* uuid may be the mark's own */
	if ((e = mark->save(mark->userdata, NODE_MKFS_STARTED, fstype, id, ret_error)) < 0)
		return e;
	o.uuid = id;
	e = blockfs_mkfs(dev, fstype, &o, &err);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: %s", volume_id, err ?: strerror(-e));
	log_debug("volume %s: made %s on %s", volume_id, fstype, dev);
	failpoint("node-stage-after-mkfs");
	return mark->save(mark->userdata, NODE_MKFS_DONE, fstype, id, ret_error);
}

int blocknode_format(const char *volume_id, const char *dev, const char *fstype,
		     const BlockfsMkfsOptions *mkfs, const BlockMkfsMark *mark, char **ret_found,
		     char **ret_error)
{
	_cleanup_free_ char *found = NULL;

	int e = blockfs_probe(dev, &found);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: probing %s failed: %s", volume_id, dev,
			      strerror(-e));
	if (!*found) {
		_cleanup_free_ char *uuid = new_uuid();
		e = format_marked(volume_id, dev, fstype, mkfs, mark, uuid, ret_error);
	} else if (is_half_made(mark, dev)) {
		/* Only the mkfs that was interrupted ever wrote to it: nothing to keep. */
		log_warning("volume %s: %s on %s is what an interrupted mkfs left (uuid %s): "
			    "making it again",
			    volume_id, found, dev, mark->uuid);
		if ((e = blockfs_wipe(dev)) < 0)
			return errorf(
				ret_error, e,
				"volume %s: erasing the half-made filesystem on %s failed: %s",
				volume_id, dev, strerror(-e));
		_cleanup_free_ char *uuid = xstrdup(mark->uuid);
		e = format_marked(volume_id, dev, fstype, mkfs, mark, uuid, ret_error);
	} else {
		*ret_found = TAKE_PTR(found);
		return 0;
	}
	if (e < 0)
		return e;
	*ret_found = xstrdup("");
	return 0;
}

/* The mark of a Use: its record's, saved with it. */
static int use_save_mkfs(void *userdata, NodeMkfs state, const char *fstype, const char *uuid,
			 char **ret_error)
{
	Use *u = userdata;

	node_use_set_mkfs(&u->rec, state, fstype, uuid);
	return use_save(u, true, ret_error);
}

/* Formats the device when it is blank (or holds only what an interrupted mkfs of ours left),
 * checks it when not; never destroys data. */
static int stage_prepare_fs(const BackendStage *r, Use *u, const BlockfsMkfsOptions *mkfs,
			    const BlockDevice *dev, char **ret_error)
{
	_cleanup_free_ char *found = NULL, *err = NULL;
	BlockMkfsMark mark = {
		.state = u->rec.mkfs,
		.uuid = u->rec.mkfs_uuid,
		.save = use_save_mkfs,
		.userdata = u,
	};

	int e = blocknode_format(r->volume_id, dev->path, r->access.fstype, mkfs, &mark, &found,
				 ret_error);
	if (e < 0 || !*found)
		return e;
	if (strcmp(found, r->access.fstype) != 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s holds %s, not the requested %s: it is never reformatted",
			      r->volume_id, found, r->access.fstype);
	e = blockfs_fsck(dev->path, found, &err);
	if (e < 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s: filesystem check found errors it could not fix, not "
			      "mounting: %s",
			      r->volume_id, err ?: strerror(-e));
	return 0;
}

/* Grows the filesystem when the device grew while nobody used it; a failure only warns. */
static void stage_grow(const BackendStage *r, const BlockDevice *dev, const char *mount_path)
{
	_cleanup_free_ char *err = NULL;

	if (blockfs_needs_resize(dev->path, mount_path, r->access.fstype, &err) <= 0)
		return;
	int e = blockfs_resize(dev->path, mount_path, r->access.fstype, &err);
	if (e < 0)
		log_warning("volume %s: growing its filesystem failed: %s", r->volume_id,
			    err ?: strerror(-e));
}

/* Binds a directory volume's directory on the staging directory: no filesystem is made or
 * checked, the directory is the pool's. nodev, nosuid: the pool's filesystem is the host's,
 * and nothing a pod finds there may open a host device or raise privileges. */
static int stage_bind_dir(const BlockNode *n, const BackendStage *r, const BlockDevice *dev,
			  const PinnedPath *pin, const NodeTarget *t, char **ret_error)
{
	struct stat st;

	if (!n->ops->dir_open)
		return errorf(ret_error, -EINVAL, "volume %s: no directory to bind", r->volume_id);
	_cleanup_close_ int src = n->ops->dir_open(n->userdata, r->volume_id);
	if (src < 0)
		return errorf(ret_error, src, "volume %s: opening its directory %s failed: %s",
			      r->volume_id, dev->path, strerror(-src));
	if (fstat(src, &st) < 0 || st.st_dev != dev->rdev || st.st_ino != dev->dir_ino)
		return errorf(ret_error, -EBUSY, "volume %s: %s changed during the call",
			      r->volume_id, dev->path);
	_cleanup_close_ int fd = mountpoint_open("staging_target_path", pin, t, ret_error);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *flags = join_flags(r->mount_flags, r->n_mount_flags, "nodev,nosuid");
	int e = mount_bind_at(src, pin, fd, r->access.read_only, flags);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: binding %s on '%s' failed: %s",
			      r->volume_id, dev->path, r->staging_path, strerror(-e));
	return 0;
}

/* Mounts the prepared filesystem on the staging directory (opened again, checked unchanged). */
static int stage_mount(const BlockNode *n, const BackendStage *r, const BlockDevice *dev,
		       const PinnedPath *pin, const NodeTarget *t, char **ret_error)
{
	_cleanup_free_ char *why = NULL;
	/* Clones and restored snapshots carry their source's UUID, which xfs refuses twice. */
	_cleanup_free_ char *options =
		join_flags(r->mount_flags, r->n_mount_flags,
			   strcmp(r->access.fstype, XFS) == 0 ? "nouuid" : NULL);
	bool grow_mounted = strcmp(r->access.fstype, XFS) == 0;

	if (dev->dir_ino)
		return stage_bind_dir(n, r, dev, pin, t, ret_error);
	/* ext grows unmounted: online resize needs CAP_SYS_RESOURCE. xfs grows only mounted. */
	if (!r->access.read_only && !grow_mounted)
		stage_grow(r, dev, NULL);
	_cleanup_close_ int fd = mountpoint_open("staging_target_path", pin, t, ret_error);
	if (fd < 0)
		return fd;
	int e = mount_fs_at(dev->path, fd, r->access.fstype, options, r->access.read_only, &why);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: mounting %s (%s) on '%s' failed: %s%s%s",
			      r->volume_id, dev->path, r->access.fstype, r->staging_path,
			      strerror(-e), why ? ": " : "", why ?: "");
	if (!r->access.read_only && grow_mounted)
		stage_grow(r, dev, r->staging_path);
	return 0;
}

/* The volume staged elsewhere on this machine and still in use there. */
static int stage_check_elsewhere(const BackendStage *r, const Use *u, const BlockDevice *dev,
				 char **ret_error)
{
	MountInfo mi = {};

	if (!dev->path)
		return 0;
	if (u->rec.staging.path && strcmp(u->rec.staging.path, r->staging_path) != 0 &&
	    (u->rec.staged_block || device_mount_find(dev, &mi) == 0)) {
		mount_info_done(&mi);
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is already staged at '%s' on node %s", r->volume_id,
			      u->rec.staging.path, u->rec.node ?: "?");
	}
	if (!r->access.block && device_mount_find(dev, &mi) == 0) {
		int e = errorf(ret_error, -ENOTEMPTY,
			       "volume %s is already mounted at '%s': it is staged elsewhere",
			       r->volume_id, mi.target);
		mount_info_done(&mi);
		return e;
	}
	return 0;
}

static int stage_undo(Use *u, BlockDevice *dev, const PinnedPath *pin, const NodeTarget *t, int e)
{
	_cleanup_free_ char *ignored = NULL;

	if (dev->attached_now && u->n->ops->device_release)
		(void)u->n->ops->device_release(u->n->userdata, dev);
	if (pin)
		(void)remove_made("staging_target_path", pin, t, &ignored);
	use_clear_staging(u);
	use_save_quietly(u);
	return e;
}

/* The device as it is before the stage acts (the publish context may name it). */
static int stage_find(const BackendStage *r, Use *u, BlockDevice *ret, char **ret_error)
{
	int e = u->n->ops->device_find(u->n->userdata, r->volume_id, r->publish_context, ret);
	if (e < 0 && e != -ENODEV)
		return errorf(ret_error, e, "volume %s: %s", r->volume_id, strerror(-e));
	return 0;
}

/* Raw block volumes keep the sectors block devices had before the node service chose larger
 * ones for filesystems: what their users wrote may depend on them. */
#define RAW_BLOCK_SIZE 512

/* The device for the stage: made present, or waited for. block_size_max: see BlockNodeOps. */
static int stage_get(const BackendStage *r, Use *u, uint32_t block_size_max, BlockDevice *dev,
		     char **ret_error)
{
	block_device_done(dev);
	int e = u->n->ops->device_get(u->n->userdata, r->volume_id, r->publish_context,
				      block_size_max, dev, ret_error);
	return e < 0 ? e : use_set_device(u, dev, ret_error);
}

static int stage_block(const BackendStage *r, Use *u, char **ret_error)
{
	_cleanup_(block_device_done) BlockDevice dev = {};
	NodeTarget t = {.path = (char *)r->staging_path};
	const char *why;
	int e;

	/* Nothing is made or mounted at the staging path of a block volume: it is only named. */
	if (request_path_check(r->staging_path, &why) < 0)
		return errorf(ret_error, -EINVAL, "staging_target_path: '%s' is %s",
			      r->staging_path ?: "", why);
	if ((e = stage_find(r, u, &dev, ret_error)) < 0)
		return e;
	if (u->rec.staging.path && !u->rec.staged_block && dev.path)
		return errorf(ret_error, -EEXIST, "volume %s is staged as a filesystem at '%s'",
			      r->volume_id, u->rec.staging.path);
	if ((e = stage_check_elsewhere(r, u, &dev, ret_error)) < 0)
		return e;
	use_set_staging(u, &t, true, NULL);
	/* Handed out raw, whatever is on the device is the user's from now on: a mkfs of ours
	 * that stopped half-way is no reason to erase it any more. */
	bool unmark = u->rec.mkfs == NODE_MKFS_STARTED;
	if (unmark)
		node_use_set_mkfs(&u->rec, NODE_MKFS_NONE, NULL, NULL);
	if ((e = use_save(u, unmark, ret_error)) < 0)
		return e;
	if ((e = stage_get(r, u, RAW_BLOCK_SIZE, &dev, ret_error)) < 0)
		return stage_undo(u, &dev, NULL, NULL, e);
	return 0;
}

/* Staged at the staging path already (e: what mountpoint_prepare() found), in the same way. */
static int stage_existing(const BackendStage *r, Use *u, const PinnedPath *pin, char **ret_error)
{
	struct statvfs sv;

	_cleanup_close_ int fd = pinned_path_open_object(pin, O_PATH | O_DIRECTORY);
	if (fd >= 0 && fstatvfs(fd, &sv) == 0 && !!(sv.f_flag & ST_RDONLY) != r->access.read_only)
		return errorf(ret_error, -EEXIST, "volume %s is staged at '%s' %s already",
			      r->volume_id, r->staging_path,
			      r->access.read_only ? "read-write" : "read-only");
	if (u->rec.staging.path)
		return 0; /* staged there already */
	/* Staged before use records existed: record it now (made elsewhere). */
	use_set_staging(u, &(NodeTarget){.path = (char *)r->staging_path}, false, r->access.fstype);
	return use_save(u, false, ret_error);
}

static int stage_fs(const BackendStage *r, const BlockfsMkfsOptions *mkfs, Use *u,
		    const PinnedPath *pin, char **ret_error)
{
	_cleanup_(block_device_done) BlockDevice dev = {};
	NodeTarget t;
	int e;

	if ((e = stage_find(r, u, &dev, ret_error)) < 0)
		return e;
	if (u->rec.staging.path && u->rec.staged_block && dev.path)
		return errorf(ret_error, -EEXIST,
			      "volume %s is staged for raw block access at '%s'", r->volume_id,
			      u->rec.staging.path);
	e = mountpoint_prepare("staging_target_path", r->staging_path, pin, &dev, false,
			       &u->rec.staging, r->volume_id, &t, ret_error);
	if (e < 0)
		return e;
	if (e == 1)
		return stage_existing(r, u, pin, ret_error);
	if ((e = stage_check_elsewhere(r, u, &dev, ret_error)) < 0) {
		_cleanup_free_ char *ignored = NULL;
		(void)remove_made("staging_target_path", pin, &t, &ignored);
		return e;
	}
	/* Recorded before anything is done: a crash leaves a record of a step not taken, never
	 * a step without its record. */
	use_set_staging(u, &t, false, r->access.fstype);
	if ((e = use_save(u, false, ret_error)) < 0)
		return stage_undo(u, &dev, pin, &t, e);
	/* A filesystem asked for with blocks smaller than the device's would not be made. */
	if ((e = stage_get(r, u, mkfs ? mkfs->block_size : 0, &dev, ret_error)) < 0 ||
	    (!dev.dir_ino && (e = stage_prepare_fs(r, u, mkfs, &dev, ret_error)) < 0) ||
	    (e = stage_mount(u->n, r, &dev, pin, &t, ret_error)) < 0)
		return stage_undo(u, &dev, pin, &t, e);
	return 0;
}

int blocknode_stage(const BlockNode *n, const BackendStage *r, const BlockfsMkfsOptions *mkfs,
		    char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(use_end) Use u = USE_NULL;
	int e;

	if (!r->access.block) {
		if ((e = check_mount_flags(r->access.fstype, r->mount_flags, r->n_mount_flags,
					   ret_error)) < 0)
			return e;
		if ((e = pin_path("staging_target_path", r->staging_path, -EINVAL, &pin,
				  ret_error)) < 0)
			return e;
	}
	if ((e = use_begin(n, r->volume_id, &u, ret_error)) < 0)
		return e;
	return r->access.block ? stage_block(r, &u, ret_error)
			       : stage_fs(r, mkfs, &u, &pin, ret_error);
}

/* ---- NodeUnstageVolume ---- */

/* A publish target of the volume still mounted: unstaging under it would fail half-way. */
static int unstage_check_published(const Use *u, const BlockDevice *dev, const char *id,
				   char **ret_error)
{
	for (size_t i = 0; i < u->rec.n_targets; i++) {
		_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
		PathObject o;
		if (pinned_path_open(u->rec.targets[i].path, &pin) < 0 ||
		    pinned_path_stat(&pin, &o) < 0 || !is_volume(&o, dev))
			continue;
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is still published at '%s': unpublish it first", id,
			      u->rec.targets[i].path);
	}
	return 0;
}

/* Why the device could not be given up after the staging mount went. */
static int unstage_busy(const char *id, const char *staging_path, const BlockDevice *dev, int e,
			char **ret_error)
{
	MountInfo mi = {};

	if (e != -EBUSY)
		return errorf(ret_error, e, "volume %s: releasing %s failed: %s", id, dev->path,
			      strerror(-e));
	if (device_mount_find(dev, &mi) == 0) {
		e = errorf(ret_error, -ENOTEMPTY,
			   "staging_target_path: volume %s is staged at '%s', not at '%s'", id,
			   mi.target, staging_path);
		mount_info_done(&mi);
		return e;
	}
	return errorf(ret_error, -EBUSY, "volume %s: %s is still in use", id, dev->path);
}

/* Whether the kernel's table has a mount of the volume's filesystem at path, seen or under
 * whatever was mounted over it later. */
static bool volume_mounted_at(const BlockDevice *dev, const char *path)
{
	_cleanup_strv_free_ char **targets = NULL;
	struct stat st;

	if (!dev->path || mount_list_by_devno(dev->rdev, &targets) < 0)
		return false;
	for (size_t i = 0; targets && targets[i]; i++)
		if (strcmp(targets[i], path) == 0)
			/* a directory's filesystem is mounted elsewhere too: its root must be it */
			return !dev->dir_ino || (lstat(path, &st) == 0 && st.st_dev == dev->rdev &&
						 st.st_ino == dev->dir_ino);
	return false;
}

/* Unstaging a volume without records: its lost device's mount goes, then the device. */
static int unstage_lost(const BlockNode *n, const char *id, const char *staging_path,
			const PinnedPath *pin, char **ret_error)
{
	_cleanup_(block_device_done) BlockDevice dev = {};

	device_find_lost(n, id, &dev);
	int e = unmount_volume("staging_target_path", staging_path, pin, &dev, id, ret_error)
			?: undo_place("staging_target_path", staging_path, pin, NULL, id,
				      ret_error);
	if (e < 0 || !dev.path)
		return e;
	e = device_release(n, &dev);
	return e < 0 ? unstage_busy(id, staging_path, &dev, e, ret_error) : 0;
}

int blocknode_unstage(const BlockNode *n, const char *id, const char *staging_path,
		      char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(use_end) Use u = USE_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	_cleanup_free_ char *ignored = NULL;
	int e;

	if ((e = pin_path("staging_target_path", staging_path, -EINVAL, &pin, ret_error)) < 0)
		return e;
	e = use_begin(n, id, &u, &ignored);
	if (e == -ENOENT) /* an unknown volume owns nothing there but its lost device's mounts */
		return unstage_lost(n, id, staging_path, &pin, ret_error);
	if (e < 0)
		return error_pass(e, &ignored, ret_error);
	e = device_find(n, id, &dev);
	if (e < 0 && e != -ENODEV)
		return errorf(ret_error, e, "volume %s: %s", id, strerror(-e));
	/* Not staged there (CSI: OK): nothing of the volume to undo, and whatever is there, or
	 * wherever the volume is staged, stays as it is. */
	PathObject o;
	e = stat_or_fail("staging_target_path", staging_path, &pin, &o, ret_error);
	if (e < 0 && e != -ENOENT)
		return e; /* a symlink, or what cannot be looked at */
	bool here = u.rec.staging.path && strcmp(u.rec.staging.path, staging_path) == 0;
	if (!here && !volume_mounted_at(&dev, staging_path))
		return 0;
	if ((e = unstage_check_published(&u, &dev, id, ret_error)) < 0)
		return e;
	if ((e = unmount_volume("staging_target_path", staging_path, &pin, &dev, id, ret_error)) <
	    0)
		return e;
	if ((e = undo_place("staging_target_path", staging_path, &pin, here ? &u.rec.staging : NULL,
			    id, ret_error)) < 0)
		return e;
	if (dev.path && (e = device_release(n, &dev)) < 0)
		return unstage_busy(id, staging_path, &dev, e, ret_error);
	/* Released: nothing of the volume is mounted on this machine any more. */
	use_clear_staging(&u);
	for (size_t i = 0; i < u.rec.n_targets; i++)
		free(u.rec.targets[i].path);
	u.rec.n_targets = 0;
	return use_save(&u, false, ret_error);
}

/* ---- NodePublishVolume ---- */

/* What gets bound onto the target: the staging mount's root, or the device node. */
static int publish_source(const BackendPublish *r, const Use *u, const BlockDevice *dev,
			  int *ret_fd, char **ret_error)
{
	MountInfo mi = {};
	PathObject o;
	int e;

	if (r->access.block) {
		if (mount_find_by_devno(dev->rdev, &mi) == 0) {
			e = errorf(ret_error, -ENOTEMPTY,
				   "volume %s is staged as a filesystem (mounted at '%s'): its raw "
				   "device is not published while it is mounted",
				   r->volume_id, mi.target);
			mount_info_done(&mi);
			return e;
		}
		int fd = open(dev->path, O_PATH | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISBLK(st.st_mode) ||
		    st.st_rdev != dev->rdev) {
			closep(&fd);
			return errorf(ret_error, -EBUSY, "volume %s: %s changed during the call",
				      r->volume_id, dev->path);
		}
		*ret_fd = fd;
		return 0;
	}
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	if ((e = pin_path("staging_target_path", r->staging_path, -EINVAL, &pin, ret_error)) < 0)
		return e;
	e = stat_or_fail("staging_target_path", r->staging_path, &pin, &o, ret_error);
	if (e < 0 && e != -ENOENT)
		return e;
	if (e < 0 || !is_volume_fs(&o, dev))
		return errorf(ret_error, -ENOTEMPTY,
			      "staging_target_path: volume %s is not staged at '%s': call "
			      "NodeStageVolume first%s",
			      r->volume_id, r->staging_path,
			      u->rec.staged_block ? " (it is staged for raw block access)" : "");
	int fd = pinned_path_open_object(&pin, O_PATH | O_DIRECTORY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != dev->rdev || st.st_ino != o.ino) {
		closep(&fd);
		return errorf(ret_error, -EBUSY,
			      "staging_target_path: '%s' changed during the call", r->staging_path);
	}
	*ret_fd = fd;
	return 0;
}

static int publish_check_flags(const BackendPublish *r, const Use *u, char **ret_error)
{
	if (r->access.block || r->n_mount_flags == 0)
		return 0;
	/* Per-mount flags apply to the bind; the filesystem's own options belong to the stage
	 * (the kubelet passes the same list to both) and must at least be the filesystem's. */
	return check_mount_flags(u->rec.fstype && *u->rec.fstype ? u->rec.fstype : "ext4",
				 r->mount_flags, r->n_mount_flags, ret_error);
}

/* fsGroup and the like, on the mount the pod will see (through the staging mount when the
 * publish is read-only). */
static int publish_prepare(const BackendPublish *r, const PinnedPath *pin, int source_fd,
			   const BlockDevice *dev, char **ret_error)
{
	PathObject o;

	if (!r->prepare || r->access.block)
		return 0;
	_cleanup_close_ int fd = pinned_path_open_object(pin, O_PATH | O_DIRECTORY);
	if (fd < 0 || pinned_path_stat(pin, &o) < 0 || !is_volume_fs(&o, dev))
		return errorf(ret_error, -EBUSY, "target_path: '%s' changed during the call",
			      r->target_path);
	return r->prepare(r->read_only ? source_fd : fd, r->read_only, NULL, r->userdata,
			  ret_error);
}

static int publish_existing(const BackendPublish *r, Use *u, const PinnedPath *pin, int source_fd,
			    const BlockDevice *dev, char **ret_error)
{
	struct statvfs sv;

	_cleanup_close_ int fd = pinned_path_open_object(pin, O_PATH);
	if (fd < 0 || fstatvfs(fd, &sv) < 0)
		return errorf(ret_error, -EBUSY, "target_path: '%s' changed during the call",
			      r->target_path);
	if (!!(sv.f_flag & ST_RDONLY) != r->read_only)
		return errorf(ret_error, -EEXIST, "volume %s is published at '%s' %s already",
			      r->volume_id, r->target_path,
			      r->read_only ? "read-write" : "read-only");
	if (!node_use_target(&u->rec, r->target_path)) {
		/* Published before use records existed: record it now (made elsewhere). */
		node_use_add_target(&u->rec, &(NodeTarget){.path = (char *)r->target_path});
		int e = use_save(u, false, ret_error);
		if (e < 0)
			return e;
	}
	return publish_prepare(r, pin, source_fd, dev, ret_error);
}

static int publish_undo(const BackendPublish *r, Use *u, const PinnedPath *pin, const NodeTarget *t,
			int e)
{
	_cleanup_free_ char *ignored = NULL;

	(void)remove_made("target_path", pin, t, &ignored);
	node_use_remove_target(&u->rec, r->target_path);
	use_save_quietly(u);
	return e;
}

int blocknode_publish(const BlockNode *n, const BackendPublish *r, char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(use_end) Use u = USE_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	_cleanup_close_ int source_fd = -EBADF;
	NodeTarget t;
	int e;

	if ((e = pin_path("target_path", r->target_path, -EINVAL, &pin, ret_error)) < 0)
		return e;
	if ((e = use_begin(n, r->volume_id, &u, ret_error)) < 0)
		return e;
	if ((e = publish_check_flags(r, &u, ret_error)) < 0)
		return e;
	/* SINGLE_NODE_SINGLE_WRITER: one workload, so one target path */
	for (size_t i = 0; i < u.rec.n_targets; i++)
		if (strcmp(r->access.mode ?: "", "SINGLE_NODE_SINGLE_WRITER") == 0 &&
		    strcmp(u.rec.targets[i].path, r->target_path) != 0)
			return errorf(ret_error, -ENOTEMPTY,
				      "volume %s is published at '%s' and its access mode "
				      "SINGLE_NODE_SINGLE_WRITER allows one target path",
				      r->volume_id, u.rec.targets[i].path);
	if ((e = device_find(n, r->volume_id, &dev)) < 0)
		return errorf(ret_error, -ENOTEMPTY, "volume %s is not staged on this node",
			      r->volume_id);
	if ((e = publish_source(r, &u, &dev, &source_fd, ret_error)) < 0)
		return e;
	e = mountpoint_prepare("target_path", r->target_path, &pin, &dev, r->access.block,
			       node_use_target(&u.rec, r->target_path), r->volume_id, &t,
			       ret_error);
	if (e == 1)
		return publish_existing(r, &u, &pin, source_fd, &dev, ret_error);
	if (e < 0)
		return e;
	node_use_add_target(&u.rec, &t);
	if (!u.rec.node)
		u.rec.node = xstrdup(n->node_id);
	if ((e = use_save(&u, false, ret_error)) < 0)
		return publish_undo(r, &u, &pin, &t, e);
	_cleanup_close_ int target_fd = mountpoint_open("target_path", &pin, &t, ret_error);
	if (target_fd < 0)
		return publish_undo(r, &u, &pin, &t, target_fd);
	_cleanup_free_ char *flags = join_flags(r->mount_flags, r->n_mount_flags, NULL);
	e = mount_bind_at(source_fd, &pin, target_fd, r->read_only, flags);
	if (e < 0) {
		errorf(ret_error, e, "volume %s: binding it onto '%s' failed: %s", r->volume_id,
		       r->target_path, strerror(-e));
		return publish_undo(r, &u, &pin, &t, e);
	}
	failpoint("node-publish-after-mount");
	return publish_prepare(r, &pin, source_fd, &dev, ret_error);
}

/* ---- NodeUnpublishVolume ---- */

int blocknode_unpublish(const BlockNode *n, const char *id, const char *target_path,
			char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(use_end) Use u = USE_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	_cleanup_free_ char *ignored = NULL;
	int e;

	if ((e = pin_path("target_path", target_path, -EINVAL, &pin, ret_error)) < 0)
		return e;
	e = use_begin(n, id, &u, &ignored);
	if (e == -ENOENT) { /* an unknown volume owns nothing there but its lost device's mounts */
		device_find_lost(n, id, &dev);
		return unmount_volume("target_path", target_path, &pin, &dev, id, ret_error)
			       ?: undo_place("target_path", target_path, &pin, NULL, id, ret_error);
	}
	if (e < 0)
		return error_pass(e, &ignored, ret_error);
	e = device_find(n, id, &dev);
	if (e < 0 && e != -ENODEV)
		return errorf(ret_error, e, "volume %s: %s", id, strerror(-e));
	if ((e = unmount_volume("target_path", target_path, &pin, &dev, id, ret_error)) < 0)
		return e;
	NodeTarget *t = node_use_target(&u.rec, target_path);
	if ((e = undo_place("target_path", target_path, &pin, t, id, ret_error)) < 0)
		return e;
	if (t) {
		node_use_remove_target(&u.rec, target_path);
		if ((e = use_save(&u, false, ret_error)) < 0)
			return e;
	}
	return 0;
}

/* ---- NodeExpandVolume and NodeGetVolumeStats ---- */

/* The volume at a volume_path: a path that cannot hold it means it is not found there. */
static int volume_at(const BlockNode *n, const char *id, const char *path, PinnedPath *pin,
		     BlockDevice *dev, PathObject *o, char **ret_error)
{
	int e;

	if ((e = pin_path("volume_path", path, -ENOENT, pin, ret_error)) < 0)
		return e;
	if (!n->ops->volume_present(n->userdata, id)) {
		*ret_error = n->ops->not_found("volume_id", id);
		return -ENOENT;
	}
	e = pinned_path_stat(pin, o);
	if (e == -ENOENT)
		return errorf(ret_error, -ENOENT, "volume_path: '%s' does not exist", path);
	if (e < 0) /* what cannot be looked at cannot hold the volume */
		return errorf(ret_error, -ENOENT, "volume_path: cannot look at '%s': %s", path,
			      strerror(-e));
	if ((e = device_find(n, id, dev)) < 0 && e != -ENODEV)
		return errorf(ret_error, e, "volume %s: %s", id, strerror(-e));
	return 0;
}

static int not_here(const char *id, const char *path, const PathObject *o, char **ret_error)
{
	_cleanup_free_ char *what = describe(o);
	return errorf(ret_error, -ENOENT, "volume_path: '%s' holds %s, not volume %s", path, what,
		      id);
}

int blocknode_expand(const BlockNode *n, const char *id, const char *volume_path, uint64_t required,
		     uint64_t limit, uint64_t *ret_size, char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(use_end) Use u = USE_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	_cleanup_free_ char *err = NULL;
	MountInfo mi = {};
	PathObject o;
	uint64_t size;
	int e;

	if ((e = volume_at(n, id, volume_path, &pin, &dev, &o, ret_error)) < 0)
		return e;
	if ((e = use_begin(n, id, &u, ret_error)) < 0)
		return e;
	if (!dev.path)
		return errorf(ret_error, -ENOENT, "volume %s is not staged on this node", id);
	if (!is_volume(&o, &dev))
		return not_here(id, volume_path, &o, ret_error);
	if (dev.dir_ino)
		size = dev.dir_size; /* its quota, which the controller set: nothing to grow */
	else if ((e = n->ops->device_size(n->userdata, &dev, true, &size)) < 0)
		return errorf(ret_error, e, "volume %s: refreshing the size of %s failed: %s", id,
			      dev.path, strerror(-e));
	if (required && size < required)
		return errorf(ret_error, -ERANGE,
			      "capacity_range.required_bytes: %llu is more than volume %s holds "
			      "(%llu bytes): expand it with ControllerExpandVolume first",
			      (unsigned long long)required, id, (unsigned long long)size);
	if (limit && size > limit)
		return errorf(ret_error, -ERANGE,
			      "capacity_range.limit_bytes: volume %s is %llu bytes already, more "
			      "than %llu",
			      id, (unsigned long long)size, (unsigned long long)limit);
	if (is_volume_fs(&o, &dev) && !dev.dir_ino) {
		/* The tools take a path: the mount's own, from the kernel's table by mount ID. */
		if ((e = mount_find_by_id(o.mnt_id, &mi)) < 0)
			return errorf(ret_error, -EBUSY,
				      "volume_path: '%s' changed during the call", volume_path);
		e = blockfs_resize(dev.path, mi.target, mi.fstype, &err);
		mount_info_done(&mi);
		if (e < 0)
			return errorf(ret_error, e, "volume %s: growing the filesystem failed: %s",
				      id, err ?: strerror(-e));
	}
	*ret_size = size;
	return 0;
}

/* Whether the node service put the volume at path (its staging path or a target). Read
 * without the lock: records are replaced whole. */
static bool use_recorded(const BlockNode *n, const char *id, const char *path)
{
	NodeUse u = {};

	if (n->ops->use_load(n->userdata, id, &u) < 0)
		return false;
	bool found =
		(u.staging.path && strcmp(u.staging.path, path) == 0) || node_use_target(&u, path);
	node_use_done(&u);
	return found;
}

/* Adds what the backend says about the device's way to its storage to the condition: first
 * when it is abnormal, else after it. */
static void stats_add_device_condition(const BlockNode *n, const char *id, const BlockDevice *d,
				       BackendStats *s)
{
	bool abnormal = false;

	if (!n->ops->device_condition)
		return;
	_cleanup_free_ char *m = n->ops->device_condition(n->userdata, id, d, &abnormal);
	if (!m)
		return;
	char *c = abnormal ? xasprintf("%s; %s", m, s->condition)
			   : xasprintf("%s; %s", s->condition, m);
	free(s->condition);
	s->condition = c;
	s->abnormal = s->abnormal || abnormal;
}

int blocknode_stats(const BlockNode *n, const char *id, const char *volume_path, BackendStats *ret,
		    char **ret_error)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	MountInfo mi = {};
	PathObject o;
	int e;

	if ((e = volume_at(n, id, volume_path, &pin, &dev, &o, ret_error)) < 0)
		return e;
	*ret = (BackendStats){};
	if (!dev.path) {
		ret->abnormal = true;
		ret->condition = xasprintf("the device of volume %s is gone from this node", id);
		return 0;
	}
	if (is_volume_dev(&o, &dev)) {
		ret->block = true;
		e = n->ops->device_size(n->userdata, &dev, false, &ret->fs.bytes_total);
		ret->has_usage = e >= 0;
		ret->abnormal = e < 0;
		ret->condition =
			xstrdup(e < 0 ? "the device cannot be read" : "device is attached");
		stats_add_device_condition(n, id, &dev, ret);
		return 0;
	}
	if (!is_volume_fs(&o, &dev)) {
		/* Where the volume was put and is gone from: its condition. Anywhere else: not
		 * found. */
		if (!use_recorded(n, id, volume_path))
			return not_here(id, volume_path, &o, ret_error);
		_cleanup_free_ char *what = describe(&o);
		ret->abnormal = true;
		ret->condition = xasprintf("volume %s is not mounted at %s (it holds %s)", id,
					   volume_path, what);
		return 0;
	}
	_cleanup_close_ int fd = pinned_path_open_object(&pin, O_PATH);
	if (fd < 0 || (e = blockfs_stats_fd(fd, &ret->fs)) < 0)
		return errorf(ret_error, fd < 0 ? fd : e, "volume_path: statvfs of '%s' failed",
			      volume_path);
	ret->has_usage = true;
	bool fs_ro = mount_find_by_id(o.mnt_id, &mi) == 0 && mi.fs_read_only;
	mount_info_done(&mi);
	ret->abnormal = fs_ro;
	ret->condition = xstrdup(fs_ro ? "the filesystem turned read-only (errors?)"
				       : "volume is mounted and writable");
	stats_add_device_condition(n, id, &dev, ret);
	return 0;
}

/* ---- trimming ---- */

/* Opens the root of the mount at target read-only, proved to be the filesystem on dev. */
static int trim_open(const char *target, const BlockDevice *dev)
{
	_cleanup_(pinned_path_done) PinnedPath pin = PINNED_PATH_NULL;
	struct stat st;

	int r = pinned_path_open(target, &pin);
	if (r < 0)
		return r;
	int fd = pinned_path_open_object(&pin, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || st.st_dev != dev->rdev) {
		close(fd);
		return -EBUSY; /* replaced since the mount table was read */
	}
	return fd;
}

int blocknode_trim(const BlockNode *n, const char *id, uint64_t *ret_trimmed)
{
	_cleanup_(use_end) Use u = USE_NULL;
	_cleanup_(block_device_done) BlockDevice dev = {};
	_cleanup_(mount_info_done) MountInfo mi = {};
	_cleanup_free_ char *ignored = NULL;
	int e;

	if ((e = use_begin(n, id, &u, &ignored)) < 0)
		return e;
	if ((e = device_find(n, id, &dev)) < 0)
		return e;
	if (mount_find_by_devno(dev.rdev, &mi) < 0 || mi.fs_read_only)
		return -ENOENT;
	_cleanup_close_ int fd = trim_open(mi.target, &dev);
	if (fd < 0)
		return fd;
	return blockfs_trim_fd(fd, ret_trimmed);
}
