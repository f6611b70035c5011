/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "alloc.h"
#include "log.h"
#include "pinned-path.h"

static bool force_fallback;

void pinned_path_force_fallback(bool on)
{
	force_fallback = on;
}

int request_path_check(const char *path, const char **ret_why)
{
	const char *why = NULL;

	if (!path || !*path)
		why = "missing";
	else if (path[0] != '/')
		why = "not an absolute path";
	else if (strlen(path) >= PATH_MAX)
		why = "too long";
	else if (strcmp(path, "/") == 0)
		why = "the root directory";
	else
		for (const char *c = path; *c == '/';) {
			const char *end = strchrnul(c + 1, '/');
			size_t n = (size_t)(end - c - 1);
			if (n == 0 || (n == 1 && c[1] == '.') ||
			    (n == 2 && c[1] == '.' && c[2] == '.')) {
				why = "not a clean absolute path (empty, '.' or '..' component)";
				break;
			}
			c = end;
		}
	if (why) {
		*ret_why = why;
		return -EINVAL;
	}
	return 0;
}

/* One O_NOFOLLOW component at a time from "/": O_PATH|O_NOFOLLOW alone would open a symlink
 * itself, O_DIRECTORY turns that into ENOTDIR, and a look at the entry tells the two apart. */
static int open_dir_nofollow_walk(const char *dir)
{
	_cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *copy = xstrdup(dir);
	char *save = NULL;

	if (fd < 0)
		return negative_errno();
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			int r = negative_errno();
			struct stat st;
			if (r == -ENOTDIR && fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				r = -ELOOP;
			return r;
		}
		closep(&fd);
		fd = next;
	}
	return TAKE_FD(fd);
}

static int open_dir_nofollow(const char *dir)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	if (!force_fallback) {
		long fd = syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS && errno != EPERM) /* EPERM: seccomp filters that refuse it */
			return negative_errno();
	}
	return open_dir_nofollow_walk(dir);
}

int pinned_path_open(const char *path, PinnedPath *ret)
{
	const char *why;

	if (request_path_check(path, &why) < 0)
		return -EINVAL;
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir =
		slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
	int fd = open_dir_nofollow(dir);
	if (fd < 0)
		return log_debug_errno(fd, "cannot open %s without following symlinks: %m", dir);
	*ret = (PinnedPath){.parent_fd = fd, .base = xstrdup(slash + 1)};
	return 0;
}

void pinned_path_done(PinnedPath *p)
{
	if (!p)
		return;
	closep(&p->parent_fd);
	p->parent_fd = -EBADF;
	free(p->base);
	p->base = NULL;
}

int pinned_path_stat(const PinnedPath *p, PathObject *ret)
{
	struct statx stx, parent;

	if (statx(p->parent_fd, p->base, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_TYPE | STATX_MODE | STATX_INO | STATX_MNT_ID, &stx) < 0)
		return negative_errno();
	bool root;
	if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		root = !!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	else if (statx(p->parent_fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &parent) == 0 &&
		 (stx.stx_mask & parent.stx_mask & STATX_MNT_ID))
		root = stx.stx_mnt_id != parent.stx_mnt_id;
	else
		root = false; /* kernels before 5.8: no way to tell through an fd */
	*ret = (PathObject){
		.mode = stx.stx_mode,
		.dev = makedev(stx.stx_dev_major, stx.stx_dev_minor),
		.rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor),
		.ino = stx.stx_ino,
		.mnt_id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0,
		.mount_root = root,
	};
	return 0;
}

int pinned_path_open_object(const PinnedPath *p, int flags)
{
	int fd = openat(p->parent_fd, p->base, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	int r = negative_errno();
	struct stat st;
	/* O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR: say what it is. */
	if (r == -ENOTDIR && fstatat(p->parent_fd, p->base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		r = -ELOOP;
	return r;
}

int dir_is_empty(int dir_fd)
{
	char buf[4096] __attribute__((aligned(8)));

	_cleanup_close_ int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return 1;
		for (long off = 0; off < n;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(buf + off);
			if (strcmp(de->name, ".") != 0 && strcmp(de->name, "..") != 0)
				return 0;
			off += de->reclen;
		}
	}
}

/* open_beneath() without openat2: every component but the last opened O_PATH|O_DIRECTORY, all
 * of them O_NOFOLLOW. */
static int open_beneath_walk(int dir_fd, const char *path, int flags, mode_t mode)
{
	_cleanup_free_ char *copy = xstrdup(path);
	_cleanup_close_ int fd = -EBADF;
	char *save = NULL, *c = strtok_r(copy, "/", &save);

	if (path[0] == '/')
		return -EXDEV;
	while (c) {
		char *next = strtok_r(NULL, "/", &save);
		if (strcmp(c, "..") == 0)
			return -EXDEV;
		int at = fd >= 0 ? fd : dir_fd;
		int f = next ? O_PATH | O_DIRECTORY : flags;
		int n = openat(at, c, f | O_NOFOLLOW | O_CLOEXEC, mode);
		if (n < 0) {
			int r = negative_errno();
			struct stat st;
			/* O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR: say what it is. */
			if (r == -ENOTDIR && fstatat(at, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				r = -ELOOP;
			return r;
		}
		closep(&fd);
		fd = n;
		c = next;
	}
	return fd >= 0 ? TAKE_FD(fd) : -EINVAL;
}

int open_beneath(int dir_fd, const char *path, int flags, mode_t mode, mode_t type)
{
	/* A FIFO or a device someone left must not hang or wake anything: O_NONBLOCK until its
	 * type is known. */
	bool nonblock = !(flags & (O_PATH | O_NONBLOCK));
	int f = flags | (nonblock ? O_NONBLOCK | O_NOCTTY : 0);
	struct open_how how = {
		.flags = (uint64_t)(f | O_NOFOLLOW | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	if (!path || !*path)
		return -EINVAL;
	for (unsigned attempt = 0; !force_fallback && attempt < 8; attempt++) {
		fd = (int)syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN) /* EAGAIN: a rename raced the lookup */
			break;
	}
	/* ENOTDIR: O_DIRECTORY|O_NOFOLLOW met a symlink, or a file is on the way: the walk
	 * tells the two apart. */
	if (fd < 0 && (force_fallback || errno == ENOSYS || errno == EPERM || errno == ENOTDIR))
		fd = open_beneath_walk(dir_fd, path, f, mode);
	else if (fd < 0)
		fd = negative_errno();
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISLNK(st.st_mode)) /* O_PATH|O_NOFOLLOW opens a symlink itself */
		return -ELOOP;
	if (type && (st.st_mode & S_IFMT) != type)
		return type == S_IFDIR ? -ENOTDIR : S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;
	/* A directory ignores O_NONBLOCK. F_SETFL changes only O_APPEND, O_DIRECT, O_NOATIME and
	 * O_NONBLOCK (O_ASYNC is never set by open): the flags asked for, without a F_GETFL. */
	if (nonblock && !S_ISDIR(st.st_mode) && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
		return negative_errno();
	return TAKE_FD(fd);
}

int stat_beneath(int dir_fd, const char *path, mode_t type, struct stat *ret)
{
	_cleanup_close_ int fd = open_beneath(dir_fd, path, O_PATH, 0, type);
	if (fd < 0)
		return fd;
	return fstat(fd, ret) < 0 ? negative_errno() : 0;
}
