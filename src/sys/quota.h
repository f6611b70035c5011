/* SPDX-License-Identifier: Apache-2.0 */
/* Project quotas, through an fd on the filesystem (quotactl_fd(2): no device path to find):
 * what the pool's directory volumes are bounded with. xfs has them mounted with prjquota
 * (pquota), ext4 made with the project and quota features and mounted with prjquota. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct QuotaUsage {
	uint64_t bytes_used, inodes_used;
	uint64_t bytes_limit, inodes_limit; /* hard limits; 0: none */
} QuotaUsage;

/* Whether the filesystem fd is on enforces project quotas: 0; -EOPNOTSUPP when it has none, or
 * only accounts them (xfs pqnoenforce), or the kernel has none (no quotactl_fd(2), xfs without
 * CONFIG_XFS_QUOTA, ext4 without CONFIG_QFMT_V2); another negative errno when it cannot be
 * asked. Never blocks for long. */
int quota_project_probe(int fd);

/* Project id's usage and hard limits on fd's filesystem. */
int quota_project_get(int fd, uint32_t id, QuotaUsage *ret);

/* Sets project id's hard limit of bytes (rounded up to KiB; 0: none) and clears its inode
 * limit, on fd's filesystem. */
int quota_project_set(int fd, uint32_t id, uint64_t bytes);

/* A directory's project ID (FS_IOC_FSGETXATTR), and setting it with FS_XFLAG_PROJINHERIT, so
 * that everything made beneath it is counted against the project. dir_fd: opened O_RDONLY
 * (an ioctl needs more than O_PATH). */
int dir_project_get(int dir_fd, uint32_t *ret_id);
int dir_project_set(int dir_fd, uint32_t id);
