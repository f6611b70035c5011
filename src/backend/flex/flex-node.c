/* SPDX-License-Identifier: Apache-2.0 */
/* The Flexvolume backend's node operations, with Kubernetes' fallbacks for "Not supported"
 * (mount: bind the device mount path; mountdevice: format if blank, then mount;
 * unmount/unmountdevice: unmount and remove the directory; expandfs: grow the filesystem).
 *
 * Paths from a request are checked as strings and reached through their pinned parent, never
 * following a symlink (pinned-path.h); what is undone (unmount, unmountdevice) is undone at the
 * path recorded when it was done, only. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blockfs.h"
#include "blocknode.h"
#include "error-util.h"
#include "flex-internal.h"
#include "log.h"
#include "mount-util.h"
#include "ownership.h"
#include "pinned-path.h"

#define CSI_PREFIX "csi.storage.k8s.io/"
#define DEFAULT_FSTYPE "ext4"

/* ---- paths ---- */

/* Checks a path from a request: absolute, clean, no symlink on the way. -EINVAL naming field. */
static int path_check(const char *field, const char *path, char **ret_error)
{
	PinnedPath pin = PINNED_PATH_NULL;
	const char *why;

	if (request_path_check(path, &why) < 0)
		return errorf(ret_error, -EINVAL, "%s: '%s' is %s", field, path ?: "", why);
	int r = pinned_path_open(path, &pin);
	pinned_path_done(&pin);
	if (r == -ELOOP)
		return errorf(ret_error, -EINVAL, "%s: '%s' goes through a symlink", field, path);
	return 0;
}

/* What is at a request path, never following a symlink on the way. */
static int place_stat(const char *path, PathObject *ret)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0)
		r = pinned_path_stat(&pin, ret);
	pinned_path_done(&pin);
	return r;
}

/* Opens the object at a request path through its pinned parent (kept in *pin). */
static int open_place(const char *path, int flags, PinnedPath *pin)
{
	int r = pinned_path_open(path, pin);
	return r < 0 ? r : pinned_path_open_object(pin, flags);
}

static bool path_exists(const char *path)
{
	PathObject o;
	return place_stat(path, &o) == 0;
}

static bool mounted(const char *path)
{
	PathObject o;
	return place_stat(path, &o) == 0 && o.mount_root;
}

/* Makes the directory a driver mounts on, through its pinned parent. */
static int make_place(const char *field, const char *path, char **ret_error)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0 && mkdirat(pin.parent_fd, pin.base, 0750) < 0 && errno != EEXIST)
		r = negative_errno();
	pinned_path_done(&pin);
	if (r < 0)
		return errorf(ret_error, r, "%s: cannot create %s: %s", field, path, strerror(-r));
	return 0;
}

/* Removes the (empty) directory at a recorded path, through its pinned parent. */
static int remove_place(const char *path)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0 && unlinkat(pin.parent_fd, pin.base, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = negative_errno();
	pinned_path_done(&pin);
	return r == -ENOENT ? 0 : r;
}

/* Kubernetes' fallback for unmount and unmountdevice: unmount, then remove the dir. The path is
 * the one recorded when the volume was put there; it is reached without following symlinks. */
static int unmount_and_remove(const FlexRecord *rec, const char *field, const char *path,
			      char **ret_error)
{
	PinnedPath pin = PINNED_PATH_NULL;
	int r = pinned_path_open(path, &pin);

	for (int i = 0; r >= 0 && i < 64; i++)
		if ((r = umount_at(&pin)) == 0)
			break;
	pinned_path_done(&pin);
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s: unmounting %s failed: %s",
			      rec->volume_id, field, path, strerror(-r));
	if ((r = remove_place(path)) < 0)
		return errorf(ret_error, r, "volume %s: %s: removing %s failed: %s", rec->volume_id,
			      field, path, strerror(-r));
	return 0;
}

/* After the driver's op (unmount, unmountdevice) answered Success: nothing may be mounted at
 * path any more; then its directory goes, as Kubernetes removes it. */
static int remove_unmounted(const FlexRecord *rec, const char *op, const char *field,
			    const char *path, char **ret_error)
{
	if (mounted(path))
		return errorf(
			ret_error, -EBUSY,
			"volume %s: driver \"%s\" %s answered Success but %s is still mounted",
			rec->volume_id, rec->driver, op, path);
	int r = remove_place(path);
	if (r < 0)
		return errorf(ret_error, r, "%s: removing %s failed: %s", field, path,
			      strerror(-r));
	return 0;
}

/* ---- stage ---- */

/* The staged record keeps the mark of the fallback's mkfs (blocknode_format()). */
typedef struct MkfsMark {
	FlexBackend *fb;
	FlexRecord *rec;
} MkfsMark;

static int save_mkfs_mark(void *userdata, NodeMkfs state, const char *fstype, const char *uuid,
			  char **ret_error)
{
	MkfsMark *m = userdata;

	m->rec->mkfs = state;
	flex_record_set(&m->rec->mkfs_fstype, fstype);
	flex_record_set(&m->rec->mkfs_uuid, uuid);
	return flex_backend_save(m->fb, FLEX_RECORD_STAGED, m->rec, ret_error);
}

/* Kubernetes' fallback for mountdevice: format the device when blank, then mount it. The
 * format is the block node service's, under the same mark in the staged record: a mkfs
 * interrupted by a crash is made again by the next stage, never taken for a filesystem. */
static int mountdevice_fallback(FlexBackend *fb, FlexRecord *rec, const char *dev,
				const char *staging, char **ret_error)
{
	_cleanup_free_ char *found = NULL, *why = NULL;
	const char *fstype = *rec->fs_type ? rec->fs_type : DEFAULT_FSTYPE;
	MkfsMark m = {fb, rec};
	BlockMkfsMark mark = {
		.state = rec->mkfs,
		.uuid = rec->mkfs_uuid,
		.save = save_mkfs_mark,
		.userdata = &m,
	};
	int e;

	if (rec->read_only) {
		/* Probed only: a read-only volume is never formatted. */
		if ((e = blockfs_probe(dev, &found)) < 0)
			return errorf(ret_error, e, "volume %s: probing %s failed: %s",
				      rec->volume_id, dev, strerror(-e));
		if (!*found)
			return errorf(ret_error, -EROFS,
				      "volume %s: %s is blank and the volume is read-only: not "
				      "formatting it",
				      rec->volume_id, dev);
	} else if ((e = blocknode_format(rec->volume_id, dev, fstype, NULL, &mark, &found,
					 ret_error)) < 0)
		return e;
	if (*found && strcmp(found, fstype) != 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s: %s holds %s, not the requested %s: it is never "
			      "reformatted",
			      rec->volume_id, dev, found, fstype);
	PinnedPath pin = PINNED_PATH_NULL;
	int fd = open_place(staging, O_PATH | O_DIRECTORY, &pin);
	e = fd < 0	       ? fd
	    : mounted(staging) ? 0
			       : mount_fs_at(dev, fd, fstype, NULL, rec->read_only, &why);
	closep(&fd);
	pinned_path_done(&pin);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: mounting %s on %s failed: %s%s%s",
			      rec->volume_id, dev, staging, strerror(-e), why ? ": " : "",
			      why ?: "");
	return 0;
}

static int stage_attached(FlexBackend *fb, FlexDriver *drv, FlexRecord *rec, const char *device,
			  char **ret_error)
{
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	FlexReply rep;
	int e;

	/* Kubernetes computes the device mount path from the volume's name first. */
	if ((e = flex_backend_volume_name(fb, drv, rec, ret_error)) < 0)
		return e;
	flex_backend_spec(rec, &spec, &opts);
	FlexCallArgs args = {.spec = &spec, .device = device};
	e = flex_backend_run(fb, drv, rec, FLEX_WAITFORATTACH, &args, &rep, ret_error);
	if (e < 0 && e != -EOPNOTSUPP)
		return e;
	/* As Kubernetes: the device waitforattach names, even none; Not supported: attach's. */
	flex_record_set(&rec->device, e == 0 ? rep.device : device);
	if (e == 0)
		flex_reply_done(&rep);
	if ((e = flex_backend_save(fb, FLEX_RECORD_STAGED, rec, ret_error)) < 0)
		return e;
	if ((e = make_place("staging_target_path", rec->path, ret_error)) < 0)
		return e;
	args = (FlexCallArgs){.spec = &spec, .device = rec->device, .device_mount_path = rec->path};
	e = flex_backend_run(fb, drv, rec, FLEX_MOUNTDEVICE, &args, NULL, ret_error);
	if (e == -EOPNOTSUPP)
		/* Without a device (attach unsupported too) there is nothing to mount. */
		e = *rec->device ? mountdevice_fallback(fb, rec, rec->device, rec->path, ret_error)
				 : 0;
	return e;
}

/* The size of the volume as the controller's record has it (0: unknown), when the controller
 * shares this pool: the old size of the node's first expandfs. */
static uint64_t known_size(FlexBackend *fb, const char *volume_id)
{
	_cleanup_(flex_record_freep) FlexRecord *vol = NULL;

	if (flex_record_load(&fb->records, FLEX_RECORD_VOLUME, volume_id, NULL, &vol) < 0)
		return 0;
	return vol->size;
}

/* The record of this stage: the request's, keeping the size an earlier one learnt. */
static int stage_record(FlexBackend *fb, const BackendStage *r, FlexRecord **ret_rec,
			FlexRecord **ret_old, char **ret_error)
{
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL, *old = NULL;
	int e;

	if ((e = path_check("staging_target_path", r->staging_path, ret_error)) < 0)
		return e;
	if ((e = flex_backend_check_access(&r->access, ret_error)) < 0)
		return e;
	e = flex_backend_record(r->volume_id, r->volume_context, r->access.fstype,
				r->access.read_only, NULL, &rec, ret_error);
	if (e < 0)
		return e;
	flex_record_set(&rec->path, r->staging_path);
	if ((e = flex_backend_load(fb, FLEX_RECORD_STAGED, r->volume_id, NULL, &old, ret_error)) <
	    0)
		return e;
	rec->size = old ? old->size : known_size(fb, r->volume_id);
	if (old) {
		/* The mark of a mkfs of ours goes on: only it tells a half-made filesystem. */
		rec->mkfs = old->mkfs;
		flex_record_set(&rec->mkfs_fstype, old->mkfs_fstype);
		flex_record_set(&rec->mkfs_uuid, old->mkfs_uuid);
	}
	*ret_rec = TAKE_PTR(rec);
	*ret_old = TAKE_PTR(old);
	return 0;
}

int flex_stage(Backend *b, const BackendStage *r, void *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL, *old = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	(void)ret;
	if ((e = stage_record(fb, r, &rec, &old, ret_error)) < 0)
		return e;
	if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
		return e;
	const char *device = r->publish_context
				     ? strmap_get(r->publish_context, FLEX_PUBLISH_CONTEXT_DEVICE)
				     : NULL;
	if (old && old->device_mounted && strcmp(old->path, rec->path) == 0 && mounted(rec->path))
		/* Mount only once, as Kubernetes does; the record (maybe of a driver version
		 * before an upgrade) says how to undo it. */
		return 0;
	if (!drv->capabilities.attach)
		/* Kubernetes stages nothing for these; the record names the driver for expand. */
		return flex_backend_save(fb, FLEX_RECORD_STAGED, rec, ret_error);
	rec->device_mounted = true;
	flex_record_set(&rec->device, device);
	if ((e = flex_backend_save(fb, FLEX_RECORD_STAGED, rec, ret_error)) < 0)
		return e;
	e = stage_attached(fb, drv, rec, device ?: "", ret_error);
	if (e < 0) {
		/* A "started" mark stays: the next stage makes that filesystem again. */
		if (!mounted(rec->path) && rec->mkfs != NODE_MKFS_STARTED)
			(void)flex_record_remove(&fb->records, FLEX_RECORD_STAGED, rec);
		return e;
	}
	log_debug("volume %s: staged at %s by Flexvolume driver %s%s%s", rec->volume_id, rec->path,
		  drv->name, *rec->device ? " from " : "", rec->device);
	return 0;
}

/* ---- unstage ---- */

int flex_unstage(Backend *b, const BackendUnstage *r, void *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	const char *path = r->staging_path;
	int e;

	(void)ret;
	if ((e = path_check("staging_target_path", path, ret_error)) < 0)
		return e;
	if ((e = flex_backend_load(fb, FLEX_RECORD_STAGED, r->volume_id, NULL, &rec, ret_error)) <
	    0)
		return e;
	if (!rec)
		return 0; /* nothing staged on this node */
	/* Only where it was staged: the request's path is not proof of anything. */
	if (rec->device_mounted && strcmp(rec->path, path) != 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "staging_target_path: volume %s is staged at '%s', not at '%s'",
			      rec->volume_id, rec->path, path);
	/* Like Kubernetes: unmountdevice only when something is mounted, then the dir goes. */
	if (rec->device_mounted && path_exists(rec->path)) {
		if (mounted(rec->path)) {
			if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
				return e;
			FlexCallArgs args = {.device_mount_path = rec->path};
			e = flex_backend_run(fb, drv, rec, FLEX_UNMOUNTDEVICE, &args, NULL,
					     ret_error);
			if (e == -EOPNOTSUPP)
				e = unmount_and_remove(rec, "staging_target_path", rec->path,
						       ret_error);
			if (e < 0)
				return e;
		}
		e = remove_unmounted(rec, "unmountdevice", "staging_target_path", rec->path,
				     ret_error);
		if (e < 0)
			return e;
		log_debug("volume %s: unstaged from %s (Flexvolume driver %s)", rec->volume_id,
			  rec->path, rec->driver);
	}
	if (rec->mkfs == NODE_MKFS_STARTED) {
		/* Not staged any more, but the mark of an interrupted mkfs of ours stays. */
		rec->device_mounted = false;
		return flex_backend_save(fb, FLEX_RECORD_STAGED, rec, ret_error);
	}
	return flex_backend_remove(fb, FLEX_RECORD_STAGED, rec, ret_error);
}

/* ---- publish ---- */

/* The pod information Kubernetes passes to mount when podInfoOnMount is set, and the secrets.
 * Strings point into the request. */
static void pod_info(const BackendPublish *r, FlexPodInfo *ret, FlexOption **ret_secrets)
{
	const Strmap *ctx = r->volume_context;
	size_t n = r->secrets ? r->secrets->n : 0;
	FlexOption *s = xnew0(FlexOption, n + 1);

	for (size_t i = 0; i < n; i++)
		s[i] = (FlexOption){r->secrets->keys[i], r->secrets->values[i]};
	*ret = (FlexPodInfo){
		.name = strmap_get(ctx, CSI_PREFIX "pod.name"),
		.namespace = strmap_get(ctx, CSI_PREFIX "pod.namespace"),
		.uid = strmap_get(ctx, CSI_PREFIX "pod.uid"),
		.service_account = strmap_get(ctx, CSI_PREFIX "serviceAccount.name"),
		.secrets = s,
		.n_secrets = n,
		.fs_group = r->group == (gid_t)-1 ? -1 : (int64_t)r->group,
	};
	*ret_secrets = s;
}

static int publish_mount(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec,
			 const BackendPublish *r, char **ret_error)
{
	_cleanup_free_ FlexOption *opts = NULL, *secrets = NULL;
	FlexVolumeSpec spec;
	FlexPodInfo pod;

	flex_backend_spec(rec, &spec, &opts);
	pod_info(r, &pod, &secrets);
	FlexCallArgs args = {.spec = &spec, .pod = &pod, .pod_volume_dir = rec->path};
	int e = flex_backend_run(fb, drv, rec, FLEX_MOUNT, &args, NULL, ret_error);
	if (e != -EOPNOTSUPP)
		return e;
	/* Kubernetes binds the device mount path: here the staging path. */
	if (!*rec->staging_path)
		return flex_backend_not_supported(rec, drv, FLEX_MOUNT,
						  "and the volume has no staged mount to bind "
						  "instead (ephemeral volumes are never staged)",
						  ret_error);
	PinnedPath from = PINNED_PATH_NULL, to = PINNED_PATH_NULL;
	int source = open_place(rec->staging_path, O_PATH | O_DIRECTORY, &from);
	int target = source < 0 ? source : open_place(rec->path, O_PATH | O_DIRECTORY, &to);
	e = target < 0 ? target : mount_bind_at(source, &to, target, rec->read_only, NULL);
	closep(&source);
	closep(&target);
	pinned_path_done(&from);
	pinned_path_done(&to);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: binding %s to %s failed: %s",
			      rec->volume_id, rec->staging_path, rec->path, strerror(-e));
	return 0;
}

/* The fsGroup policy the volume asks for (Kubernetes' default for Flexvolume: Always). */
static const char *fs_group_policy(const BackendPublish *r)
{
	const char *p = strmap_get(r->volume_context, FLEX_CONTEXT_FSGROUP_POLICY);
	return p && ownership_policy_from_string(p) >= 0
		       ? p
		       : ownership_policy_to_string(OWNERSHIP_ALWAYS);
}

/* fsGroup through the caller's hook, where Kubernetes applies it: drivers with the fsGroup
 * capability, never on read-only mounts. Failures are logged, not fatal, as there. */
static void publish_ownership(const FlexRecord *rec, const FlexDriver *drv, const BackendPublish *r)
{
	_cleanup_free_ char *err = NULL;
	PinnedPath pin = PINNED_PATH_NULL;

	if (r->group == (gid_t)-1 || rec->read_only || !drv->capabilities.fs_group || !r->prepare)
		return;
	int fd = open_place(rec->path, O_PATH | O_DIRECTORY, &pin);
	int e = fd < 0 ? fd : r->prepare(fd, false, fs_group_policy(r), r->userdata, &err);
	closep(&fd);
	pinned_path_done(&pin);
	if (e < 0)
		log_warning("volume %s: giving %s to group %u failed: %s", rec->volume_id,
			    rec->path, (unsigned)r->group, err ?: strerror(-e));
}

/* The record of this publish, from the request. */
static int publish_record(FlexBackend *fb, const BackendPublish *r, FlexRecord **ret,
			  char **ret_error)
{
	int e;

	if ((e = path_check("target_path", r->target_path, ret_error)) < 0)
		return e;
	/* Ephemeral inline volumes come without a staging path. */
	if (r->staging_path && *r->staging_path &&
	    (e = path_check("staging_target_path", r->staging_path, ret_error)) < 0)
		return e;
	if ((e = flex_backend_check_access(&r->access, ret_error)) < 0)
		return e;
	e = flex_backend_record(r->volume_id, r->volume_context, r->access.fstype,
				r->read_only || r->access.read_only, r->target_path, ret,
				ret_error);
	if (e < 0)
		return e;
	flex_record_set(&(*ret)->path, r->target_path);
	flex_record_set(&(*ret)->staging_path, r->staging_path);
	(*ret)->size = known_size(fb, r->volume_id);
	return 0;
}

/* Mount only once, as Kubernetes does; a record missing (from before an upgrade) is written. */
static int publish_again(FlexBackend *fb, const FlexRecord *rec, char **ret_error)
{
	_cleanup_(flex_record_freep) FlexRecord *old = NULL;
	int e;

	if ((e = flex_backend_load(fb, FLEX_RECORD_PUBLISHED, rec->volume_id, rec->path, &old,
				   ret_error)) < 0)
		return e;
	return old ? 0 : flex_backend_save(fb, FLEX_RECORD_PUBLISHED, rec, ret_error);
}

int flex_publish(Backend *b, const BackendPublish *r, void *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	(void)ret;
	if ((e = publish_record(fb, r, &rec, ret_error)) < 0)
		return e;
	if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
		return e;
	if (mounted(rec->path))
		return publish_again(fb, rec, ret_error);
	/* The kubelet names a pod's volume by it when the driver attaches. */
	if (drv->capabilities.attach && (e = flex_backend_volume_name(fb, drv, rec, ret_error)) < 0)
		return e;
	if ((e = flex_backend_save(fb, FLEX_RECORD_PUBLISHED, rec, ret_error)) < 0)
		return e;
	e = make_place("target_path", rec->path, ret_error);
	if (e >= 0)
		e = publish_mount(fb, drv, rec, r, ret_error);
	if (e < 0) {
		/* Nothing mounted: leave nothing behind, as Kubernetes does. */
		if (!mounted(rec->path)) {
			(void)remove_place(rec->path);
			(void)flex_record_remove(&fb->records, FLEX_RECORD_PUBLISHED, rec);
		}
		return e;
	}
	publish_ownership(rec, drv, r);
	log_debug("volume %s: published at %s by Flexvolume driver %s", rec->volume_id, rec->path,
		  drv->name);
	return 0;
}

/* ---- unpublish ---- */

int flex_unpublish(Backend *b, const BackendUnpublish *r, void *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	(void)ret;
	if ((e = path_check("target_path", r->target_path, ret_error)) < 0)
		return e;
	if ((e = flex_backend_load(fb, FLEX_RECORD_PUBLISHED, r->volume_id, r->target_path, &rec,
				   ret_error)) < 0)
		return e;
	if (!rec)
		return 0; /* not published there */
	/* Like Kubernetes: a target that is gone needs nothing; one that exists gets unmount. */
	if (path_exists(rec->path)) {
		_cleanup_free_ char *why = NULL;
		e = flex_backend_driver(fb, rec, &drv, &why);
		if (e < 0 && mounted(rec->path)) {
			*ret_error = TAKE_PTR(why);
			return e;
		}
		if (e >= 0) {
			FlexCallArgs args = {.pod_volume_dir = rec->path};
			e = flex_backend_run(fb, drv, rec, FLEX_UNMOUNT, &args, NULL, ret_error);
			if (e == -EOPNOTSUPP)
				e = unmount_and_remove(rec, "target_path", rec->path, ret_error);
			if (e < 0)
				return e;
		}
		e = remove_unmounted(rec, "unmount", "target_path", rec->path, ret_error);
		if (e < 0)
			return e;
		log_debug("volume %s: unpublished from %s by Flexvolume driver %s", rec->volume_id,
			  rec->path, rec->driver);
	}
	return flex_backend_remove(fb, FLEX_RECORD_PUBLISHED, rec, ret_error);
}

/* ---- expand, stats ---- */

/* The node record of a volume: staged, else published at path. -ENOENT naming field when it
 * is neither. */
static int node_record(FlexBackend *fb, const char *volume_id, const char *field, const char *path,
		       FlexRecordKind *ret_kind, FlexRecord **ret, char **ret_error)
{
	FlexRecord *rec = NULL;
	FlexRecordKind kind = FLEX_RECORD_STAGED;

	int e = flex_backend_load(fb, kind, volume_id, NULL, &rec, ret_error);
	if (e >= 0 && !rec && path && *path) {
		kind = FLEX_RECORD_PUBLISHED;
		e = flex_backend_load(fb, kind, volume_id, path, &rec, ret_error);
	}
	if (e < 0)
		return e;
	if (!rec)
		return errorf(ret_error, -ENOENT,
			      "%s: Flexvolume volume %s is neither staged on this node nor "
			      "published at '%s'",
			      field, volume_id, path ?: "");
	*ret_kind = kind;
	*ret = rec;
	return 0;
}

static bool growable(const char *fstype)
{
	static const char *const types[] = {"ext2", "ext3", "ext4", "xfs"};

	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		if (strcmp(fstype, types[i]) == 0)
			return true;
	return false;
}

/* Kubernetes' fallback for expandfs (mount-utils' Resize): the filesystem is asked of the
 * device itself; no device, or nothing on it that blkid knows, is nothing to grow (mkfs used
 * the whole device). ext3, ext4 and xfs are grown (ext2 too: resize2fs takes it), anything
 * else is an error. */
static int expandfs_fallback(const FlexRecord *rec, const char *dev, const char *mount_path,
			     char **ret_error)
{
	_cleanup_free_ char *found = NULL, *err = NULL;

	/* blkid exits 2 ("nothing identified") for a path that cannot be opened too. */
	if (!*dev || blockfs_probe(dev, &found) < 0 || !*found)
		return 0;
	if (!growable(found)) /* FAILED_PRECONDITION, as for a device holding another type */
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s: driver \"%s\" has no expandfs and volplug cannot grow "
			      "%s on %s mounted at %s",
			      rec->volume_id, rec->driver, found, dev, mount_path);
	int e = blockfs_resize(dev, mount_path, found, &err);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: growing the filesystem failed: %s",
			      rec->volume_id, err ?: strerror(-e));
	return 0;
}

int flex_node_expand(Backend *b, const BackendNodeExpand *r, BackendNodeExpanded *ret,
		     char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	uint64_t size = r->required ?: r->limit;
	FlexVolumeSpec spec;
	FlexRecordKind kind;
	const char *dmp;
	int e;

	if ((e = node_record(fb, r->volume_id, "volume_path", r->volume_path, &kind, &rec,
			     ret_error)) < 0)
		return e;
	if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
		return e;
	if (drv->capabilities.requires_fs_resize) {
		/* The kubelet's online expansion passes the pod's volume path. */
		if ((e = path_check("volume_path", r->volume_path, ret_error)) < 0)
			return e;
		dmp = r->volume_path;
		flex_backend_spec(rec, &spec, &opts);
		FlexCallArgs args = {
			.spec = &spec,
			.device = rec->device,
			.device_mount_path = dmp,
			.new_size = size,
			.old_size = rec->size,
		};
		e = flex_backend_run(fb, drv, rec, FLEX_EXPANDFS, &args, NULL, ret_error);
		if (e == -EOPNOTSUPP)
			e = expandfs_fallback(rec, rec->device, dmp, ret_error);
		if (e < 0)
			return e;
		log_debug("volume %s: filesystem expanded by Flexvolume driver %s", rec->volume_id,
			  drv->name);
	}
	if (size > 0) {
		rec->size = size;
		if ((e = flex_backend_save(fb, kind, rec, ret_error)) < 0)
			return e;
	}
	*ret = (BackendNodeExpanded){.size = size};
	return 0;
}

int flex_node_stats(Backend *b, const BackendStatsRequest *r, BackendStats *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	FlexRecordKind kind;
	BlockfsStats s = {};
	int e;

	if ((e = node_record(fb, r->volume_id, "volume_path", r->volume_path, &kind, &rec,
			     ret_error)) < 0)
		return e;
	if ((e = path_check("volume_path", r->volume_path, ret_error)) < 0)
		return e;
	if (!path_exists(r->volume_path))
		return errorf(ret_error, -ENOENT, "volume_path: %s does not exist", r->volume_path);
	if (!mounted(r->volume_path) || blockfs_stats(r->volume_path, &s) < 0) {
		*ret = (BackendStats){
			.abnormal = true,
			.condition = xasprintf("volume %s is not mounted at %s", r->volume_id,
					       r->volume_path),
		};
		return 0;
	}
	*ret = (BackendStats){
		.has_usage = true,
		.fs = s,
		.condition = xasprintf("mounted by Flexvolume driver %s", rec->driver),
	};
	return 0;
}
