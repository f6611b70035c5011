/* SPDX-License-Identifier: Apache-2.0 */
/* The pool as several processes share it: two Pool objects opened on one directory stand for
 * two processes (their locks are flocks on their own open files, as between processes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "alloc.h"
#include "failpoint.h"
#include "fileio.h"
#include "loopdev.h"
#include "pool.h"
#include "pool-internal.h"
#include "scratch.h"
#include "tap.h"

#define MIB (1024ULL * 1024)
/* Slow enough to look at what a write or a delete does meanwhile (main() sets them). */
#define FAILPOINTS "atomic-rename:node.json=sleep(200ms);pool-delete-after-check=sleep(200ms)"

static char dir[128]; /* the pool of the test running */

/* Each test gets a pool directory of its own below the scratch directory. */
static void new_pool(const char *name)
{
	free(scratch_mkdir(name));
	snprintf(dir, sizeof(dir), "%s/%s", scratch, name);
}

static char *path_in(const char *rel)
{
	return xasprintf("%s/%s", dir, rel);
}

static Pool *open_pool(uint64_t capacity)
{
	Pool *p = NULL;
	if (pool_open(&(PoolConfig){.path = dir, .capacity = capacity}, &p) < 0) {
		printf("Bail out! cannot open a pool in %s\n", dir);
		exit(1);
	}
	return p;
}

static int create(Pool *p, const char *name, uint64_t size)
{
	PoolVolume v = {.size = size, .name = (char *)name};
	pool_volume_id_for_name(name, v.id);
	return pool_volume_create(p, &v, NULL, NULL);
}

static const char *id_of(const char *name)
{
	static char id[POOL_ID_MAX];
	pool_volume_id_for_name(name, id);
	return id;
}

static uint64_t available(Pool *p)
{
	uint64_t total, avail;
	pool_capacity(p, &total, &avail);
	return avail;
}

static size_t entries(const char *rel)
{
	_cleanup_free_ char *path = path_in(rel);
	DIR *d = opendir(path);
	struct dirent *de;
	size_t n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	if (d)
		closedir(d);
	return n;
}

static void write_text(const char *rel, const char *text)
{
	_cleanup_free_ char *path = path_in(rel);
	FILE *f = fopen(path, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* Capacity: both "processes" count every create, delete and grow. */
static void test_shared_capacity(void)
{
	new_pool("capacity");
	Pool *a = open_pool(10 * MIB), *b = open_pool(10 * MIB);
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	PoolVolumeFound found = {};

	is_int(create(a, "cap-1", 6 * MIB), 0, "A makes 6 MiB of a 10 MiB pool");
	is_int(available(b), 4 * MIB, "B sees 4 MiB left");
	is_int(create(b, "cap-2", 6 * MIB), -ENOSPC, "B cannot make 6 MiB more: -ENOSPC");
	is_int(entries("tmp"), 0, "the refused create left nothing in tmp/");
	is_int(create(b, "cap-2", 4 * MIB), 0, "B makes 4 MiB");
	is_int(available(a), 0, "A sees the pool full");
	is_int(pool_volume_delete(a, id_of("cap-2"), &found), 0, "A deletes B's volume");
	pool_volume_found_done(&found);
	is_int(available(b), 4 * MIB, "B sees the 4 MiB back");
	is_int(pool_volume_load(b, id_of("cap-1"), &v), 0, "B loads A's volume");
	is_int(pool_volume_grow(b, v, 11 * MIB), -ENOSPC, "B cannot grow it past the capacity");
	is_int(pool_volume_grow(b, v, 9 * MIB), 0, "B grows it by 3 MiB");
	is_int(available(a), 1 * MIB, "A sees 1 MiB left");

	/* A ledger changed by hand is recounted from the pool. */
	write_text("ledger", "garbage\n");
	is_int(available(a), 1 * MIB, "a ledger that does not read back is recounted");
	pool_close(a);
	pool_close(b);
}

/* What a pool may provision is its capacity or what its disk has for it (free bytes, and what
 * its files hold: nothing here), whichever is smaller: a capacity beyond the disk promises
 * nothing the disk lacks. */
static void test_capacity_is_the_disk_at_most(void)
{
	new_pool("disk");
	Pool *p = open_pool(UINT64_MAX / 4);
	struct statvfs sv;
	uint64_t total, avail;

	ok(statvfs(dir, &sv) == 0, "statvfs of the pool's filesystem");
	uint64_t free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	pool_capacity(p, &total, &avail);
	ok(total <= free_bytes + 64 * MIB && total + 64 * MIB >= free_bytes,
	   "total %llu: the free bytes of the disk (%llu), not the capacity asked",
	   (unsigned long long)total, (unsigned long long)free_bytes);
	is_int(create(p, "bigger-than-the-disk", (free_bytes + 1024 * MIB) / MIB * MIB), -ENOSPC,
	       "a sparse volume larger than the disk's free bytes: -ENOSPC");
	is_int(entries("tmp"), 0, "nothing left in tmp/");
	is_int(create(p, "fits", MIB), 0, "a volume that fits");
	pool_capacity(p, &total, &avail);
	ok(avail + MIB <= total, "what it holds is taken from what is left");
	pool_close(p);
}

/* A pool records the node it serves at its first use and refuses another: the IDs of its
 * objects carry that node. */
static void test_pool_serves_one_node(void)
{
	new_pool("one-node");
	Pool *p = NULL;
	_cleanup_free_ char *none = pool_recorded_node(dir);

	ok(!none, "a new pool serves no node yet");
	is_int(pool_open(&(PoolConfig){.path = dir, .node_id = "node-a"}, &p), 0,
	       "node-a opens it");
	pool_close(TAKE_PTR(p));
	_cleanup_free_ char *recorded = pool_recorded_node(dir);
	is_str(recorded, "node-a", "it is recorded as node-a's");
	is_int(pool_open(&(PoolConfig){.path = dir, .node_id = "node-a"}, &p), 0, "node-a again");
	pool_close(TAKE_PTR(p));
	is_int(pool_open(&(PoolConfig){.path = dir, .node_id = "node-b"}, &p), -EXDEV,
	       "node-b: -EXDEV");
	ok(!p, "nothing opened");
	is_int(pool_open(&(PoolConfig){.path = dir}, &p), 0, "a tool that names no node opens it");
	pool_close(p);
}

/* Thin provisioning: an overprovision ratio, and what the data files really hold. */
static void test_overprovision_and_allocated(void)
{
	new_pool("thin");
	Pool *p = NULL;
	PoolSpace s;

	if (pool_open(&(PoolConfig){.path = dir, .capacity = 10 * MIB, .overprovision = 2.5}, &p) <
	    0) {
		ok(false, "open with an overprovision ratio");
		return;
	}
	is_int(available(p), 25 * MIB, "10 MiB x 2.5: 25 MiB to provision");
	is_int(create(p, "thin-1", 20 * MIB), 0, "a 20 MiB volume in a 10 MiB pool");
	is_int(create(p, "thin-2", 6 * MIB), -ENOSPC, "6 MiB more do not fit");
	_cleanup_free_ char *why = pool_space_refusal(p, 6 * MIB, NULL);
	is_str(why,
	       "6291456 bytes do not fit in the pool (5242880 bytes left): 20971520 of 26214400 "
	       "bytes are provisioned (capacity 10485760 x overprovision ratio 2.5)",
	       "the refusal says what is left, what is provisioned and the limit");
	is_int(create(p, "thin-2", 5 * MIB), 0, "5 MiB do");

	is_int(pool_space(p, &s), 0, "the pool's space");
	is_int(s.provisioned, 25 * MIB, "provisioned: 25 MiB");
	is_int(s.allocated, 0, "allocated: nothing written yet");
	ok(s.fs_size > 0 && !s.full, "the filesystem: %llu bytes, not full",
	   (unsigned long long)s.fs_size);
	_cleanup_free_ char *rel = xasprintf("volumes/%s/data", id_of("thin-1"));
	_cleanup_free_ char *data = path_in(rel);
	int fd = open(data, O_WRONLY | O_CLOEXEC);
	_cleanup_free_ char *chunk = xmalloc(MIB);
	memset(chunk, 1, MIB);
	bool written = fd >= 0;
	for (int i = 0; written && i < 3; i++)
		written = pwrite(fd, chunk, MIB, (off_t)(i * 4 * MIB)) == (ssize_t)MIB;
	ok(written && fsync(fd) == 0, "3 MiB written into the first volume");
	if (fd >= 0)
		close(fd);
	is_int(pool_space(p, &s), 0, "the pool's space again");
	is_int(s.allocated, 3 * MIB, "allocated: the 3 MiB written");
	is_int(s.provisioned, 25 * MIB, "provisioned: unchanged");
	ok(pool_space_full_condition(p) == NULL, "no full condition");
	pool_close(p);
	PoolCheckReport report;
	is_int(pool_check(dir, &report), 0, "pool check");
	ok(report.provisioned == 25 * MIB && report.allocated == 3 * MIB,
	   "pool check counts the same: %llu provisioned, %llu allocated",
	   (unsigned long long)report.provisioned, (unsigned long long)report.allocated);
	ok(report.fs_size == s.fs_size && report.fs_free > 0, "and the filesystem");
	pool_check_report_done(&report);

	/* Without --pool-capacity: what is free now plus what the files hold, not their sizes. */
	p = open_pool(0);
	is_int(pool_space(p, &s), 0, "the space of a pool without --pool-capacity");
	is_int(s.capacity, s.fs_free + 3 * MIB, "default capacity: free + the 3 MiB allocated");
	is_int(s.overprovision * 10, 10, "default ratio 1");
	pool_close(p);

	/* A --pool-capacity beyond the disk counts the disk's, and the ratio multiplies that. */
	if (pool_open(&(PoolConfig){.path = dir, .capacity = UINT64_MAX / 4, .overprovision = 2},
		      &p) < 0) {
		ok(false, "open with a capacity beyond the disk");
		return;
	}
	is_int(pool_space(p, &s), 0, "the space of a pool beyond its disk");
	is_int(s.capacity, s.fs_free + 3 * MIB, "capacity: the disk's, not the one asked");
	is_int(pool_space_available(&s), 2 * s.capacity - 25 * MIB,
	       "available: twice that, less the 25 MiB provisioned");
	pool_close(p);
}

typedef struct Racer {
	Pool *p;
	int id, made;
} Racer;

static void *race_creates(void *arg)
{
	Racer *r = arg;
	char name[32];

	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "race-%d-%d", r->id, i);
		r->made += create(r->p, name, MIB) == 0;
	}
	return NULL;
}

/* 8 threads on two Pool objects, 32 creates of 1 MiB, 10 MiB of capacity: exactly 10 succeed. */
static void test_concurrent_creates(void)
{
	new_pool("race");
	Pool *p[2] = {open_pool(10 * MIB), open_pool(10 * MIB)};
	Racer r[8];
	pthread_t th[8];
	int made = 0;

	for (int i = 0; i < 8; i++) {
		r[i] = (Racer){.p = p[i % 2], .id = i};
		pthread_create(&th[i], NULL, race_creates, &r[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		made += r[i].made;
	}
	is_int(made, 10, "32 concurrent creates of 1 MiB in 10 MiB: 10 made");
	is_int(available(p[0]), 0, "and the pool is full for one");
	is_int(available(p[1]), 0, "and for the other");
	pool_close(p[0]);
	pool_close(p[1]);
}

/* Open recounts: a live staging directory (flock'ed) keeps its reservation, a dead one is
 * removed and reported by the repair. */
static void test_recount_at_open(void)
{
	new_pool("recount");
	Pool *p = open_pool(100 * MIB);
	PoolCheckReport report;
	uint64_t before = available(p);
	pool_close(p);

	_cleanup_free_ char *live = path_in("tmp/new-vol-00000000000000aa.00000001.5242880");
	_cleanup_free_ char *dead = path_in("tmp/new-vol-00000000000000bb.00000002.3145728");
	mkdir(live, 0700);
	mkdir(dead, 0700);
	int fd = open(live, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(fd >= 0 && flock(fd, LOCK_EX) == 0, "another process holds a staging directory");
	p = open_pool(100 * MIB);
	is_int(available(p), before - 5 * MIB, "its 5 MiB count; the dead one's 3 MiB do not");
	ok(access(live, F_OK) == 0 && access(dead, F_OK) < 0, "the dead one was removed at open");
	is_int(pool_check_repair(p, &report), 0, "repair check");
	int found = 0;
	for (size_t i = 0; i < report.n_items; i++)
		found += strstr(report.items[i].object, "new-vol-00000000000000bb") &&
			 report.items[i].repair && strcmp(report.items[i].repair, "removed") == 0;
	is_int(found, 1, "the repair reports what the open removed");
	is_int(report.n_items, 1, "and nothing else (the live one is in use)");
	pool_check_report_done(&report);
	close(fd);
	rmdir(live);
	pool_close(p);
}

/* What a fill does: writes len bytes of 'x' at offset as an unnamed file linked when whole
 * (as store_restore() does), or fails with error and a message, leaving nothing. */
typedef struct Fill {
	uint64_t offset, len;
	int error;
	unsigned calls;
	uint64_t available; /* the pool's, seen while it ran */
	Pool *pool;
} Fill;

static int fill_fn(int dir_fd, const char *name, void *userdata, char **ret_error)
{
	Fill *f = userdata;
	char path[64], buf[4096];

	f->calls++;
	f->available = available(f->pool);
	int fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	memset(buf, 'x', sizeof(buf));
	for (uint64_t at = 0; at < f->len; at += sizeof(buf))
		if (pwrite(fd, buf, sizeof(buf), (off_t)(f->offset + at)) != (ssize_t)sizeof(buf))
			return -EIO;
	if (f->error) {
		close(fd);
		*ret_error = xstrdup("chunk 1234 (offset 8192) is damaged");
		return f->error;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int r = linkat(AT_FDCWD, path, dir_fd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* A volume made by a fill (a restore): its space reserved before the fill runs, its file grown
 * to the volume's size, nothing left when the fill fails or the pool has no room. */
static void test_create_filled(void)
{
	new_pool("filled");
	Pool *p = open_pool(32 * MIB);
	_cleanup_free_ char *err = NULL;
	PoolVolume v = {.size = 16 * MIB, .name = (char *)"restored"};
	Fill f = {.offset = 8192, .len = 4096, .pool = p};
	struct stat st;

	pool_volume_id_for_name("restored", v.id);
	is_int(pool_volume_create_filled(p, &v, fill_fn, &f, &err), 0, "a filled volume");
	is_int((long long)f.available, 16 * MIB, "...its 16 MiB reserved while the fill ran");
	_cleanup_free_ char *data = xasprintf("%s/volumes/%s/data", dir, v.id);
	ok(stat(data, &st) == 0 && st.st_size == 16 * MIB && st.st_blocks * 512 <= 8192,
	   "...its data file grown to 16 MiB, holes kept (%lld blocks)", (long long)st.st_blocks);
	is_int(available(p), 16 * MIB, "...and counted");
	is_int(pool_volume_create_filled(p, &v, fill_fn, &f, &err), -EEXIST,
	       "the same again: -EEXIST");

	PoolVolume w = {.size = 8 * MIB, .name = (char *)"damaged"};
	pool_volume_id_for_name("damaged", w.id);
	Fill bad = {.len = 4096, .error = -EUCLEAN, .pool = p};
	is_int(pool_volume_create_filled(p, &w, fill_fn, &bad, &err), -EUCLEAN,
	       "a fill that fails: its error");
	ok(err && strstr(err, "chunk 1234 (offset 8192)"), "...and its message: %s", err);
	is_int(available(p), 16 * MIB, "...its space given back");
	is_int((long long)entries("volumes"), 1, "...no volume");
	is_int((long long)entries("tmp"), 0, "...nothing in tmp/");

	PoolVolume big = {.size = 8 * MIB, .name = (char *)"big"};
	pool_volume_id_for_name("big", big.id);
	Fill over = {.len = 4096, .offset = 9 * MIB, .pool = p};
	is_int(pool_volume_create_filled(p, &big, fill_fn, &over, NULL), -ERANGE,
	       "a fill larger than the volume: -ERANGE");
	is_int((long long)entries("volumes"), 1, "...no volume");

	PoolVolume huge = {.size = 20 * MIB, .name = (char *)"huge"};
	pool_volume_id_for_name("huge", huge.id);
	Fill never = {.pool = p};
	is_int(pool_volume_create_filled(p, &huge, fill_fn, &never, NULL), -ENOSPC,
	       "no room: -ENOSPC");
	is_int((long long)never.calls, 0, "...before the fill ran");
	is_int((long long)entries("tmp"), 0, "...nothing in tmp/");
	pool_close(p);
}

/* Delete decides "in use?" and removes under one lock; damaged volumes go too. */
static void test_delete(void)
{
	new_pool("delete");
	Pool *p = open_pool(64 * MIB);
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *damage = NULL;
	PoolVolumeFound found = {};

	create(p, "del-published", MIB);
	pool_volume_load(p, id_of("del-published"), &v);
	free(v->attachments); /* the empty array the load made */
	v->attachments = xnew0(PoolAttachment, 1);
	v->attachments[0] =
		(PoolAttachment){.node = xstrdup("node-1"), .device = xstrdup("/dev/xvdba")};
	v->n_attachments = 1;
	is_int(pool_volume_save(p, v), 0, "published to node-1");
	is_int(pool_volume_delete(p, v->id, &found), -ENOTEMPTY, "delete: -ENOTEMPTY");
	ok(found.use == POOL_VOLUME_PUBLISHED && strcmp(found.node, "node-1") == 0,
	   "naming the node");
	pool_volume_found_done(&found);

	create(p, "del-damaged", 3 * MIB);
	_cleanup_free_ char *meta = xasprintf("volumes/%s/meta.json", id_of("del-damaged"));
	write_text(meta, "{\"format\": 1");
	pool_volume_free(TAKE_PTR(v));
	is_int(pool_volume_load(p, id_of("del-damaged"), &v), -EBADMSG, "load: -EBADMSG");
	is_int(pool_volume_inspect(p, id_of("del-damaged"), &v, &damage), 0, "inspect finds it");
	ok(damage && strstr(damage, "meta.json is damaged"), "saying what is damaged: %s", damage);
	is_int(v->size, 3 * MIB, "its size is its data file's");
	uint64_t avail = available(p);
	is_int(pool_volume_delete(p, v->id, &found), 0, "a damaged volume is deleted");
	ok(found.name == NULL, "its name was unknown");
	is_int(available(p), avail + 3 * MIB, "and its bytes come back");
	is_int(pool_volume_inspect(p, id_of("del-damaged"), &v, &damage), -ENOENT, "gone");
	pool_volume_found_done(&found);
	pool_close(p);
}

/* An object directory of the three files a volume holds, below tmp-like dir "where"; an open
 * fd of it. */
static int files_dir(int where_fd, const char *name)
{
	static const char *const files[] = {"meta.json", "data", "node.lock"};

	if (mkdirat(where_fd, name, 0700) < 0)
		return -1;
	int fd = openat(where_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; fd >= 0 && i < ELEMENTSOF(files); i++)
		close(openat(fd, files[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	return fd;
}

/* What the delete's check notes is removed without a second look; whatever changed since is
 * left to the whole walk, which removes the pool's leftovers and names what is in the way. */
static void test_tree_remove_files(void)
{
	_cleanup_free_ char *where = scratch_mkdir("tree-files");
	_cleanup_close_ int wfd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *why = NULL;
	PoolTreeFiles files;

	_cleanup_close_ int a = files_dir(wfd, "a");
	is_int(pool_tree_check_files(wfd, "a", "tmp", &files, &why), 0, "the check passes");
	ok(files.flat && files.n == 3, "and notes 3 files (%zu)", files.n);
	is_int(pool_tree_remove_files(wfd, "a", a, &files, "tmp", &why), 0, "removed by name");
	ok(faccessat(wfd, "a", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "gone");

	_cleanup_close_ int b = files_dir(wfd, "b");
	is_int(pool_tree_check_files(wfd, "b", "tmp", &files, &why), 0, "checked");
	/* A directory in place of data since the check: the pool's leftover, removed whole. */
	ok(unlinkat(b, "data", 0) == 0 && mkdirat(b, "data", 0700) == 0 &&
		   close(openat(b, "data/x", O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0,
	   "data is now a directory holding a file");
	is_int(pool_tree_remove_files(wfd, "b", b, &files, "tmp", &why), 0, "removed by the walk");
	ok(faccessat(wfd, "b", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "gone");

	_cleanup_close_ int c = files_dir(wfd, "c");
	is_int(pool_tree_check_files(wfd, "c", "tmp", &files, &why), 0, "checked");
	close(openat(c, "stray", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	is_int(pool_tree_remove_files(wfd, "c", c, &files, "tmp", &why), -ENOTEMPTY,
	       "a file added since stays");
	ok(why && strstr(why, "tmp/c/stray is no file of the pool"), "named: %s", why);
	ok(faccessat(c, "stray", F_OK, 0) == 0, "with its directory");

	_cleanup_close_ int d = files_dir(wfd, "d");
	ok(mkdirat(d, "tree", 0700) == 0, "a directory volume's tree/");
	is_int(pool_tree_check_files(wfd, "d", "tmp", &files, &why), 0, "checked");
	ok(!files.flat, "not removed by name");
	is_int(pool_tree_remove_files(wfd, "d", d, &files, "tmp", &why), 0, "removed by the walk");
	ok(faccessat(wfd, "d", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "gone");
}

/* The device-name index: claims confirmed by the volumes' records. */
static void test_node_devices(void)
{
	new_pool("devices");
	Pool *p = open_pool(0);
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	PoolNodeDevice *d = NULL;
	size_t n = 0;
	int lock = -EBADF;

	create(p, "dev-attached", MIB);
	create(p, "dev-claim-only", MIB);
	pool_volume_load(p, id_of("dev-attached"), &v);
	free(v->attachments); /* the empty array the load made */
	v->attachments = xnew0(PoolAttachment, 1);
	v->attachments[0] =
		(PoolAttachment){.node = xstrdup("node-x"), .device = xstrdup("/dev/xvdbb")};
	v->n_attachments = 1;
	pool_volume_save(p, v);

	is_int(pool_node_lock(p, "node-x", &lock), 0, "lock node-x");
	is_int(pool_node_devices_load(p, "node-x", &d, &n), 0, "no index yet: rebuilt");
	ok(n == 1 && strcmp(d[0].device, "/dev/xvdbb") == 0 && strcmp(d[0].volume_id, v->id) == 0,
	   "from the attachments");
	pool_node_devices_free(d, n);
	PoolNodeDevice claims[] = {
		{(char *)"/dev/xvdba", (char *)id_of("dev-claim-only")}, /* killed before meta */
		{(char *)"/dev/xvdbb", v->id},
		{(char *)"/dev/xvdbc", (char *)"vol-00000000000000cc"}, /* volume gone */
	};
	is_int(pool_node_devices_save(p, "node-x", claims, 3), 0, "save three claims");
	is_int(pool_node_devices_load(p, "node-x", &d, &n), 0, "load them");
	ok(n == 1 && strcmp(d[0].device, "/dev/xvdbb") == 0,
	   "only the one its volume's record confirms is kept");
	pool_node_devices_free(d, n);
	is_int(pool_node_lock(p, "../x", &lock), -EINVAL, "a node ID that is no name: -EINVAL");
	pool_unlock(lock);
	pool_close(p);
}

/* Atomic writes leave their temporary in tmp/, never beside the file; pool check finds and
 * --repair removes the ones an earlier version left beside it. */
static void test_temporaries(void)
{
	new_pool("temporaries");
	Pool *p = open_pool(0);
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	PoolCheckReport report;

	ok(write_file_is_temporary(".meta.json.tmp-0123456789abcdef"), "a temporary's name");
	ok(!write_file_is_temporary("meta.json") && !write_file_is_temporary(".x.tmp-0123"),
	   "not a temporary");
	create(p, "tmp-vol", MIB);
	pool_volume_load(p, id_of("tmp-vol"), &v);
	is_int(pool_volume_save(p, v), 0, "save");
	_cleanup_free_ char *vdir = xasprintf("volumes/%s", v->id);
	is_int(entries(vdir), 2, "the volume's directory holds meta.json and data only");
	_cleanup_free_ char *stray = xasprintf("%s/.meta.json.tmp-0123456789abcdef", vdir);
	write_text(stray, "{}");

	is_int(pool_check(dir, &report), 0, "check");
	is_int(report.n_items, 1, "one problem");
	ok(report.n_items == 1 && strstr(report.items[0].object, ".meta.json.tmp-") &&
		   !report.items[0].repair,
	   "the stray temporary, reported only");
	pool_check_report_done(&report);
	is_int(pool_check_repair(p, &report), 0, "repair");
	ok(report.repaired == 1 && report.n_items == 1 && report.items[0].repair &&
		   strcmp(report.items[0].repair, "removed") == 0,
	   "removed");
	pool_check_report_done(&report);
	is_int(entries(vdir), 2, "gone");

	/* A data file an interrupted expand grew is recorded at its size. */
	_cleanup_free_ char *data = xasprintf("%s/%s/data", dir, vdir);
	ok(truncate(data, 2 * MIB) == 0, "an expand grew the data file, then was killed");
	is_int(pool_check_repair(p, &report), 0, "repair");
	ok(report.repaired == 1 && strstr(report.items[0].problem, "metadata says 1048576"),
	   "the size is repaired: %s", report.n_items ? report.items[0].problem : "");
	pool_check_report_done(&report);
	pool_volume_free(TAKE_PTR(v));
	pool_volume_load(p, id_of("tmp-vol"), &v);
	is_int(v->size, 2 * MIB, "the metadata records the data file's size");
	pool_close(p);
}

/* A use record (node.json) as the node service writes it: node-1 staged it at path. */
static void use_record(NodeUse *u, const char *path)
{
	*u = (NodeUse){
		.node = xstrdup("node-1"),
		.staging = {.path = xstrdup(path), .created = true, .dev = 1, .ino = 2},
		.fstype = xstrdup("ext4"),
	};
}

/* The name of the first entry of tmp/ that is a temporary of node.json, or NULL. */
static char *use_temporary(void)
{
	_cleanup_free_ char *path = path_in("tmp");
	DIR *d = opendir(path);
	struct dirent *de;
	char *found = NULL;

	while (d && !found && (de = readdir(d)))
		if (strncmp(de->d_name, ".node.json.tmp-", 15) == 0)
			found = xstrdup(de->d_name);
	if (d)
		closedir(d);
	return found;
}

/* Whether someone holds tmp/NAME's flock (a probe that gets it lets it go at once). */
static bool temporary_locked(const char *name)
{
	_cleanup_free_ char *rel = xasprintf("tmp/%s", name);
	_cleanup_free_ char *path = path_in(rel);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

	return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

typedef struct Saver {
	Pool *p;
	const char *id;
	const NodeUse *u;
	int r;
} Saver;

static void *save_use(void *arg)
{
	Saver *s = arg;
	s->r = pool_volume_use_save(s->p, s->id, s->u, false);
	return NULL;
}

static size_t problems_about(const PoolCheckReport *r, const char *what)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_items; i++)
		n += strstr(r->items[i].object, what) || strstr(r->items[i].problem, what);
	return n;
}

/* node.json goes through tmp/ like every record (a flock'ed temporary, never reported or
 * removed while it is written); pool check knows it and node.lock, checks that node.json
 * parses, and reports anything else in a volume's directory without touching it. */
static void test_use_records(void)
{
	new_pool("use");
	Pool *p = open_pool(0), *other = open_pool(0);
	NodeUse u, loaded = {};
	PoolCheckReport report;
	pthread_t th;
	int lock = -EBADF;

	create(p, "use-vol", MIB);
	const char *id = id_of("use-vol");
	_cleanup_free_ char *vdir = xasprintf("volumes/%s", id);
	use_record(&u, "/var/lib/kubelet/plugins/staging/use-vol");
	is_int(pool_volume_use_lock(p, id, &lock), 0, "take the node lock");
	Saver s = {.p = p, .id = id, .u = &u};
	pthread_create(&th, NULL, save_use, &s);
	/* The writer creates its temporary, then flocks it: wait for both. */
	_cleanup_free_ char *tmp = NULL;
	bool locked = false;
	for (int i = 0; i < 150 && !locked; i++) {
		free(tmp);
		tmp = use_temporary();
		locked = tmp && temporary_locked(tmp);
		if (!locked)
			usleep(1000);
	}
	ok(tmp != NULL, "while node.json is written, its temporary is in tmp/ (%s)", tmp ?: "none");
	ok(locked, "and flock'ed");
	_cleanup_free_ char *tmp_rel = xasprintf("tmp/%s", tmp ?: "x");
	_cleanup_free_ char *tmp_path = path_in(tmp_rel);
	is_int(pool_check_repair(other, &report), 0, "a repair meanwhile");
	is_int(report.n_items, 0, "neither reports it");
	pool_check_report_done(&report);
	ok(access(tmp_path, F_OK) == 0, "nor removes it");
	pthread_join(th, NULL);
	is_int(s.r, 0, "saved");
	is_int(entries("tmp"), 0, "nothing left in tmp/");
	is_int(entries(vdir), 4, "the volume holds meta.json, data, node.json and node.lock");
	is_int(pool_volume_use_load(other, id, &loaded), 0, "the other process loads it");
	is_str(loaded.staging.path, u.staging.path, "with its staging path");
	node_use_done(&loaded);
	pool_unlock(lock);

	is_int(pool_check(dir, &report), 0, "check");
	is_int(report.n_items, 0, "node.json and node.lock are files of a volume");
	pool_check_report_done(&report);

	_cleanup_free_ char *stray = xasprintf("%s/notes.txt", vdir);
	_cleanup_free_ char *use = xasprintf("%s/node.json", vdir);
	write_text(stray, "mine\n");
	write_text(use, "{\"format\": 1, \"node\": ");
	is_int(pool_check_repair(p, &report), 0, "repair");
	is_int(report.n_items, 2, "two problems");
	is_int(problems_about(&report, "notes.txt"), 1, "a file that is no file of the pool");
	is_int(problems_about(&report, "node.json is damaged"), 1, "a damaged node.json");
	is_int(report.repaired, 0, "neither repaired");
	pool_check_report_done(&report);
	_cleanup_free_ char *stray_path = path_in(stray), *use_path = path_in(use);
	ok(access(stray_path, F_OK) == 0 && access(use_path, F_OK) == 0, "both left");
	node_use_done(&u);
	pool_close(p);
	pool_close(other);
}

/* A "started" mark of the node service's mkfs stays in node.json when nothing is staged any
 * more, outlives the boot that voids the rest of the record, is no problem for pool check,
 * and does not keep the volume from being deleted; a "done" one goes with the record. */
static void test_mkfs_mark(void)
{
	new_pool("mark");
	Pool *p = open_pool(0);
	NodeUse u, loaded = {};
	PoolCheckReport report;
	PoolVolumeFound found = {};
	size_t len;
	int lock = -EBADF;

	create(p, "marked", MIB);
	const char *id = id_of("marked");
	_cleanup_free_ char *use = xasprintf("volumes/%s/node.json", id);
	_cleanup_free_ char *use_path = path_in(use);
	const char *uuid = "0b3c2f4e-8d6a-4e1f-9a7b-5c4d3e2f1a0b";
	is_int(pool_volume_use_lock(p, id, &lock), 0, "take the node lock");
	use_record(&u, "/var/lib/kubelet/plugins/staging/marked");
	node_use_set_mkfs(&u, NODE_MKFS_STARTED, "xfs", uuid);
	is_int(pool_volume_use_save(p, id, &u, true), 0, "the stage marks its mkfs started");
	is_int(pool_volume_use_load(p, id, &loaded), 0, "loaded");
	ok(loaded.mkfs == NODE_MKFS_STARTED && strcmp(loaded.mkfs_fstype, "xfs") == 0 &&
		   strcmp(loaded.mkfs_uuid, uuid) == 0,
	   "with the mark: started, xfs, its UUID");
	node_use_done(&loaded);

	/* Unstaged before mkfs finished: the record holds only the mark, and stays. */
	free(u.staging.path);
	free(u.fstype);
	u.staging = (NodeTarget){};
	u.fstype = NULL;
	is_int(pool_volume_use_save(p, id, &u, false), 0, "unstaged, mkfs started");
	ok(access(use_path, F_OK) == 0, "node.json stays for the mark");
	is_int(pool_volume_use_load(p, id, &loaded), 0, "loaded");
	ok(loaded.mkfs == NODE_MKFS_STARTED && !loaded.staging.path && node_use_empty(&loaded),
	   "started, nothing staged");
	node_use_done(&loaded);

	/* A mark "done" says no more than none: it goes with the rest. */
	node_use_set_mkfs(&u, NODE_MKFS_DONE, "xfs", uuid);
	is_int(pool_volume_use_save(p, id, &u, true), 0, "unstaged, mkfs done");
	ok(access(use_path, F_OK) < 0 && errno == ENOENT, "node.json is gone");

	/* Another boot: where it was staged is void, the mark is not. */
	use_record(&loaded, "/var/lib/kubelet/plugins/staging/marked");
	node_use_set_mkfs(&loaded, NODE_MKFS_STARTED, "ext4", uuid);
	_cleanup_free_ char *text = node_use_to_json(&loaded, "another-boot", &len);
	node_use_done(&loaded);
	write_text(use, text);
	is_int(pool_volume_use_load(p, id, &loaded), 0, "a record of another boot loads");
	ok(!loaded.staging.path && !loaded.node && loaded.mkfs == NODE_MKFS_STARTED &&
		   strcmp(loaded.mkfs_fstype, "ext4") == 0 && strcmp(loaded.mkfs_uuid, uuid) == 0,
	   "with its mark only");
	node_use_done(&loaded);
	pool_unlock(lock);

	is_int(pool_check(dir, &report), 0, "check");
	is_int(report.n_items, 0, "a marked node.json is no problem");
	pool_check_report_done(&report);
	is_int(pool_volume_delete(p, id, &found), 0, "a volume with only a mark is deleted");
	pool_volume_found_done(&found);
	node_use_done(&u);
	pool_close(p);
}

typedef struct Deleter {
	Pool *p;
	const char *id;
	PoolVolumeFound found;
	int r;
	bool done;
} Deleter;

static void *delete_volume(void *arg)
{
	Deleter *d = arg;
	d->r = pool_volume_delete(d->p, d->id, &d->found);
	__atomic_store_n(&d->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A volume staged on this machine (a loop device over its data file) is not deleted: the delete
 * waits for the node lock a stage holds, and a stage waiting for it finds the volume gone. */
static void test_delete_staged(void)
{
	if (geteuid() != 0) {
		ok(true, "# SKIP a loop device needs root");
		return;
	}
	new_pool("staged");
	Pool *node = open_pool(0), *ctl = open_pool(0);
	const char *staging = "/var/lib/kubelet/plugins/staging/staged-vol";
	_cleanup_free_ char *dev = NULL;
	NodeUse u;
	pthread_t th;
	struct stat st;
	int lock = -EBADF;

	create(node, "staged-vol", 2 * MIB);
	const char *id = id_of("staged-vol");
	_cleanup_free_ char *data = pool_volume_data_path(node, id);
	is_int(pool_volume_use_lock(node, id, &lock), 0, "a stage takes the node lock");
	Deleter d = {.p = ctl, .id = id};
	pthread_create(&th, NULL, delete_volume, &d);
	usleep(300 * 1000);
	ok(!__atomic_load_n(&d.done, __ATOMIC_SEQ_CST), "the delete waits for it");
	use_record(&u, staging);
	is_int(pool_volume_use_save(node, id, &u, false), 0, "the stage records where");
	is_int(loop_attach(data, NULL, &dev), 0, "and attaches a loop device");
	pool_unlock(lock);
	pthread_join(th, NULL);
	is_int(d.r, -ENOTEMPTY, "then the delete is refused");
	ok(d.found.use == POOL_VOLUME_STAGED && d.found.node &&
		   strcmp(d.found.node, "node-1") == 0 && d.found.staging_path &&
		   strcmp(d.found.staging_path, staging) == 0 && d.found.device &&
		   strcmp(d.found.device, dev) == 0,
	   "naming the node, the staging path and the device");
	pool_volume_found_done(&d.found);
	ok(stat(data, &st) == 0 && st.st_size == (off_t)(2 * MIB), "the data file is intact");

	/* Without a record (or a damaged one), the loop device alone refuses it. */
	_cleanup_free_ char *use = xasprintf("volumes/%s/node.json", id);
	write_text(use, "not json");
	d = (Deleter){.p = ctl, .id = id};
	is_int(pool_volume_delete(ctl, id, &d.found), -ENOTEMPTY, "unreadable record: refused");
	ok(d.found.use == POOL_VOLUME_STAGED && !d.found.node && !d.found.staging_path &&
		   d.found.device && strcmp(d.found.device, dev) == 0,
	   "naming the device only");
	pool_volume_found_done(&d.found);

	is_int(loop_detach(dev), 0, "unstaged: the loop device is detached");
	node_use_done(&u);
	u = (NodeUse){};
	is_int(pool_volume_use_save(node, id, &u, false), 0, "and the record cleared");

	/* A stage that waits for the node lock while the volume is deleted finds it gone. */
	pthread_create(&th, NULL, delete_volume, &d);
	usleep(100 * 1000); /* the delete holds both locks, in its failpoint's sleep */
	is_int(pool_volume_use_lock(node, id, &lock), -ENOENT, "a stage meanwhile: -ENOENT");
	pthread_join(th, NULL);
	is_int(d.r, 0, "the delete succeeded");
	pool_volume_found_done(&d.found);
	is_int(loop_find(data, &dev), -ENOENT, "no loop device left");
	pool_close(node);
	pool_close(ctl);
}

typedef struct Locker {
	Pool *p;
	const char *id;
	int r;
	bool done;
} Locker;

static void *use_lock(void *arg)
{
	Locker *l = arg;
	int fd = -EBADF;

	l->r = pool_volume_use_lock(l->p, l->id, &fd);
	pool_unlock(fd);
	__atomic_store_n(&l->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A stage that waited for the node lock of a volume deleted and made again meanwhile does not
 * take the new volume for the one it waited for: the lock it got is the old directory's. */
static void test_use_lock_after_recreate(void)
{
	new_pool("recreate");
	Pool *p = open_pool(0);
	pthread_t th;

	create(p, "again-vol", MIB);
	Locker l = {.p = p, .id = id_of("again-vol")};
	_cleanup_free_ char *vdir = xasprintf("volumes/%s", l.id);
	_cleanup_free_ char *lock_rel = xasprintf("%s/node.lock", vdir);
	_cleanup_free_ char *lock_path = path_in(lock_rel), *old = path_in(vdir);
	_cleanup_free_ char *moved = path_in("tmp/del-by-hand");
	int held = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ok(held >= 0 && flock(held, LOCK_EX) == 0, "a delete holds the node lock");
	pthread_create(&th, NULL, use_lock, &l);
	usleep(100 * 1000);
	ok(!__atomic_load_n(&l.done, __ATOMIC_SEQ_CST), "a stage waits for it");
	ok(rename(old, moved) == 0, "the volume is renamed away");
	is_int(create(p, "again-vol", MIB), 0, "and made again under the same ID");
	close(held);
	pthread_join(th, NULL);
	is_int(l.r, -ENOENT, "the stage finds the volume it waited for gone");
	l.done = false;
	use_lock(&l);
	is_int(l.r, 0, "a new stage locks the new volume");
	pool_close(p);
}

/* A pool is recorded beside it at its first open: found absent or empty later, it was lost,
 * and only init makes a new one there. A pool whose directory goes while it is open is gone. */
static void test_lost_pool(void)
{
	Pool *p;

	new_pool("lost");
	p = open_pool(0);
	_cleanup_free_ char *record = xasprintf("%s/.lost.volplug", scratch);
	_cleanup_free_ char *want = pool_record_path(dir);
	is_str(want, record, "the record is beside the pool");
	ok(access(record, F_OK) == 0, "made at the first open");
	is_int(pool_probe(p), 0, "usable");
	_cleanup_free_ char *moved = xasprintf("%s/lost-moved", scratch);
	ok(rename(dir, moved) == 0, "the pool's directory goes elsewhere");
	is_int(pool_probe(p), -ENOMEDIUM, "the open pool is gone from its path");
	pool_close(p);

	p = NULL;
	is_int(pool_open(&(PoolConfig){.path = dir}, &p), -ENOMEDIUM, "absent: refused");
	ok(access(dir, F_OK) < 0, "and not made");
	ok(mkdir(dir, 0700) == 0, "an empty directory in its place");
	is_int(pool_open(&(PoolConfig){.path = dir}, &p), -ENOMEDIUM, "empty: refused");
	_cleanup_free_ char *file = path_in("notes");
	write_text("notes", "x");
	is_int(pool_open(&(PoolConfig){.path = dir, .init = true}, &p), -ENOTEMPTY,
	       "init: not over files");
	ok(unlink(file) == 0, "the files gone");
	is_int(pool_open(&(PoolConfig){.path = dir, .init = true}, &p), 0, "init: a new pool");
	is_int(entries("volumes"), 0, "an empty one");
	pool_close(p);
	is_int(pool_open(&(PoolConfig){.path = moved}, &p), 0, "the moved pool opens where it is");
	pool_close(p);
}

typedef struct Committer {
	Pool *p;
	pthread_barrier_t *start;
	char name[32], id[POOL_ID_MAX];
	int r;
	bool delete;
} Committer;

static bool present(Pool *p, const char *id)
{
	PoolVolume *v = NULL;
	bool r = pool_volume_load(p, id, &v) == 0;
	pool_volume_free(v);
	return r;
}

static void *commit_one(void *arg)
{
	Committer *c = arg;
	PoolVolumeFound found = {};

	pthread_barrier_wait(c->start);
	if (c->delete)
		c->r = pool_volume_delete(c->p, c->id, &found);
	else
		c->r = create(c->p, c->name, MIB);
	pool_volume_found_done(&found);
	return NULL;
}

/* Runs 8 creates or 8 deletes at once; returns how many fsyncs of volumes/ they ran. */
static uint64_t commit_eight(Pool *p, bool delete, int *ret_ok)
{
	pthread_barrier_t start;
	Committer c[8];
	pthread_t th[8];
	uint64_t before = pool_dir_fsyncs(p);

	pthread_barrier_init(&start, NULL, 8);
	*ret_ok = 0;
	for (int i = 0; i < 8; i++) {
		c[i] = (Committer){.p = p, .start = &start, .delete = delete};
		snprintf(c[i].name, sizeof(c[i].name), "group-commit-%d", i);
		pool_volume_id_for_name(c[i].name, c[i].id);
		pthread_create(&th[i], NULL, commit_one, &c[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		*ret_ok += c[i].r == 0;
		if (c[i].r != 0)
			printf("# %s: %s\n", c[i].name, strerror(-c[i].r));
	}
	pthread_barrier_destroy(&start);
	return pool_dir_fsyncs(p) - before;
}

/* Concurrent creates and deletes share the fsync of volumes/ that makes their renames durable:
 * while one runs (held 100 ms by a failpoint), the others queue, and the next fsync covers all
 * of them. One alone runs one. Every volume is there after its create, gone after its delete. */
static void test_group_commit(void)
{
	int ok_count;

	new_pool("group-commit");
	Pool *p = open_pool(100 * MIB);
	uint64_t before = pool_dir_fsyncs(p);
	is_int(create(p, "alone", MIB), 0, "one create");
	is_int(pool_dir_fsyncs(p) - before, 1, "one fsync of volumes/ for it");
	uint64_t n = commit_eight(p, false, &ok_count);
	is_int(ok_count, 8, "8 concurrent creates");
	ok(n >= 1 && n <= 3, "share %llu fsyncs of volumes/ (one each before)",
	   (unsigned long long)n);
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof(name), "group-commit-%d", i);
		ok(present(p, id_of(name)), "%s is there", name);
	}
	n = commit_eight(p, true, &ok_count);
	is_int(ok_count, 8, "8 concurrent deletes");
	ok(n >= 1 && n <= 3, "share %llu fsyncs of volumes/", (unsigned long long)n);
	ok(!present(p, id_of("group-commit-0")), "gone");
	pool_close(p);
}

int main(void)
{
	setenv("VOLPLUG_FAILPOINTS", FAILPOINTS, 1);
	if (failpoints_init() < 0)
		return 1;
	scratch_init("pool");
	test_shared_capacity();
	test_capacity_is_the_disk_at_most();
	test_pool_serves_one_node();
	test_overprovision_and_allocated();
	test_concurrent_creates();
	test_recount_at_open();
	test_create_filled();
	test_delete();
	test_tree_remove_files();
	test_node_devices();
	test_temporaries();
	test_use_records();
	test_mkfs_mark();
	test_delete_staged();
	test_use_lock_after_recreate();
	test_lost_pool();
	/* Last: the failpoint holds every fsync of volumes/ 100 ms. */
	setenv("VOLPLUG_FAILPOINTS", "pool-dir-sync=sleep(100ms)", 1);
	if (failpoints_init() < 0)
		return 1;
	test_group_commit();
	return tap_done();
}
