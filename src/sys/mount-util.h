/* SPDX-License-Identifier: Apache-2.0 */
/* Mounting and reading the mount table. Tables are read with libmount from
 * /proc/self/mountinfo (the kernel's truth, not a memory of what we did); mounts are made
 * with mount(2)/umount2(2) directly. Option strings are comma lists as in fstab
 * ("noatime,nodev,discard"): per-mount VFS flags become MS_* flags, the rest is passed to
 * the filesystem as data, userspace-only options (nofail, _netdev, x-*) are ignored.
 *
 * Paths are followed like mount(2) follows them: callers that must not follow symlinks
 * check the path first. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinned-path.h"

typedef struct MountInfo {
	char *target;	   /* canonical mount point */
	char *source;	   /* "/dev/loop3", or whatever the filesystem reports ("tmpfs") */
	char *fstype;	   /* "ext4" */
	char *root;	   /* path inside the filesystem mounted here: "/" or a bind's subdir */
	char *vfs_options; /* per-mount: "rw,nodev,relatime" */
	char *fs_options;  /* superblock: "rw,errors=remount-ro" */
	dev_t devno;	   /* st_dev of files below the mount */
	int id, parent_id;
	bool read_only;	   /* this mount is read-only (vfs "ro") */
	bool fs_read_only; /* the superblock is read-only (e.g. ext4 after errors=remount-ro) */
} MountInfo;

void mount_info_done(MountInfo *m);

/* Describes the mount whose mount point is target (the topmost one if several are stacked).
 * target is resolved canonically first. -ENOENT when target does not exist or nothing is
 * mounted exactly there (a path inside a mount is not a mount point). */
int mount_find(const char *target, MountInfo *ret);

/* The mount with this mount ID (statx STATX_MNT_ID), or -ENOENT. */
int mount_find_by_id(uint64_t mnt_id, MountInfo *ret);

/* The first mount (in table order) of the filesystem on device devno, or -ENOENT: tells
 * whether a block device is mounted anywhere. */
int mount_find_by_devno(dev_t devno, MountInfo *ret);

/* 1 if path is a mount point (a directory or a file with something mounted on it), 0 if
 * not, -errno (-ENOENT) if path cannot be looked up. */
int is_mount_point(const char *path);

/* Mounts the filesystem fstype on source_dev at target (which must exist), with options
 * (comma list, may be NULL) and read-only if read_only or options say "ro". Idempotent:
 * returns 0 without doing anything if the same device (same source for non-devices) is
 * already mounted at target with the same read-only state; -EEXIST if target holds any
 * other mount (another device, a subdirectory bind, the other read-only state). Other
 * options of an existing mount are not compared. -EINVAL for options that change the kind
 * of operation (bind, move, remount, propagation) or a NULL fstype. */
int mount_fs(const char *source_dev, const char *target, const char *fstype, const char *options,
	     bool read_only);

/* Bind-mounts source (a directory, or a file such as a device node) onto target (same
 * kind), non-recursively. When read_only or extra_options ask for per-mount flags (nosuid,
 * nodev, noexec, noatime, ro...), a second MS_REMOUNT|MS_BIND step applies them, keeping
 * the flags the bind inherited; if that step fails the bind is undone, so a read-only
 * request never leaves a writable mount behind. Filesystem-specific options in
 * extra_options are ignored (they belong to mount_fs()). Idempotent like mount_fs(): 0 if
 * target already shows the same source inode with the same read-only state, -EEXIST if it
 * holds something else. */
int mount_bind(const char *source, const char *target, bool read_only, const char *extra_options);

/* The mount points of every mount of the block device devno (a loop device's st_rdev), in
 * the table's order, as a strv (NULL when there is none). */
int mount_list_by_devno(dev_t devno, char ***ret_targets);

/* Unmounts the topmost mount at target (never lazily). Returns 1 if it unmounted
 * something, 0 if nothing was mounted there or target does not exist, -EBUSY if in use. */
int umount_path(const char *target);

/* Unmounts all mounts stacked at target, topmost first. Returns how many. */
int umount_all_at(const char *target);

/* Splits an option string into MS_* flags and the filesystem data string (*ret_data is
 * NULL when there is none). Returns -EINVAL for options that are not plain mount flags
 * (bind, move, remount, propagation). Exposed for callers that validate options early. */
int mount_options_split(const char *options, unsigned long *ret_flags, char **ret_data);

/* ---- Acting through fds, for paths that came in a request (see pinned-path.h) ----
 * These never look a target up by name again: the caller has opened and checked it. Mounts are
 * made with the new mount API (fsopen/fsmount, open_tree/mount_setattr, move_mount), so flags
 * are in place before the mount becomes visible; kernels without it (before 5.2, 5.12 for
 * mount_setattr) get mount(2) through /proc/self/fd. */

/* Checks an options string for fstype as the kernel parses it, without mounting anything: per-
 * mount flags are known to libmount, filesystem options are given to a throwaway context of
 * fstype. 0, or -EINVAL with *ret_error (the kernel's words when it gave some). */
int mount_options_check(const char *fstype, const char *options, char **ret_error);

/* Mounts fstype on source_dev onto the directory target_fd (O_PATH is fine) with options (as
 * in mount_fs()) and read-only if asked. No idempotency check: the caller has looked. On
 * failure *ret_error may hold the kernel's explanation (NULL otherwise). Blocks. */
int mount_fs_at(const char *source_dev, int target_fd, const char *fstype, const char *options,
		bool read_only, char **ret_error);

/* Bind-mounts the object open as source_fd (a mount's root directory, or a device node) onto
 * target_fd (same kind), found at the pinned path target, non-recursively, with read_only and
 * the per-mount flags of options (others are ignored: they belong to the filesystem). */
int mount_bind_at(int source_fd, const PinnedPath *target, int target_fd, bool read_only,
		  const char *options);

/* Unmounts the topmost mount at a pinned path, never following a symlink there and never
 * lazily: 1 when it unmounted, 0 when nothing is mounted there, -EBUSY when in use. */
int umount_at(const PinnedPath *p);

/* Uses mount(2) through /proc/self/fd instead of the new mount API (for tests of that path). */
void mount_force_legacy_api(bool on);
