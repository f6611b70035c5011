/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "alloc.h"
#include "failpoint.h"
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

int pread_zero_filled(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break;
		done += (size_t)n;
	}
	memset(p + done, 0, len - done);
	return 0;
}

#define TMP_SUFFIX ".tmp-"
#define TMP_HEX 16

bool write_file_is_temporary(const char *name)
{
	size_t n = strlen(name), s = strlen(TMP_SUFFIX);

	if (n < 1 + 1 + s + TMP_HEX || name[0] != '.' ||
	    strncmp(name + n - TMP_HEX - s, TMP_SUFFIX, s) != 0)
		return false;
	for (const char *c = name + n - TMP_HEX; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/* Makes a new temporary in tmp_dir_fd and flocks it. A cleaner may have removed it between
 * the create and the flock (it took the flock first): then it is made again. */
static int temporary_create(int tmp_dir_fd, const char *name, mode_t mode, char *ret_tmp,
			    size_t size, int *ret_fd)
{
	for (unsigned attempt = 0; attempt < 8; attempt++) {
		struct stat st;

		if ((size_t)snprintf(ret_tmp, size, ".%s" TMP_SUFFIX "%016" PRIx64, name,
				     random_u64()) >= size)
			return -ENAMETOOLONG;
		_cleanup_close_ int fd =
			openat(tmp_dir_fd, ret_tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return negative_errno();
		if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0)
			return negative_errno();
		if (st.st_nlink == 0)
			continue; /* removed by a cleaner before we held it */
		*ret_fd = TAKE_FD(fd);
		return 0;
	}
	return -EEXIST;
}

int write_file_atomic_via(int tmp_dir_fd, int dir_fd, const char *name, const void *data,
			  size_t len, mode_t mode, WriteFileFlags flags)
{
	bool durable = flags & WRITE_FILE_DURABLE;
	char tmp[512];
	_cleanup_close_ int fd = -EBADF;

	int r = temporary_create(tmp_dir_fd, name, mode, tmp, sizeof(tmp), &fd);
	if (r < 0)
		return r;
	r = write_all(fd, data, len);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = negative_errno();
	if (r == 0 && durable && fsync(fd) < 0)
		r = negative_errno();
	if (r == 0 && failpoints_enabled()) {
		char fp[300];
		snprintf(fp, sizeof(fp), "atomic-rename:%s", name);
		failpoint(fp);
	}
	if (r == 0 && renameat(tmp_dir_fd, tmp, dir_fd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(tmp_dir_fd, tmp, 0);
		return r;
	}
	return durable ? fsync_dir(dir_fd) : 0;
}

int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode)
{
	return write_file_atomic_via(dir_fd, dir_fd, name, data, len, mode, WRITE_FILE_DURABLE);
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
	/* O_NONBLOCK: a FIFO left at name must not hang the open (read_fd() refuses it). */
	_cleanup_close_ int fd =
		openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
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
