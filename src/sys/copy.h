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
