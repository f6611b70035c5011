/* SPDX-License-Identifier: Apache-2.0 */
/* Loop devices on regular files, through the loop ioctls (no losetup). The kernel's state is
 * the only truth: sysfs (/sys/block/loopN/loop/) says which devices are bound to what, so
 * callers can find their devices again after a restart instead of remembering them.
 *
 * Devices are attached WITHOUT autoclear (they survive volplugd restarts, detach is always
 * explicit) and without partition scanning; with direct I/O and a logical block size when the
 * caller asks (LoopAttach), which the kernel may refuse: what a device got is read back from
 * sysfs (LoopInfo), never assumed. Device paths are "/dev/loopN"; a missing node (containers)
 * is created with mknod. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct LoopInfo {
	char *devpath;	    /* "/dev/loopN" */
	char *backing_file; /* as the kernel prints it; ends in " (deleted)" when unlinked */
	unsigned number;    /* N */
	dev_t devno;	    /* major:minor of the loop device */
	bool read_only;
	bool autoclear;
	bool deleted;	     /* the backing file was unlinked while attached */
	bool direct_io;	     /* I/O goes to the backing file with O_DIRECT (loop/dio) */
	uint32_t block_size; /* logical block size (queue/logical_block_size) */
	uint64_t offset, size_limit;
} LoopInfo;

/* How loop_attach() binds a file; NULL or all zero: read-write, buffered, 512-byte blocks. */
typedef struct LoopAttach {
	bool read_only;
	/* Asks for direct I/O: no second copy of the data in the backing file's page cache. The
	 * kernel leaves it off where the backing file cannot take it (ramfs, an alignment the
	 * block size does not meet): LoopInfo.direct_io says what the device got. */
	bool direct_io;
	/* The device's logical block size (512..4096, a power of two); 0: 512. Refused sizes
	 * fall back to 512. */
	uint32_t block_size;
} LoopAttach;

void loop_info_done(LoopInfo *info);
/* Frees an array from loop_list_for_dir() and its contents. */
void loop_info_array_free(LoopInfo *infos, size_t n);

/* Attaches the regular file backing_file to a free loop device as *how says (NULL: the
 * defaults) and returns its path in *ret_devpath (malloc'ed). Always makes a new device: call
 * loop_find() first for idempotency. Retries a bounded number of times when another process
 * takes the free device first. Direct I/O and the block size are asked for, not promised:
 * loop_get_info() tells what the device got. -EINVAL if backing_file is not a regular file,
 * -EROFS/-EACCES if it cannot be opened for writing when read_only is false (no silent
 * read-only fallback), -ELOOP if backing_file is a symlink (never followed). Blocks briefly. */
int loop_attach(const char *backing_file, const LoopAttach *how, char **ret_devpath);

/* loop_attach() of the regular file open as file_fd (O_RDWR, or O_RDONLY for read_only), named
 * name in the debug log and the device's informational name: the caller opened it as it must
 * (the pool: beneath its directory, never through a symlink). Does not take file_fd. */
int loop_attach_fd(int file_fd, const char *name, const LoopAttach *how, char **ret_devpath);

/* The logical block size under which a loop device over backing_file passes direct I/O
 * straight to the file: the block size of the file's filesystem, at most 4096 (what the
 * filesystems made on it use) and at least the file's direct I/O alignment (statx
 * STATX_DIOALIGN, where the kernel tells it). */
int loop_block_size_for(const char *backing_file, uint32_t *ret);
/* loop_block_size_for() of the file open as file_fd (O_PATH will do). */
int loop_block_size_for_fd(int file_fd, uint32_t *ret);

/* Finds a loop device bound to backing_file, compared by st_dev/st_ino, so any path to the
 * same file matches. When several are bound, the lowest-numbered one. -ENOENT if none, or
 * -errno if backing_file cannot be stat'ed. */
int loop_find(const char *backing_file, char **ret_devpath);
/* loop_find() of the file open as file_fd (O_PATH will do). */
int loop_find_fd(int file_fd, char **ret_devpath);
/* loop_find_fd() among the loop devices with a capacity (/proc/partitions): one read, however
 * many loop devices are unbound. A device bound with capacity 0 (a file under 512 bytes, an
 * offset at its end) exposes no byte of the file and is not found; where it must be, use
 * loop_find_fd(). Falls back to loop_find_fd()'s scan when /proc/partitions is not procfs's. */
int loop_find_fd_sized(int file_fd, char **ret_devpath);

/* Finds a loop device bound to a file that was unlinked while it was attached: the kernel
 * prints its backing file as path (absolute, as it was when attached) and " (deleted)", and its
 * backing inode is on the filesystem fs_dev. When several are, the lowest-numbered one. -ENOENT
 * if none. */
int loop_find_deleted(const char *path, dev_t fs_dev, char **ret_devpath);

/* Detaches devpath with LOOP_CLR_FD. Returns 0 when it is detached, also when it already was
 * (or does not exist). -EBUSY when the device is in use, leaving it attached and unchanged:
 * either something holds it exclusively (a mount, a device-mapper holder), or other
 * processes have it open. In the latter case the kernel does not fail LOOP_CLR_FD but sets
 * autoclear ("detach on last close"); we undo that, after retrying for up to ~1 s to let
 * transient openers (udev's probe) go, so a busy device is never left with a deferred
 * detach. Waits until sysfs shows the device unbound. */
int loop_detach(const char *devpath);

/* Detaches every loop device bound to backing_file (see loop_detach()). Returns how many
 * were detached; stops at the first error. */
int loop_detach_file(const char *backing_file);

/* Makes the device see the backing file's current size (LOOP_SET_CAPACITY), after the file
 * grew. -ENXIO if the device is not bound. */
int loop_refresh_size(const char *devpath);

/* The device's size in bytes (BLKGETSIZE64). */
int loop_get_size(const char *devpath, uint64_t *ret);

/* Reads sysfs for devpath ("/dev/loopN"). -ENXIO if it is not bound, -EINVAL if devpath is
 * not a loop device path. */
int loop_get_info(const char *devpath, LoopInfo *ret);

/* The kernel's I/O counters of a block device (/sys/block/<dev>/stat, in
 * Documentation/block/stat.rst), since it was attached: they go on across volplugd restarts. */
typedef struct LoopStat {
	uint64_t reads, read_sectors, read_ms;	  /* completed; 512-byte sectors; ms spent */
	uint64_t writes, write_sectors, write_ms; /* likewise */
	uint64_t in_flight;			  /* requests issued, not yet completed */
	uint64_t io_ms;				  /* ms the device had I/O in flight (busy) */
} LoopStat;

/* Reads loopN's stat file. -ENOENT when there is no such device, -EBADMSG when the file has
 * fewer than the 11 fields every kernel since 2.6 writes. */
int loop_get_stat(unsigned number, LoopStat *ret);
/* Parses the text of such a file: whitespace-separated decimal numbers. */
int loop_stat_parse(const char *text, LoopStat *ret);

/* Every bound loop device whose backing file lies below dir (canonicalised; deleted backing
 * files are included, they are leaks), ordered by device number. *ret is NULL when none.
 * Free with loop_info_array_free(). */
int loop_list_for_dir(const char *dir, LoopInfo **ret, size_t *ret_n);
