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

void pool_reserve_restore(Pool *p)
{
	struct stat st;

	_cleanup_close_ int fd =
		open_beneath(p->dir_fd, RESERVE_FILE, O_RDWR | O_CREAT, 0600, S_IFREG);
	if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_blocks * 512 >= RESERVE_BYTES ||
	    pool_fs_full(p))
		return;
	(void)fallocate(fd, 0, 0, (off_t)RESERVE_BYTES);
}

bool pool_reserve_release(Pool *p)
{
	struct stat st;

	_cleanup_close_ int fd = open_beneath(p->dir_fd, RESERVE_FILE, O_RDWR, 0, S_IFREG);
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_blocks > 0 && ftruncate(fd, 0) == 0;
}

int pool_write_atomic(Pool *p, int dir_fd, const char *name, const char *text, size_t len,
		      WriteFileFlags flags)
{
	int r = write_file_atomic_via(p->tmp_fd, dir_fd, name, text, len, 0600, flags);
	if (r == -ENOSPC && pool_reserve_release(p))
		r = write_file_atomic_via(p->tmp_fd, dir_fd, name, text, len, 0600, flags);
	return r;
}
