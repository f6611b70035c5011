/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystems on block devices: probe (libblkid), mkfs, fsck, grow, stats. Tools run through
 * exec_run() from /usr/sbin or /sbin with a deadline. Supported types: ext2, ext3, ext4, xfs.
 *
 * Functions that run a tool take `char **ret_error`: on failure, if it is not NULL, it gets
 * a malloc'ed message for the user naming the tool, how it ended and the end of its stderr
 * ("mkfs.ext4: exit status 1: <stderr>"). Unlike other ret_* parameters it is written only on
 * failure. Tool failures return -EIO, deadlines -ETIMEDOUT, a missing tool -ENOENT. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "time-util.h"

#define BLOCKFS_MKFS_TIMEOUT (10 * 60 * USEC_PER_SEC)
#define BLOCKFS_FSCK_TIMEOUT (30 * 60 * USEC_PER_SEC)
#define BLOCKFS_RESIZE_TIMEOUT (10 * 60 * USEC_PER_SEC)
#define BLOCKFS_QUERY_TIMEOUT (60 * USEC_PER_SEC)

/* blockfs_probe() results that are not a filesystem type. */
#define BLOCKFS_PTTYPE_PREFIX "partition-table:" /* + "dos", "gpt"... */
#define BLOCKFS_AMBIVALENT "ambivalent"		 /* conflicting signatures */

/* What is on dev, by signature (libblkid, superblocks and partition tables):
 * "" when blank, a type ("ext4", "xfs", "swap", "LVM2_member", "crypto_LUKS"...),
 * "partition-table:<type>" for a partition table without a filesystem over it, or
 * "ambivalent" when signatures conflict. Anything but "" means: do not format. Signatures
 * with bad checksums count (a damaged filesystem is not blank). A superblock whose magic
 * itself is destroyed cannot be seen by anyone and reads as blank. Blocks (reads dev). */
int blockfs_probe(const char *dev, char **ret_fstype);

/* The smallest unit the filesystem on path (a device, or a regular file holding an image)
 * reads and writes, as its superblock says (libblkid's BLOCK_SIZE: ext's block size, xfs's
 * sector size): a device under it must not have larger logical blocks. 0 when path is blank
 * or holds nothing that names one. Blocks (reads path). */
int blockfs_probe_block_size(const char *path, uint32_t *ret);

/* The UUID of the filesystem on dev as its superblock says (libblkid's UUID): "" when dev is
 * blank or what is on it names none. Blocks (reads dev). */
int blockfs_probe_uuid(const char *dev, char **ret_uuid);

/* Erases every signature libblkid finds on dev (superblocks, partition tables: what
 * blockfs_probe() sees), as wipefs -a does, and flushes the device: afterwards it probes
 * blank. Destroys what dev holds: only for a filesystem known to hold nothing (one mkfs left
 * half made). Opens dev exclusively: -EBUSY while it is mounted. Blocks. */
int blockfs_wipe(const char *dev);

/* Whether s is a UUID as mkfs takes one: 8-4-4-4-12 hex digits. */
bool blockfs_uuid_valid(const char *s);

/* mkfs options; 0 / false means the tool's default. */
typedef struct BlockfsMkfsOptions {
	uint32_t block_size;	    /* ext -b, xfs -b size= */
	uint32_t inode_size;	    /* ext -I, xfs -i size= */
	uint64_t bytes_per_inode;   /* ext -i (not xfs) */
	uint64_t number_of_inodes;  /* ext -N (not xfs) */
	bool ext4_bigalloc;	    /* ext4 -O bigalloc */
	uint32_t ext4_cluster_size; /* ext4 -C, requires bigalloc */
	const char *uuid;	    /* ext -U, xfs -m uuid= (NULL: a random one) */
	bool ext4_encryption;	    /* ext4 -O encrypt (fscrypt) */
	bool ext4_fast_commit;	    /* ext4 -O fast_commit (Linux 5.10+ mounts it) */
} BlockfsMkfsOptions;

/* Makes a filesystem of fstype ("ext2", "ext3", "ext4", "xfs") on dev. Never forces: the
 * caller must have seen blockfs_probe() return "" (mkfs.xfs refuses a device with a
 * signature by itself; mkfs.ext4 run without a terminal does NOT, so the probe is the only
 * guard). o may be NULL. -EINVAL, with a message naming the option, for options the type
 * does not support, values that are not powers of two where they must be, or a uuid that is
 * not one. Blocks up to BLOCKFS_MKFS_TIMEOUT. */
int blockfs_mkfs(const char *dev, const char *fstype, const BlockfsMkfsOptions *o,
		 char **ret_error);

/* Checks an unmounted filesystem before mounting. ext*: e2fsck -p (preen); exit 0-3
 * (clean, or errors corrected) is success, 4 and above (errors left, or fsck failed) is
 * -EUCLEAN. xfs: nothing, returns 0 (xfs replays its log at mount; xfs_repair is not a
 * mount-time tool). Blocks up to BLOCKFS_FSCK_TIMEOUT. */
int blockfs_fsck(const char *dev, const char *fstype, char **ret_error);

/* Grows the filesystem to fill dev. ext*: resize2fs dev, online when mount_path is not NULL
 * (mounted); offline (mount_path NULL) it runs e2fsck -f -p first, which resize2fs demands.
 * xfs: xfs_growfs -d mount_path; xfs only grows mounted, so mount_path NULL is -EINVAL.
 * Succeeds when there is nothing to grow. Blocks up to BLOCKFS_RESIZE_TIMEOUT. */
int blockfs_resize(const char *dev, const char *mount_path, const char *fstype, char **ret_error);

/* The filesystem's size in bytes as its superblock records it (ext: dumpe2fs -h block
 * count x block size; xfs: data blocks x block size, live through the mount when
 * mount_path is not NULL). *ret_unit is its allocation unit (block, or cluster with
 * bigalloc). */
int blockfs_get_size(const char *dev, const char *mount_path, const char *fstype,
		     uint64_t *ret_size, uint32_t *ret_unit, char **ret_error);

/* 1 if dev is larger than the filesystem on it by at least one allocation unit, 0 if not.
 * This can stay 1 after a resize when the extra tail is too small for the filesystem to
 * use (a last block group or allocation group below the minimum); blockfs_resize() is then
 * a cheap no-op. */
int blockfs_needs_resize(const char *dev, const char *mount_path, const char *fstype,
			 char **ret_error);

/* The size in bytes of the block device at dev (BLKGETSIZE64): what the kernel sees now. */
int blockdev_get_size(const char *dev, uint64_t *ret);

typedef struct BlockfsStats {
	uint64_t bytes_total, bytes_used, bytes_available; /* available: for unprivileged users */
	uint64_t inodes_total, inodes_used, inodes_free;
	bool read_only; /* the mount or the filesystem is read-only */
} BlockfsStats;

/* statvfs() of a mounted filesystem. */
int blockfs_stats(const char *mount_path, BlockfsStats *ret);
/* The same through an fd of the mounted filesystem (O_PATH is fine). */
int blockfs_stats_fd(int fd, BlockfsStats *ret);

/* Tells the device under the mounted filesystem of fd (not O_PATH) which of its blocks are
 * free (FITRIM over the whole filesystem), so a thin device gives their space back: a loop
 * device punches holes in its backing file. *ret_trimmed (may be NULL): the bytes the
 * filesystem trimmed (ext4 skips groups it trimmed before and freed nothing in since).
 * -EOPNOTSUPP when the device cannot discard, -EROFS on a read-only mount. Blocks (for as
 * long as the filesystem takes). */
int blockfs_trim_fd(int fd, uint64_t *ret_trimmed);
