/* SPDX-License-Identifier: Apache-2.0 */
/* Directory volumes (volumeKind: directory): a directory of the pool's own filesystem bounded
 * by a project quota at the volume's size, where that filesystem enforces project quotas. See
 * docs/pool.md, "Directory volumes". */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "mount-util.h"
#include "pinned-path.h"
#include "pool-internal.h"
#include "quota.h"
#include "random-util.h"
#include "strv.h"

/* "xfs on /dev/sdb1, mounted at /var/lib/volplug": the pool's filesystem as an operator finds
 * it; "its filesystem" when the kernel's table does not say. */
static char *pool_fs_describe(const Pool *p)
{
	struct statx stx;
	MountInfo mi = {};

	if (statx(p->dir_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 ||
	    !(stx.stx_mask & STATX_MNT_ID) || mount_find_by_id(stx.stx_mnt_id, &mi) < 0)
		return xstrdup("its filesystem");
	char *s = xasprintf("its filesystem (%s on %s, mounted at %s)", mi.fstype, mi.source,
			    mi.target);
	mount_info_done(&mi);
	return s;
}

int pool_directory_volumes_check(Pool *p, char **ret_why)
{
	int r = quota_project_probe(p->dir_fd);
	if (r == 0)
		return 0;
	_cleanup_free_ char *fs = pool_fs_describe(p);
	if (r == -EOPNOTSUPP)
		*ret_why = xasprintf(
			"pool %s: %s enforces no project quotas, which bound a directory volume "
			"to its size: mount xfs with -o prjquota, or make ext4 with -O "
			"project,quota and mount it with -o prjquota (the kernel needs "
			"CONFIG_XFS_QUOTA or CONFIG_QFMT_V2); or leave volumeKind out for a "
			"volume on a loop device",
			p->path, fs);
	else
		*ret_why = xasprintf("pool %s: cannot ask %s for its project quotas: %s", p->path,
				     fs, strerror(-r));
	log_debug("pool %s: no directory volumes: %s", p->path, strerror(-r));
	return r == -EOPNOTSUPP ? -EUCLEAN : r;
}

/* Project IDs the pool picks from: above those operators number by hand (/etc/projid), below
 * 2^31 (xfs_quota and setquota parse IDs as signed). */
#define PROJECT_MIN (UINT32_C(1) << 24)
#define PROJECT_SPAN ((UINT32_C(1) << 31) - PROJECT_MIN)
#define PROJECT_TRIES 64

/* Whether project id is free: nothing counted against it and no limit on it (what a volume's
 * project has from its create, under the pool lock, until its delete). */
static int project_free(Pool *p, uint32_t id)
{
	QuotaUsage u = {};

	int r = quota_project_get(p->dir_fd, id, &u);
	if (r == -ENOENT || r == -ESRCH)
		return 1; /* xfs: no dquot for it yet */
	if (r < 0)
		return r;
	return !u.bytes_used && !u.inodes_used && !u.bytes_limit && !u.inodes_limit;
}

int pool_dirvol_make(Pool *p, int staging_fd, uint64_t size, uint32_t *ret_project)
{
	int r;

	if (mkdirat(staging_fd, TREE_DIR, 0755) < 0)
		return negative_errno();
	_cleanup_close_ int fd =
		open_beneath(staging_fd, TREE_DIR, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (fd < 0)
		return fd;
	/* Picked, marked on the directory and limited in one hold of the pool lock: the limit
	 * is what tells every other process on the pool (and on the filesystem) it is taken. */
	if ((r = pool_lock_take(p)) < 0)
		return r;
	uint32_t id = 0;
	for (int i = 0; i < PROJECT_TRIES && r >= 0; i++) {
		uint32_t candidate = PROJECT_MIN + (uint32_t)(random_u64() % PROJECT_SPAN);
		r = project_free(p, candidate);
		if (r > 0) {
			id = candidate;
			break;
		}
	}
	if (r >= 0 && !id)
		r = -EMLINK;
	if (r >= 0 && (r = dir_project_set(fd, id)) >= 0)
		r = quota_project_set(p->dir_fd, id, size);
	pool_lock_release(p);
	if (r < 0)
		return r; /* the staging directory goes, its tree with it (pool_dirvol_release) */
	*ret_project = id;
	return 0;
}

int pool_dirvol_set_size(Pool *p, uint32_t project, uint64_t size)
{
	int r = quota_project_set(p->dir_fd, project, size);
	/* mounted without prjquota since the volume was made: nothing bounds it now */
	if (r == -ENOSYS || r == -ESRCH || r == -EOPNOTSUPP || r == -EINVAL)
		return quota_project_probe(p->dir_fd) < 0 ? -EUCLEAN : r;
	return r;
}

uint32_t pool_dirvol_project(int obj_fd)
{
	uint32_t id = 0;

	_cleanup_close_ int fd = open_beneath(obj_fd, TREE_DIR, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (fd < 0 || dir_project_get(fd, &id) < 0)
		return 0;
	return id;
}

void pool_dirvol_release(Pool *p, int obj_fd, uint32_t project)
{
	/* only once its tree is gone: what is left of it is still counted against the project */
	if (!project || faccessat(obj_fd, TREE_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	int r = quota_project_set(p->dir_fd, project, 0);
	if (r < 0 && r != -EOPNOTSUPP)
		log_debug("pool %s: clearing the limit of project %" PRIu32 " failed: %s", p->path,
			  project, strerror(-r));
}

int pool_dirvol_open(Pool *p, const char *id, int flags)
{
	_cleanup_close_ int fd = pool_volume_dir_open(p, id);
	if (fd < 0)
		return fd;
	int r = open_beneath(fd, TREE_DIR, flags | O_DIRECTORY, 0, S_IFDIR);
	return r == -ELOOP || r == -ENOTDIR || r == -EBADFD ? -EUCLEAN : r;
}

int pool_dirvol_usage(Pool *p, const char *id, QuotaUsage *ret)
{
	uint32_t project = 0;

	_cleanup_close_ int fd = pool_dirvol_open(p, id, O_RDONLY);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	int r = dir_project_get(fd, &project);
	if (r < 0)
		return r;
	if (!project)
		return 0;
	r = quota_project_get(p->dir_fd, project, ret);
	return r < 0 ? r : 1;
}

int pool_dirvol_mounted(Pool *p, const char *id, char **ret_target)
{
	_cleanup_strv_free_ char **targets = NULL;
	struct stat st, t;

	_cleanup_close_ int fd = pool_dirvol_open(p, id, O_PATH);
	if (fd < 0)
		return fd == -ENOENT || fd == -EUCLEAN ? 0 : fd;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	int r = mount_list_by_devno(st.st_dev, &targets);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	/* A bind of the tree is a mount of the pool's filesystem whose root is the tree. */
	for (size_t i = 0; targets && targets[i]; i++)
		if (lstat(targets[i], &t) == 0 && t.st_dev == st.st_dev && t.st_ino == st.st_ino) {
			*ret_target = xstrdup(targets[i]);
			return 1;
		}
	return 0;
}
