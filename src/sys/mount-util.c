/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <libmount.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "log.h"
#include "mount-util.h"
#include "pinned-path.h"
#include "strv.h"

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

/* Options of mount(8) itself that only annotate (fstab, systemd): nothing to do for them. The
 * others (loop=, offset=, helper=, owner, X-mount.mkdir...) ask mount(8) to act, and nothing
 * here runs mount(8): refused rather than silently dropped. */
static bool userspace_option_harmless(const char *name)
{
	static const char *const harmless[] = {"defaults", "auto", "noauto", "nofail", "_netdev"};

	for (size_t i = 0; i < ELEMENTSOF(harmless); i++)
		if (strcmp(name, harmless[i]) == 0)
			return true;
	if (strncasecmp(name, "x-mount.", 8) == 0)
		return false;
	return strncasecmp(name, "x-", 2) == 0 || strncmp(name, "comment=", 8) == 0;
}

static int userspace_options_check(const char *user)
{
	_cleanup_free_ char *copy = xstrdup(user ?: "");
	char *save = NULL;

	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save))
		if (!userspace_option_harmless(o))
			return -EINVAL;
	return 0;
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
		int r = userspace_options_check(user);
		free(user);
		free(vfs);
		if (r < 0) {
			free(fs);
			return r;
		}
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

/* ---- acting through fds: mounts onto pinned targets ---- */

static bool legacy_api;

void mount_force_legacy_api(bool on)
{
	legacy_api = on;
}

static bool new_api_missing(int r)
{
	return r == -ENOSYS || r == -EPERM; /* EPERM: a seccomp filter that refuses it */
}

/* The per-mount flags of an options string, as mount attributes. */
static unsigned ms_to_attr(unsigned long ms)
{
	static const struct {
		unsigned long ms;
		unsigned attr;
	} map[] = {
		{MS_RDONLY, MOUNT_ATTR_RDONLY},		{MS_NOSUID, MOUNT_ATTR_NOSUID},
		{MS_NODEV, MOUNT_ATTR_NODEV},		{MS_NOEXEC, MOUNT_ATTR_NOEXEC},
		{MS_NOATIME, MOUNT_ATTR_NOATIME},	{MS_STRICTATIME, MOUNT_ATTR_STRICTATIME},
		{MS_NODIRATIME, MOUNT_ATTR_NODIRATIME}, {MS_NOSYMFOLLOW, MOUNT_ATTR_NOSYMFOLLOW},
	};
	unsigned attr = 0;

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (ms & map[i].ms)
			attr |= map[i].attr;
	return attr;
}

/* Superblock flags go to the filesystem context by name. */
static const struct {
	unsigned long ms;
	const char *name;
} sb_flags[] = {
	{MS_RDONLY, "ro"},	   {MS_SYNCHRONOUS, "sync"}, {MS_DIRSYNC, "dirsync"},
	{MS_LAZYTIME, "lazytime"}, {MS_MANDLOCK, "mand"},
};

/* The kernel's own words for what it refused, read from the context (one message a read). */
static char *fs_context_messages(int fs_fd)
{
	_cleanup_free_ char *all = NULL;
	char buf[512];
	ssize_t n;

	while ((n = read(fs_fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = 0;
		const char *msg = n > 2 && buf[1] == ' ' ? buf + 2 : buf; /* "e ext4: ..." */
		char *joined = all ? xasprintf("%s; %s", all, msg) : xstrdup(msg);
		free(all);
		all = joined;
	}
	return TAKE_PTR(all);
}

/* Sets one "key" or "key=value" option of a filesystem context. */
static int fs_context_set(int fs_fd, const char *option)
{
	_cleanup_free_ char *key = xstrdup(option);
	char *value = strchr(key, '=');

	if (value)
		*value++ = 0;
	if (fsconfig(fs_fd, value ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, key, value, 0) < 0)
		return negative_errno();
	return 0;
}

/* Fills a filesystem context from an options string's filesystem part and flags. */
static int fs_context_configure(int fs_fd, const char *fs_data, unsigned long flags)
{
	char *save = NULL;
	int r;

	_cleanup_free_ char *copy = xstrdup(fs_data ?: "");
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save))
		if ((r = fs_context_set(fs_fd, o)) < 0)
			return r;
	for (size_t i = 0; i < ELEMENTSOF(sb_flags); i++)
		if ((flags & sb_flags[i].ms) &&
		    fsconfig(fs_fd, FSCONFIG_SET_FLAG, sb_flags[i].name, NULL, 0) < 0)
			return negative_errno();
	return 0;
}

static char *proc_fd_path(int fd, const char *name)
{
	return name ? xasprintf("/proc/self/fd/%d/%s", fd, name)
		    : xasprintf("/proc/self/fd/%d", fd);
}

int mount_options_check(const char *fstype, const char *options, char **ret_error)
{
	_cleanup_free_ char *data = NULL;
	unsigned long flags;

	if (!fstype || !*fstype)
		return -EINVAL;
	int r = mount_options_split(options, &flags, &data);
	if (r < 0) {
		*ret_error = xasprintf("'%s' is not a plain mount option (an operation, or an "
				       "option of mount(8), which is not run here)",
				       options);
		return r;
	}
	if (legacy_api)
		return 0;
	_cleanup_close_ int fs_fd = fsopen(fstype, FSOPEN_CLOEXEC);
	if (fs_fd < 0) {
		r = negative_errno();
		if (new_api_missing(r))
			return 0; /* nothing to ask: the mount itself will tell */
		*ret_error = xasprintf("filesystem type '%s' is not known to the kernel", fstype);
		return r == -ENODEV ? -EINVAL : r;
	}
	r = fs_context_configure(fs_fd, data, flags);
	if (r < 0) {
		_cleanup_free_ char *why = fs_context_messages(fs_fd);
		*ret_error =
			why ? TAKE_PTR(why) : xasprintf("%s does not accept '%s'", fstype, options);
		return -EINVAL;
	}
	return 0;
}

static int mount_fs_legacy(const char *source_dev, int target_fd, const char *fstype,
			   unsigned long flags, const char *data)
{
	_cleanup_free_ char *target = proc_fd_path(target_fd, NULL);
	if (mount(source_dev, target, fstype, flags, data) < 0)
		return negative_errno();
	return 0;
}

int mount_fs_at(const char *source_dev, int target_fd, const char *fstype, const char *options,
		bool read_only, char **ret_error)
{
	_cleanup_free_ char *data = NULL;
	unsigned long flags;

	if (!source_dev || !fstype || !*fstype)
		return -EINVAL;
	int r = mount_options_split(options, &flags, &data);
	if (r < 0) {
		*ret_error = xasprintf("'%s' is not a plain mount option", options ?: "");
		return r;
	}
	if (read_only)
		flags |= MS_RDONLY;
	if (legacy_api)
		return mount_fs_legacy(source_dev, target_fd, fstype, flags, data);

	_cleanup_close_ int fs_fd = fsopen(fstype, FSOPEN_CLOEXEC);
	if (fs_fd < 0 && new_api_missing(negative_errno()))
		return mount_fs_legacy(source_dev, target_fd, fstype, flags, data);
	if (fs_fd < 0)
		return negative_errno();
	if (fsconfig(fs_fd, FSCONFIG_SET_STRING, "source", source_dev, 0) < 0 ||
	    (r = fs_context_configure(fs_fd, data, flags)) < 0 ||
	    fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		r = r < 0 ? r : negative_errno();
		*ret_error = fs_context_messages(fs_fd);
		return log_debug_errno(r, "mount %s (%s, %s): %s", source_dev, fstype,
				       options ?: "", *ret_error ?: "");
	}
	_cleanup_close_ int mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, ms_to_attr(flags));
	if (mnt_fd < 0)
		return negative_errno();
	if (move_mount(mnt_fd, "", target_fd, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return negative_errno();
	log_debug("mounted %s (%s)", source_dev, fstype);
	return 0;
}

/* Classic bind through /proc/self/fd, then the flags in a second step on the new mount (reached
 * again through the pinned parent); undone if that step fails. */
static int mount_bind_legacy(int source_fd, const PinnedPath *target, int target_fd,
			     unsigned long want)
{
	_cleanup_free_ char *source = proc_fd_path(source_fd, NULL);
	_cleanup_free_ char *onto = proc_fd_path(target_fd, NULL);
	struct statvfs sv;

	if (mount(source, onto, NULL, MS_BIND, NULL) < 0)
		return negative_errno();
	if (!want)
		return 0;
	_cleanup_close_ int mnt_fd = pinned_path_open_object(target, O_PATH);
	_cleanup_free_ char *mnt = mnt_fd >= 0 ? proc_fd_path(mnt_fd, NULL) : NULL;
	if (!mnt || fstatvfs(mnt_fd, &sv) < 0 ||
	    mount(NULL, mnt, NULL, MS_REMOUNT | MS_BIND | statvfs_to_ms(sv.f_flag) | want, NULL) <
		    0) {
		int r = mnt_fd < 0 ? mnt_fd : negative_errno();
		(void)umount_at(target);
		return r;
	}
	return 0;
}

int mount_bind_at(int source_fd, const PinnedPath *target, int target_fd, bool read_only,
		  const char *options)
{
	const struct libmnt_optmap *linux_map = mnt_get_builtin_optmap(MNT_LINUX_MAP);
	unsigned long want = 0;

	if (options && *options &&
	    (mnt_optstr_get_flags(options, &want, linux_map) < 0 || (want & OPERATION_FLAGS)))
		return -EINVAL;
	if (read_only)
		want |= MS_RDONLY;
	/* Superblock flags belong to the filesystem's own mount, not to a bind of it. */
	want &= ~(unsigned long)(MS_SYNCHRONOUS | MS_DIRSYNC | MS_LAZYTIME | MS_MANDLOCK);
	if (legacy_api)
		return mount_bind_legacy(source_fd, target, target_fd, want);

	_cleanup_close_ int tree_fd =
		open_tree(source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree_fd < 0 && new_api_missing(negative_errno()))
		return mount_bind_legacy(source_fd, target, target_fd, want);
	if (tree_fd < 0)
		return negative_errno();
	/* The flags are set on the detached copy: the mount never shows up without them. */
	struct mount_attr attr = {.attr_set = ms_to_attr(want)};
	if (attr.attr_set & MOUNT_ATTR__ATIME)
		attr.attr_clr |= MOUNT_ATTR__ATIME;
	if (attr.attr_set && mount_setattr(tree_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int r = negative_errno();
		if (new_api_missing(r))
			return mount_bind_legacy(source_fd, target, target_fd, want);
		return r;
	}
	if (move_mount(tree_fd, "", target_fd, "",
		       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return negative_errno();
	log_debug("bound onto %s%s", target->base, read_only ? " (read-only)" : "");
	return 0;
}

int umount_at(const PinnedPath *p)
{
	_cleanup_free_ char *path = proc_fd_path(p->parent_fd, p->base);

	if (umount2(path, UMOUNT_NOFOLLOW) == 0)
		return 1;
	int r = negative_errno();
	if (r == -EINVAL || r == -ENOENT)
		return 0; /* not a mount point (or gone) */
	return log_debug_errno(r, "umount %s: %m", p->base);
}

/* The first entry of the mount table that matches, in table order, into *ret_first; or, when
 * ret_targets is given, the mount points of every entry that matches (a strv, NULL for none). */
static int mount_find_matching(bool (*match)(struct libmnt_fs *fs, const void *key),
			       const void *key, MountInfo *ret_first, char ***ret_targets)
{
	_cleanup_(mnt_unref_tablep) struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	_cleanup_strv_free_ char **targets = NULL;
	size_t n = 0, cap = 0;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	int r = ret_targets ? 0 : -ENOENT;

	if (!tb)
		return errno > 0 ? -errno : -ENOMEM;
	if (!(it = mnt_new_iter(MNT_ITER_FORWARD)))
		return -ENOMEM;
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		if (!match(fs, key))
			continue;
		if (!ret_targets) {
			fill_info(fs, ret_first);
			r = 0;
			break;
		}
		if (mnt_fs_get_target(fs))
			strv_push(&targets, &n, &cap, xstrdup(mnt_fs_get_target(fs)));
	}
	mnt_free_iter(it);
	if (ret_targets)
		*ret_targets = TAKE_PTR(targets);
	return r;
}

static bool match_id(struct libmnt_fs *fs, const void *key)
{
	return (uint64_t)mnt_fs_get_id(fs) == *(const uint64_t *)key;
}

static bool match_devno(struct libmnt_fs *fs, const void *key)
{
	return mnt_fs_get_devno(fs) == *(const dev_t *)key;
}

int mount_find_by_id(uint64_t mnt_id, MountInfo *ret)
{
	return mount_find_matching(match_id, &mnt_id, ret, NULL);
}

int mount_find_by_devno(dev_t devno, MountInfo *ret)
{
	return mount_find_matching(match_devno, &devno, ret, NULL);
}

int mount_list_by_devno(dev_t devno, char ***ret_targets)
{
	return mount_find_matching(match_devno, &devno, NULL, ret_targets);
}
