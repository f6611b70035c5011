/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's space: what it may provision (its capacity times the overprovision ratio), what
 * its data files really hold, and whether its filesystem is full for real. Volumes are sparse
 * files: provisioning beyond what the filesystem has is thin provisioning, which an operator
 * asks for with a ratio above 1; a filesystem that fills up under thin volumes makes their
 * writes fail, and the pool then refuses to provision more and says why in the volumes'
 * conditions. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "fileio.h"
#include "pinned-path.h"
#include "pool-internal.h"

#define MIB (1024ULL * 1024ULL)
#define FULL_RESERVE_MAX (1024 * MIB)
/* The pool's own records need a few blocks to be replaced (a temporary, renamed over the
 * record): POOL/reserve holds them while the filesystem has room and gives them up when it is
 * full, so a volume can still be unpublished, unstaged and deleted. */
#define RESERVE_FILE "reserve"
#define RESERVE_BYTES (4 * MIB)

static uint64_t provision_limit(uint64_t capacity, double overprovision)
{
	long double limit = (long double)capacity * overprovision;
	return limit >= (long double)UINT64_MAX ? UINT64_MAX : (uint64_t)limit;
}

static int fs_space(const Pool *p, uint64_t *ret_size, uint64_t *ret_free)
{
	struct statvfs sv;

	if (fstatvfs(p->dir_fd, &sv) < 0)
		return negative_errno();
	*ret_size = (uint64_t)sv.f_blocks * sv.f_frsize;
	*ret_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

/* What the filesystem has for the pool now: what is free plus what the pool's files hold
 * (their allocation, not their sizes: a sparse file's unwritten bytes are still free, and
 * counted once), --pool-capacity when that is less. Read now, not at open: every process on
 * the pool, and the scheduler reading GetCapacity, sees what the disk has left. A filesystem
 * that reports no size (ramfs, or statvfs failed) has no free bytes to go by: --pool-capacity
 * alone then. */
static uint64_t capacity_now(const Pool *p, uint64_t fs_size, uint64_t fs_free, uint64_t allocated)
{
	uint64_t real = fs_free + allocated < fs_free ? UINT64_MAX : fs_free + allocated;

	if (fs_size == 0 && p->capacity)
		return p->capacity;
	return p->capacity ? MIN(p->capacity, real) : real;
}

/* Below this much free, writes that need new blocks fail now or soon; the 1% margin lets the
 * pool say so before the last byte goes. A filesystem that reports no size (ramfs) cannot be
 * judged. */
static bool full(uint64_t size, uint64_t free)
{
	return size > 0 && free < MIN(size / 100, FULL_RESERVE_MAX);
}

bool pool_fs_full(const Pool *p)
{
	uint64_t size, free;

	return fs_space(p, &size, &free) == 0 && full(size, free);
}

bool pool_space_fits(Pool *p, uint64_t provisioned)
{
	uint64_t size = 0, free = 0;

	(void)fs_space(p, &size, &free);
	if (full(size, free))
		return false;
	/* The free bytes alone have room: no need to stat every data file. */
	if (provisioned <= provision_limit(capacity_now(p, size, free, 0), p->overprovision))
		return true;
	return provisioned <=
	       provision_limit(capacity_now(p, size, free, pool_allocated(p)), p->overprovision);
}

int pool_space(Pool *p, PoolSpace *ret)
{
	PoolSpace s = {.overprovision = p->overprovision};

	int r = pool_provisioned(p, &s.provisioned);
	if (r < 0)
		return r;
	if (fs_space(p, &s.fs_size, &s.fs_free) == 0)
		s.full = full(s.fs_size, s.fs_free);
	s.allocated = pool_allocated(p);
	s.capacity = capacity_now(p, s.fs_size, s.fs_free, s.allocated);
	*ret = s;
	return 0;
}

uint64_t pool_space_available(const PoolSpace *s)
{
	uint64_t max = provision_limit(s->capacity, s->overprovision);

	if (s->full)
		return 0;
	return max > s->provisioned ? max - s->provisioned : 0;
}

char *pool_space_full_message(const PoolSpace *s)
{
	return xasprintf("the pool's filesystem is full: %llu MiB free of %llu MiB, %llu MiB "
			 "provisioned, %llu MiB allocated; writes to its volumes that need new "
			 "space fail: free space there or delete volumes",
			 (unsigned long long)(s->fs_free / MIB),
			 (unsigned long long)(s->fs_size / MIB),
			 (unsigned long long)(s->provisioned / MIB),
			 (unsigned long long)(s->allocated / MIB));
}

char *pool_space_refusal(Pool *p, uint64_t bytes, const char *node)
{
	_cleanup_free_ char *where = node && *node ? xasprintf(" of node %s", node) : xstrdup("");
	PoolSpace s;

	int r = pool_space(p, &s);
	if (r < 0)
		return xasprintf(
			"%llu bytes do not fit in the pool%s: its ledger cannot be read: %s",
			(unsigned long long)bytes, where, strerror(-r));
	if (s.full)
		return pool_space_full_message(&s);
	return xasprintf(
		"%llu bytes do not fit in the pool%s (%llu bytes left): %llu of %llu bytes "
		"are provisioned (capacity %llu x overprovision ratio %g)",
		(unsigned long long)bytes, where, (unsigned long long)pool_space_available(&s),
		(unsigned long long)s.provisioned,
		(unsigned long long)provision_limit(s.capacity, s.overprovision),
		(unsigned long long)s.capacity, s.overprovision);
}

char *pool_space_full_condition(Pool *p)
{
	PoolSpace s;

	if (!pool_fs_full(p) || pool_space(p, &s) < 0)
		return NULL;
	return pool_space_full_message(&s);
}

static bool reserve_whole(const struct stat *st)
{
	return S_ISREG(st->st_mode) && (uint64_t)st->st_blocks * 512 >= RESERVE_BYTES;
}

void pool_reserve_restore(Pool *p)
{
	struct stat st;

	/* Whole (after nearly every delete): one stat, nothing opened. */
	if (fstatat(p->dir_fd, RESERVE_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 && reserve_whole(&st))
		return;
	_cleanup_close_ int fd =
		open_beneath(p->dir_fd, RESERVE_FILE, O_RDWR | O_CREAT, 0600, S_IFREG);
	if (fd < 0 || fstat(fd, &st) < 0 || reserve_whole(&st) || pool_fs_full(p))
		return;
	(void)fallocate(fd, 0, 0, (off_t)RESERVE_BYTES);
}

bool pool_reserve_release(Pool *p)
{
	struct stat st;

	_cleanup_close_ int fd = open_beneath(p->dir_fd, RESERVE_FILE, O_RDWR, 0, S_IFREG);
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_blocks > 0 && ftruncate(fd, 0) == 0;
}

/* Capacity: the ledger.
 *
 * POOL/ledger holds the bytes provisioned by every process on the pool: the data files of the
 * volumes and snapshots, plus the size a staging directory in tmp/ reserves for the object it
 * makes (written in its name, "new-<id>.<random>.<bytes>"). Each change of one of those
 * happens under the pool lock together with the ledger's update (making a staging directory,
 * renaming it away, renaming an object out of its place, growing a data file), so the ledger
 * always matches the pool; every open recounts it from the pool, so a process killed in
 * between costs nothing after the next start. The slow part of a create (the copy, the
 * fsyncs) runs outside the lock. */

#define LEDGER_LEN 21 /* 20 digits and a newline: rewritten in place, never shorter */

int pool_lock_take(Pool *p)
{
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (flock(p->ledger_fd, LOCK_EX) == 0)
			return 0;
		if (errno != EINTR) {
			int r = negative_errno();
			pthread_mutex_unlock(&p->lock);
			return r;
		}
	}
}

void pool_lock_release(Pool *p)
{
	(void)flock(p->ledger_fd, LOCK_UN);
	pthread_mutex_unlock(&p->lock);
}

/* The data files' sizes of one kind of object, or what they really hold on disk (allocated). */
static uint64_t data_sum(int dir_fd, const char *prefix, bool allocated)
{
	char **ids;
	size_t n;
	uint64_t sum = 0;

	if (pool_list_ids(dir_fd, prefix, &ids, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char path[POOL_ID_MAX + 8];
		struct stat st;
		snprintf(path, sizeof(path), "%s/" DATA_FILE, ids[i]);
		/* What a symlink points to is no file of the pool. */
		if (stat_beneath(dir_fd, path, S_IFREG, &st) == 0)
			sum += allocated ? (uint64_t)st.st_blocks * 512 : (uint64_t)st.st_size;
	}
	strv_free(ids);
	return sum;
}

uint64_t pool_allocated(Pool *p)
{
	return data_sum(p->volumes_fd, POOL_VOLUME_PREFIX, true) +
	       data_sum(p->snapshots_fd, POOL_SNAPSHOT_PREFIX, true);
}

/* The bytes a staging directory reserves, from its name; 0 for anything else in tmp/. */
uint64_t pool_staging_reserved(const char *name)
{
	const char *dot = strrchr(name, '.');
	char *end;

	if (strncmp(name, POOL_STAGING_PREFIX, strlen(POOL_STAGING_PREFIX)) != 0 || !dot)
		return 0;
	errno = 0;
	unsigned long long v = strtoull(dot + 1, &end, 10);
	return errno || end == dot + 1 || *end ? 0 : (uint64_t)v;
}

/* What the ledger should say, counted from the pool. Hold the pool lock. */
uint64_t pool_ledger_recount(Pool *p)
{
	uint64_t sum = data_sum(p->volumes_fd, POOL_VOLUME_PREFIX, false) +
		       data_sum(p->snapshots_fd, POOL_SNAPSHOT_PREFIX, false);
	_cleanup_closedir_ DIR *d = pool_opendir(p->tmp_fd);
	struct dirent *de;

	while (d && (de = readdir(d)))
		sum += pool_staging_reserved(de->d_name);
	return sum;
}

int pool_ledger_write(Pool *p, uint64_t bytes)
{
	char buf[LEDGER_LEN + 1];

	snprintf(buf, sizeof(buf), "%020llu\n", (unsigned long long)bytes);
	ssize_t n = pwrite(p->ledger_fd, buf, LEDGER_LEN, 0);
	return n == LEDGER_LEN ? 0 : n < 0 ? negative_errno() : -EIO;
}

/* The ledger's bytes; recounted when it does not read back (changed by hand). Hold the pool
 * lock. */
static uint64_t ledger_read(Pool *p)
{
	char buf[LEDGER_LEN + 1], *end;

	ssize_t n = pread(p->ledger_fd, buf, LEDGER_LEN, 0);
	if (n == LEDGER_LEN) {
		buf[n] = 0;
		errno = 0;
		unsigned long long v = strtoull(buf, &end, 10);
		if (errno == 0 && end != buf && *end == '\n')
			return (uint64_t)v;
	}
	uint64_t sum = pool_ledger_recount(p);
	(void)pool_ledger_write(p, sum);
	return sum;
}

/* Adds bytes to the ledger: -ENOSPC beyond what the pool may provision, or when its
 * filesystem is full for real. Hold the pool lock. */
int pool_ledger_reserve(Pool *p, uint64_t bytes)
{
	uint64_t cur = ledger_read(p);

	if (bytes == 0)
		return 0;
	if (cur + bytes < cur || !pool_space_fits(p, cur + bytes))
		return -ENOSPC;
	return pool_ledger_write(p, cur + bytes);
}

/* Gives bytes back. Hold the pool lock. */
void pool_ledger_release(Pool *p, uint64_t bytes)
{
	uint64_t cur = ledger_read(p);

	if (bytes > 0)
		(void)pool_ledger_write(p, bytes > cur ? 0 : cur - bytes);
}

int pool_provisioned(Pool *p, uint64_t *ret_bytes)
{
	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	*ret_bytes = ledger_read(p);
	pool_lock_release(p);
	return 0;
}

void pool_capacity(Pool *p, uint64_t *ret_total, uint64_t *ret_available)
{
	PoolSpace s;

	if (pool_space(p, &s) < 0) {
		*ret_total = *ret_available = 0; /* nothing can be promised */
		return;
	}
	*ret_total = s.capacity;
	*ret_available = pool_space_available(&s);
}
