/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
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
