/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "copy.h"
#include "error-util.h"
#include "macro.h"

const char *copy_method_to_string(CopyMethod m)
{
	return m == COPY_REFLINK ? "reflink" : "sparse copy";
}

static int copy_range(int src_fd, int dst_fd, off_t start, off_t end)
{
	off_t in = start, out = start;
	while (in < end) {
		ssize_t n = copy_file_range(src_fd, &in, dst_fd, &out,
					    (size_t)MIN(end - in, 1 << 30), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return -EIO; /* source shrank under us */
	}
	return 0;
}

static int copy_sparse(int src_fd, int dst_fd, off_t size)
{
	off_t pos = 0;

	while (pos < size) {
		off_t data = lseek(src_fd, pos, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* only a hole is left */
			return negative_errno();
		}
		off_t hole = lseek(src_fd, data, SEEK_HOLE);
		if (hole < 0)
			return negative_errno();
		int r = copy_range(src_fd, dst_fd, data, MIN(hole, size));
		if (r < 0)
			return r;
		pos = hole;
	}
	return ftruncate(dst_fd, size) < 0 ? negative_errno() : 0;
}

int copy_file_contents(int src_fd, int dst_fd, CopyMethod *ret_method)
{
	struct stat st;

	if (fstat(src_fd, &st) < 0)
		return negative_errno();
	if (ioctl(dst_fd, FICLONE, src_fd) == 0) {
		*ret_method = COPY_REFLINK;
		return 0;
	}
	if (errno != EOPNOTSUPP && errno != EXDEV && errno != EINVAL && errno != ENOTTY)
		return negative_errno();
	int r = copy_sparse(src_fd, dst_fd, st.st_size);
	if (r < 0)
		return r;
	*ret_method = COPY_SPARSE;
	return 0;
}

/* ---- trees ---- */

typedef struct TreeCopy {
	dev_t dev; /* the source's filesystem: never crossed */
	CopyMethod method;
	bool any_sparse;
	char **ret_why;
} TreeCopy;

/* Owner, mode and times of what was made as dst_fd/name (dir_fd, or AT_SYMLINK_NOFOLLOW for a
 * symlink), as the source st has them. */
static int copy_attrs(int dir_fd, const char *name, const struct stat *st, const char *where,
		      char **ret_why)
{
	struct timespec times[2] = {st->st_atim, st->st_mtim};

	if (fchownat(dir_fd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (!S_ISLNK(st->st_mode) && fchmodat(dir_fd, name, st->st_mode & 07777, 0) < 0) ||
	    utimensat(dir_fd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
		return errorf(ret_why, negative_errno(), "%s: %m", where);
	return 0;
}

static int copy_entry(TreeCopy *c, int src_dir, int dst_dir, const char *name, const char *where,
		      int depth);

static int copy_dir_entries(TreeCopy *c, int src_fd, int dst_fd, const char *where, int depth)
{
	_cleanup_close_ int list_fd = openat(src_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (list_fd < 0)
		return errorf(c->ret_why, negative_errno(), "%s: %m", where);
	_cleanup_closedir_ DIR *d = fdopendir(list_fd);
	if (!d)
		return errorf(c->ret_why, negative_errno(), "%s: %m", where);
	TAKE_FD(list_fd);
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", where, de->d_name);
		int r = copy_entry(c, src_fd, dst_fd, de->d_name, sub, depth + 1);
		if (r < 0)
			return r;
	}
	return errno > 0 ? errorf(c->ret_why, negative_errno(), "%s: %m", where) : 0;
}

static int copy_entry(TreeCopy *c, int src_dir, int dst_dir, const char *name, const char *where,
		      int depth)
{
	struct stat st;
	int r;

	if (fstatat(src_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errorf(c->ret_why, negative_errno(), "%s: %m", where);
	if (st.st_dev != c->dev)
		return errorf(c->ret_why, -EBUSY, "%s is a mount point: not copied", where);
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(src_dir, name, target, sizeof(target) - 1);
		if (n < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		target[n] = 0;
		if (symlinkat(target, dst_dir, name) < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		return copy_attrs(dst_dir, name, &st, where, c->ret_why);
	}
	if (S_ISSOCK(st.st_mode))
		return 0; /* a socket holds nothing: whoever listened on it makes it again */
	if (S_ISFIFO(st.st_mode)) {
		if (mkfifoat(dst_dir, name, st.st_mode & 07777) < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		return copy_attrs(dst_dir, name, &st, where, c->ret_why);
	}
	if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))
		return errorf(c->ret_why, -EPERM,
			      "%s is a device file: not copied (remove it, then try again)", where);
	if (S_ISDIR(st.st_mode)) {
		if (depth > COPY_TREE_DEPTH_MAX)
			return errorf(c->ret_why, -ELOOP,
				      "%s is nested more than %d directories deep", where,
				      COPY_TREE_DEPTH_MAX);
		_cleanup_close_ int src =
			openat(src_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (src < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		if (mkdirat(dst_dir, name, 0700) < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		_cleanup_close_ int dst =
			openat(dst_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dst < 0)
			return errorf(c->ret_why, negative_errno(), "%s: %m", where);
		if ((r = copy_dir_entries(c, src, dst, where, depth)) < 0)
			return r;
		return copy_attrs(dst_dir, name, &st, where, c->ret_why);
	}
	_cleanup_close_ int src =
		openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (src < 0)
		return errorf(c->ret_why, negative_errno(), "%s: %m", where);
	struct stat now;
	if (fstat(src, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st.st_ino)
		return errorf(c->ret_why, -EBUSY, "%s changed while it was copied", where);
	_cleanup_close_ int dst =
		openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (dst < 0)
		return errorf(c->ret_why, negative_errno(), "%s: %m", where);
	CopyMethod m;
	if ((r = copy_file_contents(src, dst, &m)) < 0)
		return errorf(c->ret_why, r, "%s: %s", where, strerror(-r));
	c->any_sparse = c->any_sparse || m == COPY_SPARSE;
	return copy_attrs(dst_dir, name, &st, where, c->ret_why);
}

int copy_tree_at(int src_dir_fd, int dst_dir_fd, const char *where, CopyMethod *ret_method,
		 char **ret_why)
{
	struct stat st;

	if (fstat(src_dir_fd, &st) < 0)
		return errorf(ret_why, negative_errno(), "%s: %m", where);
	TreeCopy c = {.dev = st.st_dev, .ret_why = ret_why};
	int r = copy_dir_entries(&c, src_dir_fd, dst_dir_fd, where, 0);
	if (r < 0)
		return r;
	struct timespec times[2] = {st.st_atim, st.st_mtim};
	if (fchown(dst_dir_fd, st.st_uid, st.st_gid) < 0 ||
	    fchmod(dst_dir_fd, st.st_mode & 07777) < 0 || futimens(dst_dir_fd, times) < 0)
		return errorf(ret_why, negative_errno(), "%s: %m", where);
	*ret_method = c.any_sparse ? COPY_SPARSE : COPY_REFLINK;
	return 0;
}
