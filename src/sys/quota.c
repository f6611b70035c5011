/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "quota.h"

static int quotactl_at(int fd, unsigned cmd, uint32_t id, void *addr)
{
#ifdef SYS_quotactl_fd
	if (syscall(SYS_quotactl_fd, fd, QCMD(cmd, PRJQUOTA), id, addr) < 0)
		return negative_errno();
	return 0;
#else
	(void)fd, (void)cmd, (void)id, (void)addr;
	return -ENOSYS;
#endif
}

int quota_project_probe(int fd)
{
	struct fs_quota_statv st = {.qs_version = FS_QSTATV_VERSION1};

	int r = quotactl_at(fd, Q_XGETQSTATV, 0, &st);
	/* no quota support in the kernel or the filesystem (ENOSYS: no quota operations, or no
	 * quotactl_fd at all), or none turned on */
	if (r == -ENOSYS || r == -EINVAL || r == -ENOTTY || r == -ESRCH || r == -EOPNOTSUPP)
		return -EOPNOTSUPP;
	if (r < 0)
		return r;
	if (!(st.qs_flags & FS_QUOTA_PDQ_ACCT) || !(st.qs_flags & FS_QUOTA_PDQ_ENFD))
		return -EOPNOTSUPP;
	return 0;
}

int quota_project_get(int fd, uint32_t id, QuotaUsage *ret)
{
	struct if_dqblk q = {};

	int r = quotactl_at(fd, Q_GETQUOTA, id, &q);
	if (r < 0)
		return r;
	*ret = (QuotaUsage){
		.bytes_used = q.dqb_curspace,
		.inodes_used = q.dqb_curinodes,
		.bytes_limit = q.dqb_bhardlimit * QIF_DQBLKSIZE,
		.inodes_limit = q.dqb_ihardlimit,
	};
	return 0;
}

int quota_project_set(int fd, uint32_t id, uint64_t bytes)
{
	struct if_dqblk q = {
		.dqb_bhardlimit = (bytes + QIF_DQBLKSIZE - 1) / QIF_DQBLKSIZE,
		.dqb_valid = QIF_LIMITS,
	};

	return quotactl_at(fd, Q_SETQUOTA, id, &q);
}

int dir_project_get(int dir_fd, uint32_t *ret_id)
{
	struct fsxattr a = {};

	if (ioctl(dir_fd, FS_IOC_FSGETXATTR, &a) < 0)
		return negative_errno();
	*ret_id = a.fsx_projid;
	return 0;
}

int dir_project_set(int dir_fd, uint32_t id)
{
	struct fsxattr a = {};

	if (ioctl(dir_fd, FS_IOC_FSGETXATTR, &a) < 0)
		return negative_errno();
	a.fsx_projid = id;
	a.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	if (ioctl(dir_fd, FS_IOC_FSSETXATTR, &a) < 0)
		return negative_errno();
	return 0;
}
