/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "alloc.h"
#include "fileio.h"
#include "random-util.h"

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fsync_dir(int dir_fd)
{
	return fsync(dir_fd) < 0 ? negative_errno() : 0;
}

int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode)
{
	char tmp[512];
	int r;

	if ((size_t)snprintf(tmp, sizeof(tmp), ".%s.tmp-%016" PRIx64, name, random_u64()) >=
	    sizeof(tmp))
		return -ENAMETOOLONG;

	_cleanup_close_ int fd =
		openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return negative_errno();
	r = write_all(fd, data, len);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = negative_errno();
	if (r == 0 && fsync(fd) < 0)
		r = negative_errno();
	if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(dir_fd, tmp, 0);
		return r;
	}
	return fsync_dir(dir_fd);
}

/* Reads fd, a regular file of at most max bytes, whole. */
static int read_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EBADF;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	_cleanup_free_ char *buf = xmalloc((size_t)st.st_size + 1);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size + 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > (size_t)st.st_size)
			return -EFBIG; /* grew while we read it */
	}
	buf[len] = 0;
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return negative_errno();
	return read_fd(fd, max, ret, ret_len);
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return read_fd(fd, max, ret, ret_len);
}
