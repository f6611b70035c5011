/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Replaces dir_fd/name with data, atomically and durably: a hidden temporary file is written
 * and fsync'ed, renamed over name, and the directory fsync'ed. A crash leaves either the old
 * or the new content, never a mix; the temporary ('.name.tmp-*') may be left behind. */
int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode);

/* Reads a whole regular file below dir_fd without following a symlink at name. Fails with
 * -EFBIG past max bytes. *ret is NUL-terminated. */
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len);

/* read_file_at() of a trusted path (configuration, credentials), following symlinks: files
 * Kubernetes mounts from secrets and projected volumes are symlinks. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* fsync()s a directory by fd. */
int fsync_dir(int dir_fd);
