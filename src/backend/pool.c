/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "log.h"
#include "pool.h"

struct Pool {
	char *path;
	int dir_fd; /* pinned pool directory */
	uint64_t capacity;
	char *zone;
};

static const char *const pool_subdirs[] = {"volumes", "snapshots", "tmp"};

static int pool_layout(int dir_fd)
{
	for (size_t i = 0; i < ELEMENTSOF(pool_subdirs); i++)
		if (mkdirat(dir_fd, pool_subdirs[i], 0700) < 0 && errno != EEXIST)
			return negative_errno();
	return 0;
}

int pool_open(const PoolConfig *config, Pool **ret)
{
	if (mkdir(config->path, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	_cleanup_close_ int fd = open(config->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
		return negative_errno();
	int r = pool_layout(fd);
	if (r < 0)
		return r;

	Pool *p = xnew0(Pool, 1);
	p->path = xstrdup(config->path);
	p->dir_fd = TAKE_FD(fd);
	p->capacity = config->capacity;
	p->zone = xstrdup(config->zone);
	*ret = p;
	return 0;
}

void pool_close(Pool *p)
{
	if (!p)
		return;
	closep(&p->dir_fd);
	free(p->path);
	free(p->zone);
	free(p);
}

int pool_probe(Pool *p)
{
	struct statvfs sv;
	struct stat st;

	if (fstat(p->dir_fd, &st) < 0)
		return negative_errno();
	if (st.st_nlink == 0)
		return -ENOENT; /* the directory was removed under us */
	if (fstatvfs(p->dir_fd, &sv) < 0)
		return negative_errno();
	if (sv.f_flag & ST_RDONLY)
		return -EROFS;
	return 0;
}

const char *pool_path(const Pool *p)
{
	return p->path;
}
