/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum WriteFileFlags {
	/* The new content survives a crash of the machine: the temporary is fsync'ed before the
	 * rename and the directory after it. Without it, only a crash of the process is covered
	 * (for files that describe the running machine and are void after a reboot). */
	WRITE_FILE_DURABLE = 1 << 0,
} WriteFileFlags;

/* Replaces dir_fd/name with data, atomically: a temporary file ('.NAME.tmp-' + 16 hex) is
 * written in tmp_dir_fd, which must be on the same filesystem, and renamed over name. A crash
 * leaves either the old or the new content, never a mix, and whatever temporary it leaves lies
 * in tmp_dir_fd, where its owner's clean-up finds it. The temporary holds an exclusive flock for
 * as long as it exists, so a cleaner that takes the flock (LOCK_NB) before removing a file never
 * removes one being written. The failpoint "atomic-rename:NAME" runs just before the rename.
 * Blocks. */
int write_file_atomic_via(int tmp_dir_fd, int dir_fd, const char *name, const void *data,
			  size_t len, mode_t mode, WriteFileFlags flags);

/* write_file_atomic_via() with the temporary beside name, in dir_fd, durably. */
int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode);

/* Whether name is a temporary of write_file_atomic_via(): '.' + NAME + ".tmp-" + 16 hex. */
bool write_file_is_temporary(const char *name);

/* Reads a whole regular file below dir_fd without following a symlink at name. Fails with
 * -EFBIG past max bytes. *ret is NUL-terminated. */
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len);

/* read_file_at() of a trusted path (configuration, credentials), following symlinks: files
 * Kubernetes mounts from secrets and projected volumes are symlinks. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* fsync()s a directory by fd. */
int fsync_dir(int dir_fd);

/* Reads len bytes at off of fd, through short reads and EINTR; what lies beyond the file's end
 * reads as zeros. Returns 0 or -errno. */
int pread_zero_filled(int fd, void *buf, size_t len, uint64_t off);
