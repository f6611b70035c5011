/* SPDX-License-Identifier: Apache-2.0 */
/* Volume ownership (Kubernetes fsGroup): give a volume's tree to a group so that a pod running
 * as a non-root user in that group can use it. Called by NodePublishVolume (CSI
 * volume_mount_group) and by the Flexvolume host (drivers with the fsGroup capability) right
 * after the mount, before the volume is handed to the pod.
 *
 * What changes, exactly as Kubernetes applies fsGroup (pkg/volume/volume_linux.go):
 *   - every entry's group becomes gid; the owner (uid) is never touched;
 *   - mode bits are only added, never removed: 0660 (0440 when read_only) on every entry
 *     but symlinks; directories also get 0110 and the setgid bit, so that new files inherit
 *     the group. (Like Kubernetes, this adds the owner's r/w/x next to the group's.)
 *   - symlinks are never followed: a link's own group is changed, never its target's, and a
 *     link is never chmod'ed;
 *   - setuid/setgid bits that the kernel drops on chown are put back;
 *   - the root is fixed last, so an interrupted walk is done again by OnRootMismatch.
 * Kubernetes does not apply fsGroup to read-only Flexvolume mounts: that is the caller's call.
 *
 * Safety on a hostile tree: the walk uses only fds (openat O_NOFOLLOW one component at a time,
 * statx AT_SYMLINK_NOFOLLOW, fchownat AT_SYMLINK_NOFOLLOW, fchmodat2
 * AT_SYMLINK_NOFOLLOW), so swapping a directory for a symlink mid-walk never leads out of the
 * tree. No recursion and no path buffer: any depth and any path length work, with at most
 * OWNERSHIP_MAX_OPEN_DIRS + 36 fds open (the io_uring is one, 32 are directories waiting for
 * their entries' batch). Other mounts below the root (a
 * different device or mount id) are not entered and not changed. Sockets, fifos and device
 * nodes are never opened. Hard links are visited once per name (harmless: the second visit
 * finds them right).
 *
 * Cost: one statx per entry plus, per directory, open/getdents/close; an entry that is already
 * right costs no chown or chmod. Built with liburing, entries are examined 256 at a time
 * (across directories) through an io_uring, one syscall for all, while the walk reads the
 * next directories (the same statx, relative to the directory's fd; its results only decide
 * what to change, directories are still opened O_NOFOLLOW and checked); the ring and its
 * kernel worker thread exist only while a walk needs them. Small trees, and walks whose ring
 * the kernel refuses (too old, seccomp, kernel.io_uring_disabled), get one statx syscall per
 * entry; so does every walk while the environment has VOLPLUG_OWNERSHIP_NO_URING=1 (a knob
 * for tests and operators, read at the start of each walk). Calls on different trees may run
 * in parallel threads.
 * Design and numbers: docs/ownership.md.
 *
 * Typical caller (NodePublishVolume, after the target is mounted):
 *	OwnershipReport rep;
 *	r = ownership_apply(target, gid, readonly, policy, &progress, &rep);
 *	r < 0: the target itself is unusable, fail the call;
 *	rep.errors > 0: log rep.first_errors with the volume ID and go on (Kubernetes logs
 *	failed chown/chmod of single files and mounts anyway);
 *	ownership_report_done(&rep); */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "time-util.h"

/* "No group": change nothing (Kubernetes' nil fsGroup). */
#define OWNERSHIP_GID_NONE ((gid_t)-1)
/* Lines kept in OwnershipReport.first_errors. */
#define OWNERSHIP_MAX_REPORTED_ERRORS 5
/* Directory fds held at once; deeper trees re-open parents through "..", checked by dev/ino. */
#define OWNERSHIP_MAX_OPEN_DIRS 64
/* Default interval between progress callbacks. */
#define OWNERSHIP_PROGRESS_INTERVAL_DEFAULT (5 * USEC_PER_SEC)

typedef enum OwnershipPolicy {
	OWNERSHIP_ALWAYS,	    /* walk the whole tree every time */
	OWNERSHIP_ON_ROOT_MISMATCH, /* skip the walk when the root already looks done */
	_OWNERSHIP_POLICY_MAX,
} OwnershipPolicy;

/* "Always" or "OnRootMismatch" (any case) to an OwnershipPolicy; -EINVAL otherwise. */
int ownership_policy_from_string(const char *s);
/* The Kubernetes spelling of a policy, or NULL when out of range. */
const char *ownership_policy_to_string(OwnershipPolicy policy);

typedef struct OwnershipReport {
	uint64_t entries;   /* inodes examined, the root included */
	uint64_t changed;   /* entries on which a chown or a chmod was done */
	uint64_t errors;    /* entries that could not be examined or changed */
	uint64_t mounts;    /* other mounts found below the root and left alone */
	char *first_errors; /* "PATH: OP: reason\n" for the first OWNERSHIP_MAX_REPORTED_ERRORS
			     * errors, paths relative to the root; NULL when none. Owned. */
	bool skipped;	/* nothing was walked: no group, or OnRootMismatch found the root done */
	bool batched;	/* entries were examined through io_uring (else one statx each) */
	usec_t elapsed; /* wall time of the call */
} OwnershipReport;

/* Frees what a report owns; the report may be used again. */
void ownership_report_done(OwnershipReport *report);

/* Called from the walking thread every `interval` (0: OWNERSHIP_PROGRESS_INTERVAL_DEFAULT)
 * with the counts so far, so the caller can log a long walk; so_far is valid only during the
 * call. The first call comes after one interval, so short walks make none. */
typedef struct OwnershipProgress {
	void (*func)(const OwnershipReport *so_far, void *userdata);
	void *userdata;
	usec_t interval;
} OwnershipProgress;

/* Applies group gid to the directory tree at path (symlinks in path itself are followed; none
 * below it). gid OWNERSHIP_GID_NONE changes nothing and returns 0 at once. Blocks for the whole
 * walk (minutes on millions of files); progress may be NULL. Returns 0 and fills *ret_report
 * (errors on single entries are counted there, not fatal), or a negative errno when the root
 * cannot be opened or examined (-ENOENT, -ENOTDIR, ...) or an argument is invalid (-EINVAL). */
int ownership_apply(const char *path, gid_t gid, bool read_only, OwnershipPolicy policy,
		    const OwnershipProgress *progress, OwnershipReport *ret_report);

/* Same on an already-open directory fd (O_PATH is fine); dir_fd is neither closed nor moved. */
int ownership_apply_fd(int dir_fd, gid_t gid, bool read_only, OwnershipPolicy policy,
		       const OwnershipProgress *progress, OwnershipReport *ret_report);
