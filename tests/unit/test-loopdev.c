/* SPDX-License-Identifier: Apache-2.0 */
/* Real loop devices on sparse files in a temporary directory. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "alloc.h"
#include "loopdev.h"
#include "scratch.h"
#include "tap.h"
#include "time-util.h"

#define MiB (1024ULL * 1024ULL)

static int held_fd = -EBADF; /* keeps a device busy; the clean-up must let go of it first */

static void release_held(void)
{
	if (held_fd >= 0)
		close(TAKE_FD(held_fd));
}

static bool node_is_blockdev(const char *devpath)
{
	struct stat st;
	return stat(devpath, &st) == 0 && S_ISBLK(st.st_mode);
}

typedef struct AttachJob {
	const char *file;
	char *dev[3];
	int r[3];
} AttachJob;

static void *attach_thread(void *p)
{
	AttachJob *j = p;
	for (int i = 0; i < 3; i++)
		j->r[i] = loop_attach(j->file, NULL, &j->dev[i]);
	return NULL;
}

static void test_attach_find_detach(void)
{
	_cleanup_free_ char *file = scratch_file("vol.img", 64 * MiB);
	_cleanup_free_ char *canon = realpath(file, NULL);
	_cleanup_free_ char *dev = NULL, *found = NULL;
	uint64_t size = 0;
	LoopInfo info;

	is_int(loop_attach(file, NULL, &dev), 0, "attach %s", file);
	if (!dev)
		return;
	ok(strncmp(dev, "/dev/loop", 9) == 0 && node_is_blockdev(dev), "device node %s", dev);
	is_int(loop_get_info(dev, &info), 0, "info");
	is_str(info.backing_file, canon, "sysfs names the backing file");
	ok(!info.read_only, "read-write");
	ok(!info.autoclear, "no autoclear: survives the daemon");
	ok(!info.deleted, "not deleted");
	ok(!info.direct_io, "buffered unless asked");
	is_int(info.block_size, 512, "512-byte blocks unless asked");
	loop_info_done(&info);

	is_int(loop_find(file, &found), 0, "find by the same path");
	is_str(found, dev, "same device");
	free(TAKE_PTR(found));

	/* The same file through another path: a symlinked directory and a hard link. */
	_cleanup_free_ char *alias = scratch_path("alias");
	_cleanup_free_ char *via_alias = scratch_path("alias/vol.img");
	_cleanup_free_ char *hardlink = scratch_path("hardlink.img");
	ok(symlink(scratch, alias) == 0 && link(file, hardlink) == 0, "aliases made");
	is_int(loop_find(via_alias, &found), 0, "find through a symlinked directory");
	is_str(found, dev, "same device through the symlink");
	free(TAKE_PTR(found));
	is_int(loop_find(hardlink, &found), 0, "find through a hard link");
	is_str(found, dev, "same device through the hard link");
	free(TAKE_PTR(found));

	_cleanup_free_ char *other = scratch_file("other.img", MiB);
	is_int(loop_find(other, &found), -ENOENT, "another file has no device");
	is_int(loop_find("/nonexistent/x.img", &found), -ENOENT, "missing file: -ENOENT");

	/* Growing the file: the device sees it after a refresh only. */
	is_int(loop_get_size(dev, &size), 0, "size");
	is_int(size, 64 * MiB, "size is the file's");
	ok(truncate(file, 96 * MiB) == 0, "file grown to 96 MiB");
	is_int(loop_get_size(dev, &size), 0, "size after growing the file");
	is_int(size, 64 * MiB, "device does not see it yet");
	is_int(loop_refresh_size(dev), 0, "refresh size");
	is_int(loop_get_size(dev, &size), 0, "size after refresh");
	is_int(size, 96 * MiB, "device sees the grown file");

	/* Busy: an opener that does not let go. The kernel would turn LOOP_CLR_FD into a
	 * deferred detach; we want -EBUSY and the device as it was. */
	held_fd = open(dev, O_RDONLY | O_CLOEXEC);
	ok(held_fd >= 0, "device held open");
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	is_int(loop_detach(dev), -EBUSY, "detach while held open: -EBUSY");
	usec_t took = now_usec(CLOCK_MONOTONIC) - t0;
	ok(took < 3 * USEC_PER_SEC, "gave up within the retry budget (%.2f s)", took / 1e6);
	is_int(loop_get_info(dev, &info), 0, "still attached");
	ok(!info.autoclear, "autoclear not left behind");
	loop_info_done(&info);
	close(TAKE_FD(held_fd));
	is_int(loop_find(file, &found), 0, "still found");
	free(TAKE_PTR(found));

	is_int(loop_detach(dev), 0, "detach");
	is_int(loop_find(file, &found), -ENOENT, "find after detach: -ENOENT");
	is_int(loop_get_info(dev, &info), -ENXIO, "info after detach: -ENXIO");
	is_int(loop_detach(dev), 0, "detach again: nothing to do");
	is_int(loop_refresh_size(dev), -ENXIO, "refresh an unbound device: -ENXIO");
}

static void test_read_only(void)
{
	_cleanup_free_ char *file = scratch_file("ro.img", 8 * MiB);
	_cleanup_free_ char *dev = NULL;
	LoopInfo info;
	int ro = 0;

	is_int(loop_attach(file, &(LoopAttach){.read_only = true}, &dev), 0, "attach read-only");
	if (!dev)
		return;
	is_int(loop_get_info(dev, &info), 0, "info");
	ok(info.read_only, "sysfs says read-only");
	loop_info_done(&info);
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	ok(fd >= 0 && ioctl(fd, BLKROGET, &ro) == 0 && ro == 1, "BLKROGET says read-only");
	if (fd >= 0)
		close(fd);
	fd = open(dev, O_WRONLY | O_CLOEXEC);
	ok(fd < 0 || write(fd, "x", 1) < 0, "cannot write to it");
	if (fd >= 0)
		close(fd);
	is_int(loop_detach(dev), 0, "detach");
}

static void test_list_and_duplicates(void)
{
	_cleanup_free_ char *file = scratch_file("dup.img", 8 * MiB);
	_cleanup_free_ char *subdir = scratch_path("empty");
	_cleanup_free_ char *a = NULL, *b = NULL, *found = NULL;
	LoopInfo *l = NULL;
	size_t n = 99;

	ok(mkdir(subdir, 0700) == 0, "empty subdirectory");
	is_int(loop_attach(file, NULL, &a), 0, "attach once");
	is_int(loop_attach(file, NULL, &b), 0, "attach twice: always a new device");
	if (!a || !b)
		return;
	ok(strcmp(a, b) != 0, "two devices (%s, %s)", a, b);
	unsigned na = (unsigned)atoi(a + 9), nb = (unsigned)atoi(b + 9);
	is_int(loop_find(file, &found), 0, "find");
	is_str(found, na < nb ? a : b, "the lowest-numbered one");

	is_int(loop_list_for_dir(scratch, &l, &n), 0, "list below the temp dir");
	is_int(n, 2, "both listed");
	if (n == 2) {
		ok(l[0].number < l[1].number, "ordered by number");
		ok(strstr(l[0].backing_file, "/dup.img") && strstr(l[1].backing_file, "/dup.img"),
		   "backing files named");
	}
	loop_info_array_free(l, n);
	is_int(loop_list_for_dir(subdir, &l, &n), 0, "list below an empty dir");
	is_int(n, 0, "none there");
	ok(l == NULL, "NULL array");
	is_int(loop_list_for_dir("/nonexistent-dir", &l, &n), -ENOENT, "missing dir: -ENOENT");

	is_int(loop_detach_file(file), 2, "detach_file detaches both");
	is_int(loop_find(file, &found), -ENOENT, "none left");
	is_int(loop_detach_file(file), 0, "detach_file again: 0");
}

static void test_deleted_backing(void)
{
	_cleanup_free_ char *file = scratch_file("deleted.img", 8 * MiB);
	_cleanup_free_ char *dev = NULL, *found = NULL;
	LoopInfo *l = NULL;
	size_t n = 0;

	is_int(loop_attach(file, NULL, &dev), 0, "attach");
	if (!dev)
		return;
	ok(unlink(file) == 0, "backing file unlinked");
	is_int(loop_list_for_dir(scratch, &l, &n), 0, "list");
	is_int(n, 1, "the leaked device is listed");
	if (n == 1) {
		ok(l[0].deleted, "marked deleted (%s)", l[0].backing_file);
		is_str(l[0].devpath, dev, "its device");
	}
	loop_info_array_free(l, n);
	/* A new file at the same path is another file. */
	free(scratch_file("deleted.img", MiB));
	is_int(loop_find(file, &found), -ENOENT, "a new file at the old path does not match");
	is_int(loop_detach(dev), 0, "detach the leak");
}

static void test_missing_node(void)
{
	_cleanup_free_ char *file = scratch_file("node.img", 8 * MiB);
	_cleanup_free_ char *dev = NULL;
	uint64_t size;

	/* Take the node of the device GET_FREE will hand out away, as in a container whose
	 * /dev was populated before the kernel made more loop devices. */
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	int n = ctl >= 0 ? ioctl(ctl, LOOP_CTL_GET_FREE) : -1;
	if (ctl >= 0)
		close(ctl);
	ok(n >= 0, "a free device: loop%d", n);
	if (n < 0)
		return;
	_cleanup_free_ char *node = xasprintf("/dev/loop%d", n);
	(void)unlink(node);
	ok(!node_is_blockdev(node), "%s removed", node);
	is_int(loop_attach(file, NULL, &dev), 0, "attach without the node");
	if (!dev)
		return;
	ok(node_is_blockdev(dev), "node %s exists", dev);
	ok(node_is_blockdev(node), "node %s recreated", node);
	is_int(loop_get_size(dev, &size), 0, "usable");
	is_int(size, 8 * MiB, "size");
	is_int(loop_detach(dev), 0, "detach");
}

static void test_concurrent_attach(void)
{
	AttachJob jobs[4] = {};
	pthread_t th[4];
	char *files[4];
	int good = 0;

	/* Racing attaches: each must get its own device (EBUSY from a lost race is retried). */
	for (int i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof(name), "race%d.img", i);
		jobs[i].file = files[i] = scratch_file(name, 4 * MiB);
		pthread_create(&th[i], NULL, attach_thread, &jobs[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 3; k++)
			good += jobs[i].r[k] == 0;
	is_int(good, 12, "12 racing attaches succeed");
	bool distinct = true;
	for (int i = 0; i < 12; i++)
		for (int k = i + 1; k < 12; k++) {
			const char *x = jobs[i / 3].dev[i % 3], *y = jobs[k / 3].dev[k % 3];
			if (x && y && strcmp(x, y) == 0)
				distinct = false;
		}
	ok(distinct, "all on distinct devices");
	int detached = 0;
	for (int i = 0; i < 4; i++) {
		int r = loop_detach_file(files[i]);
		detached += r > 0 ? r : 0;
		for (int k = 0; k < 3; k++)
			free(jobs[i].dev[k]);
		free(files[i]);
	}
	is_int(detached, 12, "all detached");
}

/* The bytes a file really holds on disk. */
static uint64_t allocated(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* Pages of path in the page cache (mincore over a mapping of it). */
static size_t cached_pages(const char *path, uint64_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (size + page - 1) / page, count = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *map = fd >= 0 ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	_cleanup_free_ unsigned char *vec = xmalloc(n);

	if (map != MAP_FAILED && mincore(map, size, vec) == 0)
		for (size_t i = 0; i < n; i++)
			count += vec[i] & 1;
	if (map != MAP_FAILED)
		munmap(map, size);
	if (fd >= 0)
		close(fd);
	return count;
}

/* Writes size bytes at offset 0 of dev with O_DIRECT; 0 or -errno. */
static int write_direct(const char *dev, uint64_t size)
{
	void *buf = NULL;
	int r = 0;

	if (posix_memalign(&buf, 4096, MiB) != 0)
		return -ENOMEM;
	memset(buf, 0xa5, MiB);
	int fd = open(dev, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		r = -errno;
	for (uint64_t off = 0; r == 0 && off < size; off += MiB)
		if (pwrite(fd, buf, MiB, (off_t)off) != (ssize_t)MiB)
			r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

static int discard(const char *dev, uint64_t size)
{
	uint64_t range[2] = {0, size};
	int fd = open(dev, O_WRONLY | O_CLOEXEC);
	int r = fd < 0 || ioctl(fd, BLKDISCARD, range) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	return r;
}

static void test_direct_io(void)
{
	_cleanup_free_ char *file = scratch_file("dio.img", 64 * MiB);
	_cleanup_free_ char *dev = NULL, *buffered = NULL;
	struct statfs sf;
	uint32_t bs = 0;
	LoopInfo info;
	int ssz = 0;

	is_int(loop_block_size_for(file, &bs), 0, "the block size for a file here");
	ok(statfs(file, &sf) == 0, "statfs");
	is_int(bs, MIN((uint32_t)sf.f_bsize, 4096u), "its filesystem's block size, at most 4096");
	is_int(loop_attach(file, &(LoopAttach){.direct_io = true, .block_size = bs}, &dev), 0,
	       "attach with direct I/O, %u-byte blocks", bs);
	if (!dev)
		return;
	is_int(loop_get_info(dev, &info), 0, "info");
	ok(info.direct_io, "sysfs says direct I/O");
	is_int(info.block_size, bs, "sysfs says %u-byte blocks", bs);
	loop_info_done(&info);
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && ioctl(fd, BLKSSZGET, &ssz) < 0)
		ssz = -errno;
	is_int(ssz, bs, "BLKSSZGET says so too");
	if (fd >= 0)
		close(fd);

	/* What a user of the device sees: data written through it is not cached a second time
	 * as the file's pages, and a discard gives the space back to the file's filesystem. */
	is_int(write_direct(dev, 16 * MiB), 0, "16 MiB written with O_DIRECT");
	size_t pages = cached_pages(file, 64 * MiB);
	ok(pages < 16, "the backing file's pages are not cached (%zu pages)", pages);
	ok(allocated(file) >= 16 * MiB, "the file holds them: %llu bytes",
	   (unsigned long long)allocated(file));
	is_int(discard(dev, 16 * MiB), 0, "BLKDISCARD");
	ok(allocated(file) < MiB, "holes punched: the file holds %llu bytes",
	   (unsigned long long)allocated(file));
	is_int(loop_detach(dev), 0, "detach");

	/* The same without direct I/O: the file's pages fill the page cache. */
	is_int(loop_attach(file, NULL, &buffered), 0, "attach buffered");
	if (!buffered)
		return;
	is_int(write_direct(buffered, 16 * MiB), 0, "16 MiB written with O_DIRECT");
	pages = cached_pages(file, 64 * MiB);
	ok(pages >= 16 * MiB / 4096, "buffered: the backing file's pages are cached (%zu)", pages);
	is_int(loop_detach(buffered), 0, "detach");
}

/* ramfs takes no direct I/O and no hole punching: the device works buffered, and says so. */
static void test_direct_io_refused(void)
{
	_cleanup_free_ char *dir = scratch_mkdir("ramfs");
	_cleanup_free_ char *dev = NULL, *odd = NULL;
	LoopInfo info;

	if (mount("ramfs", dir, "ramfs", 0, NULL) < 0) {
		ok(false, "mount ramfs: %s", strerror(errno));
		return;
	}
	_cleanup_free_ char *file = scratch_file("ramfs/vol.img", 8 * MiB);
	is_int(loop_attach(file, &(LoopAttach){.direct_io = true, .block_size = 4096}, &dev), 0,
	       "attach over ramfs asking for direct I/O");
	if (dev) {
		is_int(loop_get_info(dev, &info), 0, "info");
		ok(!info.direct_io, "sysfs says buffered: the fallback is the kernel's, and known");
		is_int(info.block_size, 4096, "the block size as asked");
		loop_info_done(&info);
		is_int(write_direct(dev, 4 * MiB), 0, "the device works");
		is_int(discard(dev, 4 * MiB), -EOPNOTSUPP, "no discard: -EOPNOTSUPP");
		is_int(loop_detach(dev), 0, "detach");
	}

	/* A block size the kernel refuses: attached with 512-byte blocks all the same. */
	is_int(loop_attach(file, &(LoopAttach){.block_size = 3000}, &odd), 0,
	       "attach with a block size of 3000");
	if (odd) {
		is_int(loop_get_info(odd, &info), 0, "info");
		is_int(info.block_size, 512, "512-byte blocks");
		loop_info_done(&info);
		is_int(loop_detach(odd), 0, "detach");
	}
	ok(umount2(dir, 0) == 0, "unmount ramfs");
}

static void test_bad_input(void)
{
	char *dev = NULL;

	is_int(loop_attach(scratch, NULL, &dev), -EINVAL, "a directory cannot back a device");
	is_int(loop_attach("/nonexistent/f", NULL, &dev), -ENOENT, "missing file");

	/* A symlink is never followed to its file; an fd opened as the caller must is taken. */
	_cleanup_free_ char *target = scratch_file("target.img", MiB);
	_cleanup_free_ char *link = scratch_path("link.img");
	ok(symlink(target, link) == 0, "a symlink to a file");
	is_int(loop_attach(link, NULL, &dev), -ELOOP, "attach through a symlink: -ELOOP");
	is_int(loop_find(target, &dev), -ENOENT, "nothing attached to its target");
	_cleanup_close_ int fd = open(target, O_RDWR | O_CLOEXEC);
	is_int(loop_attach_fd(fd, target, NULL, &dev), 0, "attach through an fd");
	_cleanup_close_ int path_fd = open(target, O_PATH | O_CLOEXEC);
	char *found = NULL;
	is_int(loop_find_fd(path_fd, &found), 0, "found through an O_PATH fd");
	is_str(found, dev, "the device attached");
	uint32_t bs = 0;
	is_int(loop_block_size_for_fd(path_fd, &bs), 0, "block size through an fd");
	ok(bs >= 512 && bs <= 4096, "%u bytes", bs);
	is_int(loop_detach(dev), 0, "detached");
	free(found);
	free(dev);
	dev = NULL;
	is_int(loop_detach("/dev/sda"), -EINVAL, "not a loop device path");
	is_int(loop_detach("/dev/loop1x"), -EINVAL, "junk after the number");
	is_int(loop_detach("/dev/loop999999"), 0, "a device that does not exist is detached");
}

/* loop_find_fd_sized() asks only the devices /proc/partitions lists: one over a file of some
 * sectors is found as by the full scan; one over a file under a sector has no capacity, exposes
 * no byte of it, and only the full scan finds it. */
static void test_find_sized(void)
{
	_cleanup_free_ char *file = scratch_file("sized.img", MiB);
	_cleanup_free_ char *tiny = scratch_file("tiny.img", 100);
	_cleanup_free_ char *dev = NULL, *tiny_dev = NULL;
	char *found = NULL;

	_cleanup_close_ int fd = open(file, O_PATH | O_CLOEXEC);
	_cleanup_close_ int tiny_fd = open(tiny, O_PATH | O_CLOEXEC);
	is_int(loop_find_fd_sized(fd, &found), -ENOENT, "nothing attached: -ENOENT");
	is_int(loop_attach(file, NULL, &dev), 0, "attached");
	is_int(loop_find_fd_sized(fd, &found), 0, "found among the devices with a size");
	is_str(found, dev, "the device attached");
	free(found);
	found = NULL;

	is_int(loop_attach(tiny, NULL, &tiny_dev), 0, "a file of 100 bytes attached");
	is_int(loop_find_fd(tiny_fd, &found), 0, "the full scan finds it");
	is_str(found, tiny_dev, "the device attached");
	free(found);
	found = NULL;
	is_int(loop_find_fd_sized(tiny_fd, &found), -ENOENT, "no sector of it exposed: not found");
	is_int(loop_detach(tiny_dev), 0, "detached");
	is_int(loop_detach(dev), 0, "detached");
	is_int(loop_find_fd_sized(fd, &found), -ENOENT, "gone once detached");
	is_int(loop_find_fd_sized(-EBADF, &found), -EINVAL, "a bad fd: -EINVAL");
}

/* The kernel's I/O counters: parsed field by field, and moved by writes through the device. */
static void test_stat(void)
{
	LoopStat st;

	is_int(loop_stat_parse(
		       "     12        3      456        7       89       10     1112       13"
		       "        2       14       20        0        0        0        0\n",
		       &st),
	       0, "a stat line with discards");
	ok(st.reads == 12 && st.read_sectors == 456 && st.read_ms == 7 && st.writes == 89 &&
		   st.write_sectors == 1112 && st.write_ms == 13 && st.in_flight == 2 &&
		   st.io_ms == 14,
	   "its fields: reads, sectors read, ms reading, writes, sectors written, ms writing, in "
	   "flight, busy ms");
	is_int(loop_stat_parse("1 2 3 4 5 6 7 8 9 10 11", &st), 0, "the 11 fields of old kernels");
	is_int(loop_stat_parse("1 2 3 4 5 6 7 8 9 10", &st), -EBADMSG, "10 fields: refused");
	is_int(loop_stat_parse("1 2 3 x 5 6 7 8 9 10 11", &st), -EBADMSG, "not a number: refused");
	is_int(loop_stat_parse("", &st), -EBADMSG, "empty: refused");
	is_int(loop_get_stat(999999, &st), -ENOENT, "no such device");

	_cleanup_free_ char *file = scratch_file("stat.img", 4 * MiB);
	char *dev = NULL;
	LoopStat before, after;
	unsigned n;
	is_int(loop_attach(file, NULL, &dev), 0, "attached");
	ok(sscanf(dev, "/dev/loop%u", &n) == 1, "its number");
	is_int(loop_get_stat(n, &before), 0, "its counters");
	void *buf = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(buf, 0x5a, MiB);
	int fd = open(dev, O_RDWR | O_DIRECT | O_CLOEXEC);
	ok(fd >= 0 && pwrite(fd, buf, MiB, 0) == (ssize_t)MiB &&
		   pread(fd, buf, MiB, MiB) == (ssize_t)MiB,
	   "1 MiB written and 1 MiB read with O_DIRECT");
	close(fd);
	munmap(buf, MiB);
	is_int(loop_get_stat(n, &after), 0, "its counters again");
	ok(after.write_sectors - before.write_sectors >= MiB / 512 && after.writes > before.writes,
	   "sectors written moved by %llu",
	   (unsigned long long)(after.write_sectors - before.write_sectors));
	ok(after.read_sectors - before.read_sectors >= MiB / 512 && after.reads > before.reads,
	   "sectors read moved by %llu",
	   (unsigned long long)(after.read_sectors - before.read_sectors));
	is_int(loop_detach(dev), 0, "detached");
	free(dev);
}

int main(void)
{
	LoopInfo *l;
	size_t n;

	if (geteuid() != 0)
		TAP_SKIP_ALL("needs root for loop devices");
	if (access("/dev/loop-control", F_OK) < 0)
		TAP_SKIP_ALL("no /dev/loop-control");
	scratch_init("loopdev");
	scratch_release = release_held;

	test_attach_find_detach();
	test_read_only();
	test_list_and_duplicates();
	test_deleted_backing();
	test_missing_node();
	test_concurrent_attach();
	test_direct_io();
	test_direct_io_refused();
	test_bad_input();
	test_find_sized();
	test_stat();

	is_int(loop_list_for_dir(scratch, &l, &n), 0, "final list");
	is_int(n, 0, "no loop device leaked");
	loop_info_array_free(l, n);
	return tap_done();
}
