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
