/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <libmount.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "log.h"
#include "mount-util.h"

#define MOUNTINFO "/proc/self/mountinfo"
/* Flags that turn mount(2) into another operation than "mount this filesystem". */
#define OPERATION_FLAGS                                                                \
	(MS_BIND | MS_MOVE | MS_REMOUNT | MS_REC | MS_SHARED | MS_PRIVATE | MS_SLAVE | \
	 MS_UNBINDABLE)
#define ATIME_FLAGS (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)
#define MAX_STACKED 64

DEFINE_TRIVIAL_CLEANUP_FUNC(struct libmnt_table *, mnt_unref_table)

static bool streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

void mount_info_done(MountInfo *m)
{
	if (!m)
		return;
	free(m->target);
	free(m->source);
	free(m->fstype);
	free(m->root);
	free(m->vfs_options);
	free(m->fs_options);
	*m = (MountInfo){};
}

int mount_options_split(const char *options, unsigned long *ret_flags, char **ret_data)
{
	unsigned long flags = 0;
	char *user = NULL, *vfs = NULL, *fs = NULL;

	if (options && *options) {
		if (mnt_optstr_get_flags(options, &flags, mnt_get_builtin_optmap(MNT_LINUX_MAP)) <
		    0)
			return -EINVAL;
		if (mnt_split_optstr(options, &user, &vfs, &fs, 0, 0) < 0)
			return -EINVAL;
		free(user);
		free(vfs);
	}
	if (flags & OPERATION_FLAGS) {
		free(fs);
		return -EINVAL;
	}
	*ret_flags = flags;
	if (fs && !*fs) {
		free(fs);
		fs = NULL;
	}
	*ret_data = fs;
	return 0;
}

/* Canonical form of target for comparing with mountinfo. A dead mount (ENOTCONN, EIO,
 * ESTALE) cannot be resolved but is still in the table: look it up as given. */
static int canonical_target(const char *target, char **ret)
{
	char *p = realpath(target, NULL);
	if (p) {
		*ret = p;
		return 0;
	}
	if (errno == ENOENT || errno == ENOTDIR)
		return -ENOENT;
	if (target[0] != '/')
		return negative_errno();
	*ret = xstrdup(target);
	return 0;
}

static bool optstr_has(const char *optstr, const char *name)
{
	return optstr && mnt_optstr_get_option(optstr, name, NULL, NULL) == 0;
}

static void fill_info(struct libmnt_fs *fs, MountInfo *ret)
{
	const char *s;

	*ret = (MountInfo){
		.target = xstrdup(mnt_fs_get_target(fs) ?: ""),
		.source = xstrdup((s = mnt_fs_get_source(fs)) ? s : ""),
		.fstype = xstrdup((s = mnt_fs_get_fstype(fs)) ? s : ""),
		.root = xstrdup((s = mnt_fs_get_root(fs)) ? s : "/"),
		.vfs_options = xstrdup((s = mnt_fs_get_vfs_options(fs)) ? s : ""),
		.fs_options = xstrdup((s = mnt_fs_get_fs_options(fs)) ? s : ""),
		.devno = mnt_fs_get_devno(fs),
		.id = mnt_fs_get_id(fs),
		.parent_id = mnt_fs_get_parent_id(fs),
	};
	ret->read_only = optstr_has(ret->vfs_options, "ro");
	ret->fs_read_only = optstr_has(ret->fs_options, "ro");
}

int mount_find(const char *target, MountInfo *ret)
{
	_cleanup_free_ char *canon = NULL;
	struct libmnt_fs *fs = NULL;
	struct statx stx;

	if (!target || !ret)
		return -EINVAL;
	int r = canonical_target(target, &canon);
	if (r < 0)
		return r;
	_cleanup_(mnt_unref_tablep) struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	if (!tb)
		return errno > 0 ? -errno : -ENOMEM;

	/* The mount id of the mount that is visible at canon picks the right entry even when
	 * mounts are stacked or hidden under other mounts. */
	if (statx(AT_FDCWD, canon, 0, STATX_MNT_ID, &stx) == 0 && (stx.stx_mask & STATX_MNT_ID)) {
		struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
		struct libmnt_fs *f;
		if (!it)
			return -ENOMEM;
		while (mnt_table_next_fs(tb, it, &f) == 0)
			if ((uint64_t)mnt_fs_get_id(f) == stx.stx_mnt_id) {
				fs = f;
				break;
			}
		mnt_free_iter(it);
		if (fs && !streq(mnt_fs_get_target(fs), canon))
			return -ENOENT; /* canon lies inside that mount */
	}
	if (!fs) /* no mount id (old kernel, dead mount) or a table read in a race */
		fs = mnt_table_find_target(tb, canon, MNT_ITER_BACKWARD);
	if (!fs)
		return -ENOENT;
	fill_info(fs, ret);
	return 0;
}

int is_mount_point(const char *path)
{
	struct statx stx;

	if (!path)
		return -EINVAL;
	if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx) < 0)
		return negative_errno();
	if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return !!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);

	/* Kernels before 5.8 do not report it: ask the table. */
	MountInfo m;
	int r = mount_find(path, &m);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	mount_info_done(&m);
	return 1;
}

int mount_fs(const char *source_dev, const char *target, const char *fstype, const char *options,
	     bool read_only)
{
	_cleanup_free_ char *data = NULL;
	unsigned long flags;
	MountInfo m;

	if (!source_dev || !target || !fstype || !*fstype)
		return -EINVAL;
	int r = mount_options_split(options, &flags, &data);
	if (r < 0)
		return log_debug_errno(r, "invalid mount options '%s'", options);
	if (read_only)
		flags |= MS_RDONLY;

	r = mount_find(target, &m);
	if (r == 0) {
		struct stat st;
		bool same;
		if (stat(source_dev, &st) == 0 && S_ISBLK(st.st_mode))
			same = m.devno == st.st_rdev && streq(m.root, "/");
		else
			same = streq(m.source, source_dev) && streq(m.fstype, fstype);
		same = same && m.read_only == !!(flags & MS_RDONLY);
		log_debug("%s already mounted at %s (%s)", m.source, target,
			  same ? "same" : "different");
		mount_info_done(&m);
		return same ? 0 : -EEXIST;
	}
	if (r != -ENOENT)
		return r;

	if (mount(source_dev, target, fstype, flags, data) < 0)
		return log_debug_errno(negative_errno(), "mount %s on %s (%s, %s): %m", source_dev,
				       target, fstype, options ?: "");
	log_debug("mounted %s on %s (%s)", source_dev, target, fstype);
	return 0;
}

static unsigned long statvfs_to_ms(unsigned long f)
{
	static const struct {
		unsigned long st, ms;
	} map[] = {
		{ST_RDONLY, MS_RDONLY},	    {ST_NOSUID, MS_NOSUID},
		{ST_NODEV, MS_NODEV},	    {ST_NOEXEC, MS_NOEXEC},
		{ST_NOATIME, MS_NOATIME},   {ST_NODIRATIME, MS_NODIRATIME},
		{ST_RELATIME, MS_RELATIME},
	};
	unsigned long ms = 0;

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (f & map[i].st)
			ms |= map[i].ms;
	return ms;
}

int mount_bind(const char *source, const char *target, bool read_only, const char *extra_options)
{
	const struct libmnt_optmap *linux_map = mnt_get_builtin_optmap(MNT_LINUX_MAP);
	unsigned long asked = 0;
	struct statvfs sv;
	int r;

	if (!source || !target)
		return -EINVAL;
	if (extra_options && *extra_options) {
		if (mnt_optstr_get_flags(extra_options, &asked, linux_map) < 0)
			return -EINVAL;
		if (asked & OPERATION_FLAGS)
			return -EINVAL;
	}
	read_only = read_only || (asked & MS_RDONLY);

	r = is_mount_point(target);
	if (r < 0)
		return r;
	if (r > 0) {
		struct stat a, b;
		struct statvfs src;
		if (stat(source, &a) < 0 || stat(target, &b) < 0 || statvfs(target, &sv) < 0 ||
		    statvfs(source, &src) < 0)
			return negative_errno();
		/* A bind of a read-only source is read-only without being asked. */
		bool want_ro = read_only || (src.f_flag & ST_RDONLY);
		bool same = a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
			    !!(sv.f_flag & ST_RDONLY) == want_ro;
		log_debug("%s already mounted (%s)", target, same ? "same" : "different");
		return same ? 0 : -EEXIST;
	}

	/* A bind ignores every flag but MS_REC on the first call. */
	if (mount(source, target, NULL, MS_BIND, NULL) < 0)
		return log_debug_errno(negative_errno(), "bind %s on %s: %m", source, target);

	if (statvfs(target, &sv) < 0) {
		r = negative_errno();
		goto undo;
	}
	/* Keep what the bind inherited (in a user namespace the locked flags must be passed
	 * again or the remount fails with EPERM), then apply what was asked. */
	unsigned long cur = statvfs_to_ms(sv.f_flag), want = cur;
	if (asked & ATIME_FLAGS)
		want &= ~ATIME_FLAGS;
	if (extra_options && *extra_options)
		(void)mnt_optstr_get_flags(extra_options, &want, linux_map);
	if (read_only)
		want |= MS_RDONLY;
	if (want != cur &&
	    mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | (want & ~OPERATION_FLAGS), NULL) < 0) {
		r = log_debug_errno(negative_errno(), "remount bind %s: %m", target);
		goto undo;
	}
	log_debug("bound %s on %s%s", source, target, read_only ? " (read-only)" : "");
	return 0;
undo:
	if (umount2(target, 0) < 0)
		(void)umount2(target, MNT_DETACH); /* never leave the half-made mount visible */
	return r;
}

int umount_path(const char *target)
{
	if (!target)
		return -EINVAL;
	if (umount2(target, 0) == 0) {
		log_debug("unmounted %s", target);
		return 1;
	}
	int r = negative_errno();
	if (r == -ENOENT || r == -ENOTDIR)
		return 0;
	if (r == -EINVAL) {
		/* EINVAL is "not a mount point", but also "not allowed" (locked mounts): tell
		 * them apart. */
		int m = is_mount_point(target);
		if (m == 0 || m == -ENOENT)
			return 0;
	}
	return log_debug_errno(r, "umount %s: %m", target);
}

int umount_all_at(const char *target)
{
	int n = 0;

	for (;;) {
		int r = umount_path(target);
		if (r < 0)
			return r;
		if (r == 0)
			return n;
		if (++n >= MAX_STACKED)
			return -ELOOP;
	}
}
