/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

typedef enum {
	COPY_REFLINK, /* shared extents (FICLONE): instant, no space used until written */
	COPY_SPARSE,  /* data ranges only (SEEK_DATA/SEEK_HOLE + copy_file_range) */
} CopyMethod;

const char *copy_method_to_string(CopyMethod m);

/* Makes dst_fd's content equal to src_fd's: a reflink when the filesystem can, else a copy
 * of the data ranges that never reads holes. dst must be empty. Blocks; returns how. */
int copy_file_contents(int src_fd, int dst_fd, CopyMethod *ret_method);

/* Copies what is in the directory src_dir_fd into the empty directory dst_dir_fd, and src's
 * owner, mode and times onto dst (where: src's name in messages). Nothing is followed: files
 * are opened O_NOFOLLOW and copied with copy_file_contents() (a reflink where the filesystem
 * has them), symlinks copied as symlinks, directories walked with openat() one component at a
 * time, never into another mount (-EBUSY), at most COPY_TREE_DEPTH_MAX deep (-ELOOP). Owners,
 * modes and times are kept; hard links become separate files, extended attributes are not
 * copied; FIFOs are made anew, sockets left out, device files refused (-EPERM). *ret_method:
 * COPY_REFLINK when every file was reflinked. A negative errno and *ret_why (naming the entry)
 * on failure, what was copied left in dst for the caller to remove. Blocks. */
#define COPY_TREE_DEPTH_MAX 256
int copy_tree_at(int src_dir_fd, int dst_dir_fd, const char *where, CopyMethod *ret_method,
		 char **ret_why);
