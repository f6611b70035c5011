/* SPDX-License-Identifier: Apache-2.0 */
/* Paths that come in a request, made safe to act on. A path is first checked as a string
 * (absolute, clean, not "/"), then its parent directory is opened once without following any
 * symlink on the way (openat2 with RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW component at a time
 * where openat2 is missing), and from then on the last component is only ever used relative to
 * that pinned parent: a symlink or rename swapped in during the call cannot redirect it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "macro.h"

typedef struct PinnedPath {
	int parent_fd; /* O_PATH|O_DIRECTORY, -EBADF when not open */
	char *base;    /* the last component */
} PinnedPath;

#define PINNED_PATH_NULL ((PinnedPath){.parent_fd = -EBADF})

/* Checks path as a string: absolute, shorter than PATH_MAX, no empty, "." or ".." component,
 * no trailing slash, and not "/" itself. 0, or -EINVAL with *ret_why (static text). */
int request_path_check(const char *path, const char **ret_why);

/* Opens the parent of a checked path without following symlinks anywhere (magic links of
 * /proc included). -ELOOP when a component is a symlink, -ENOENT or -ENOTDIR when the parent
 * is missing or not a directory. Blocks on the filesystem only. */
int pinned_path_open(const char *path, PinnedPath *ret);
void pinned_path_done(PinnedPath *p);

/* What is at the pinned path now. Never follows a symlink in the last component; a mount point
 * shows the root of what is mounted on it (the topmost mount). */
typedef struct PathObject {
	mode_t mode; /* file type and permissions */
	dev_t dev;   /* the filesystem the object is on */
	dev_t rdev;  /* for device nodes */
	ino_t ino;
	uint64_t mnt_id; /* the mount it was seen through */
	bool mount_root; /* the root of a mount: something is mounted at this path */
} PathObject;

/* Fills *ret; -ENOENT when nothing is there. */
int pinned_path_stat(const PinnedPath *p, PathObject *ret);

/* Opens the object at the pinned path with flags (O_NOFOLLOW and O_CLOEXEC are added). Returns
 * the fd or -errno (-ELOOP for a symlink). */
int pinned_path_open_object(const PinnedPath *p, int flags);

/* 1 when the directory open as dir_fd holds nothing but "." and "..", 0 when it holds
 * something, -errno. */
int dir_is_empty(int dir_fd);

/* Forces the component-by-component walk instead of openat2 (for tests of that path). */
void pinned_path_force_fallback(bool on);

/* The pool's own files are data on a disk that others can write: they are opened like request
 * paths, never through a symlink. */

/* Opens path, relative and of one or more components, beneath dir_fd without following any
 * symlink on the way, the last component included (openat2 with RESOLVE_BENEATH and
 * RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW component at a time where openat2 is missing), and
 * checks that it is of type (S_IFREG or S_IFDIR; 0: any). flags as for openat() (O_CLOEXEC is
 * added; O_CREAT takes mode); the open does not block on a FIFO or a device. Returns the fd, or
 * -ELOOP when a component is a symlink, -EXDEV for "..", -ENOTDIR when a directory was asked
 * for and something else is there, -EISDIR (a directory) or -EBADFD (anything else) when a
 * regular file was asked for, -ENOENT when nothing is there. */
int open_beneath(int dir_fd, const char *path, int flags, mode_t mode, mode_t type);

/* fstat() of what open_beneath(dir_fd, path, O_PATH, 0, type) finds, with its errors. */
int stat_beneath(int dir_fd, const char *path, mode_t type, struct stat *ret);
