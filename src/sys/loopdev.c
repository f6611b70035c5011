/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "alloc.h"
#include "fileio.h"
#include "log.h"
#include "loopdev.h"
#include "time-util.h"

#define ATTACH_ATTEMPTS 64
/* How long loop_detach() lets transient openers (udev's blkid) go before giving up. */
#define DETACH_ATTEMPTS 20
#define DETACH_RETRY_USEC (50 * USEC_PER_MSEC)
/* How long loop_detach() waits for sysfs to show the device unbound. */
#define UNBIND_WAIT_USEC (5 * USEC_PER_SEC)
#define LOOP_CONTROL "/dev/loop-control"
#define LOOP_CONTROL_MAJOR 10
#define LOOP_CONTROL_MINOR 237
#define DELETED_SUFFIX " (deleted)"
#define SECTOR_SIZE 512
/* More of /proc/partitions than this: scan sysfs instead. */
#define PARTITIONS_MAX (4 * 1024 * 1024)
/* What filesystems made on a device use at most: a larger logical block size would refuse
 * them (ext4 and xfs blocks are at most the page size). */
#define BLOCK_SIZE_MAX 4096

static void sleep_usec(usec_t u)
{
	struct timespec ts = {.tv_sec = (time_t)(u / USEC_PER_SEC),
			      .tv_nsec = (long)((u % USEC_PER_SEC) * NSEC_PER_USEC)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* "loop12" -> 12; digits only, no sign, no leading junk. */
static int parse_loop_name(const char *name, unsigned *ret)
{
	if (strncmp(name, "loop", 4) != 0)
		return -EINVAL;
	const char *p = name + 4;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	unsigned long n = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		n = n * 10 + (unsigned long)(*p - '0');
		if (n > INT_MAX)
			return -EINVAL;
	}
	*ret = (unsigned)n;
	return 0;
}

static int parse_loop_devpath(const char *devpath, unsigned *ret)
{
	if (!devpath || strncmp(devpath, "/dev/", 5) != 0)
		return -EINVAL;
	return parse_loop_name(devpath + 5, ret);
}

/* Reads a sysfs attribute of loopN and strips the trailing newline. */
static int sysfs_read(unsigned n, const char *attr, char **ret)
{
	char path[128];
	char *s;
	size_t len;

	snprintf(path, sizeof(path), "/sys/block/loop%u/%s", n, attr);
	int r = read_file_at(AT_FDCWD, path, 2 * PATH_MAX, &s, &len);
	if (r < 0)
		return r;
	while (len > 0 && s[len - 1] == '\n')
		s[--len] = 0;
	*ret = s;
	return 0;
}

static int sysfs_read_u64(unsigned n, const char *attr, uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	char *end;

	int r = sysfs_read(n, attr, &s);
	if (r < 0)
		return r;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int loop_stat_parse(const char *text, LoopStat *ret)
{
	uint64_t v[11];
	const char *p = text;

	for (size_t i = 0; i < ELEMENTSOF(v); i++) {
		char *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			return -EBADMSG;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (errno != 0)
			return -EBADMSG;
		p = end;
	}
	/* Fields 5..8 are the writes; 2 and 6 the merges, 11 the weighted time: not kept. */
	*ret = (LoopStat){
		.reads = v[0],
		.read_sectors = v[2],
		.read_ms = v[3],
		.writes = v[4],
		.write_sectors = v[6],
		.write_ms = v[7],
		.in_flight = v[8],
		.io_ms = v[9],
	};
	return 0;
}

int loop_get_stat(unsigned number, LoopStat *ret)
{
	_cleanup_free_ char *s = NULL;

	int r = sysfs_read(number, "stat", &s);
	return r < 0 ? r : loop_stat_parse(s, ret);
}

static int sysfs_devno(unsigned n, dev_t *ret)
{
	_cleanup_free_ char *s = NULL;
	unsigned maj, min;
	char c;

	int r = sysfs_read(n, "dev", &s);
	if (r < 0)
		return r == -ENOENT ? -ENXIO : r;
	if (sscanf(s, "%u:%u%c", &maj, &min, &c) != 2)
		return -EBADMSG;
	*ret = makedev(maj, min);
	return 0;
}

/* Makes sure path is a device node with devno, creating it when missing (containers often
 * have a static /dev without the loop nodes the kernel made later). */
static int ensure_node(const char *path, mode_t type, dev_t devno)
{
	struct stat st;

	if (stat(path, &st) == 0) {
		if ((st.st_mode & S_IFMT) != type || st.st_rdev != devno)
			return log_debug_errno(-ENOTBLK, "%s exists but is not device %u:%u", path,
					       major(devno), minor(devno));
		return 0;
	}
	if (errno != ENOENT)
		return negative_errno();
	if (mknod(path, type | 0600, devno) < 0 && errno != EEXIST)
		return log_debug_errno(negative_errno(), "mknod %s: %m", path);
	log_debug("created missing device node %s", path);
	return 0;
}

/* Opens /dev/loopN, creating the node if needed. -ENXIO when the device does not exist. */
static int loop_open(unsigned n, int flags, int *ret_fd)
{
	char path[64];
	dev_t devno;

	snprintf(path, sizeof(path), "/dev/loop%u", n);
	int r = sysfs_devno(n, &devno);
	if (r < 0)
		return r;
	r = ensure_node(path, S_IFBLK, devno);
	if (r < 0)
		return r;
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENXIO : negative_errno();
	*ret_fd = fd;
	return 0;
}

void loop_info_done(LoopInfo *info)
{
	if (!info)
		return;
	free(info->devpath);
	free(info->backing_file);
	*info = (LoopInfo){};
}

void loop_info_array_free(LoopInfo *infos, size_t n)
{
	for (size_t i = 0; i < n; i++)
		loop_info_done(&infos[i]);
	free(infos);
}

static int loop_get_info_by_number(unsigned n, LoopInfo *ret)
{
	LoopInfo info = {.number = n};
	uint64_t v;
	int r;

	r = sysfs_read(n, "loop/backing_file", &info.backing_file);
	if (r < 0)
		return r == -ENOENT ? -ENXIO : r;
	size_t len = strlen(info.backing_file), slen = strlen(DELETED_SUFFIX);
	info.deleted = len > slen && strcmp(info.backing_file + len - slen, DELETED_SUFFIX) == 0;
	if ((r = sysfs_devno(n, &info.devno)) < 0 || (r = sysfs_read_u64(n, "ro", &v)) < 0)
		goto fail;
	info.read_only = v != 0;
	if ((r = sysfs_read_u64(n, "loop/autoclear", &v)) < 0)
		goto fail;
	info.autoclear = v != 0;
	if ((r = sysfs_read_u64(n, "loop/offset", &info.offset)) < 0 ||
	    (r = sysfs_read_u64(n, "loop/sizelimit", &info.size_limit)) < 0 ||
	    (r = sysfs_read_u64(n, "queue/logical_block_size", &v)) < 0)
		goto fail;
	info.block_size = (uint32_t)v;
	/* loop/dio is missing before Linux 4.4, which had no direct I/O for loop devices. */
	r = sysfs_read_u64(n, "loop/dio", &v);
	if (r < 0 && r != -ENOENT)
		goto fail;
	info.direct_io = r == 0 && v != 0;
	info.devpath = xasprintf("/dev/loop%u", n);
	*ret = info;
	return 0;
fail:
	loop_info_done(&info);
	return r == -ENOENT ? -ENXIO : r; /* detached while we read */
}

int loop_get_info(const char *devpath, LoopInfo *ret)
{
	unsigned n;

	int r = parse_loop_devpath(devpath, &n);
	if (r < 0)
		return r;
	return loop_get_info_by_number(n, ret);
}

/* Kernels before 5.8 have no LOOP_CONFIGURE: bind, then set what was asked for one ioctl at a
 * time, each allowed to fail (the device then stays buffered, or at 512-byte blocks).
 * Read-only follows from file_fd's open mode. */
static int configure_by_steps(int loop_fd, int file_fd, const struct loop_config *config)
{
	if (ioctl(loop_fd, LOOP_SET_FD, file_fd) < 0)
		return negative_errno();
	struct loop_info64 info = config->info;
	info.lo_flags = 0;
	if (ioctl(loop_fd, LOOP_SET_STATUS64, &info) < 0) {
		int r = negative_errno();
		(void)ioctl(loop_fd, LOOP_CLR_FD, 0);
		return r;
	}
	if (config->block_size && ioctl(loop_fd, LOOP_SET_BLOCK_SIZE, config->block_size) < 0)
		log_debug("LOOP_SET_BLOCK_SIZE %u refused: %m", config->block_size);
	if ((config->info.lo_flags & LO_FLAGS_DIRECT_IO) &&
	    ioctl(loop_fd, LOOP_SET_DIRECT_IO, 1UL) < 0)
		log_debug("LOOP_SET_DIRECT_IO refused: %m");
	return 0;
}

static int configure(int loop_fd, int file_fd, const LoopAttach *how, const char *name)
{
	struct loop_config config = {
		.fd = (__u32)file_fd,
		.block_size = how->block_size,
		.info.lo_flags = (how->read_only ? LO_FLAGS_READ_ONLY : 0) |
				 (how->direct_io ? LO_FLAGS_DIRECT_IO : 0),
	};
	/* The name is informational (losetup -a shows it); sysfs has the real path. */
	memcpy(config.info.lo_file_name, name, MIN(strlen(name), (size_t)LO_NAME_SIZE - 1));

	if (ioctl(loop_fd, LOOP_CONFIGURE, &config) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOTTY)
		return negative_errno();
	/* EINVAL: no LOOP_CONFIGURE (before 5.8), or a block size this kernel refuses. */
	log_debug("LOOP_CONFIGURE refused (%m), binding step by step");
	return configure_by_steps(loop_fd, file_fd, &config);
}

static int open_loop_control(int *ret_fd)
{
	int fd = open(LOOP_CONTROL, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		int r = ensure_node(LOOP_CONTROL, S_IFCHR,
				    makedev(LOOP_CONTROL_MAJOR, LOOP_CONTROL_MINOR));
		if (r < 0)
			return r;
		fd = open(LOOP_CONTROL, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0)
		return negative_errno();
	*ret_fd = fd;
	return 0;
}

int loop_attach(const char *backing_file, const LoopAttach *how, char **ret_devpath)
{
	static const LoopAttach defaults = {};

	if (!backing_file || !ret_devpath)
		return -EINVAL;
	how = how ?: &defaults;
	_cleanup_close_ int file_fd =
		open(backing_file,
		     (how->read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (file_fd < 0)
		return errno == EISDIR ? -EINVAL : negative_errno();
	return loop_attach_fd(file_fd, backing_file, how, ret_devpath);
}

int loop_attach_fd(int file_fd, const char *name, const LoopAttach *how, char **ret_devpath)
{
	static const LoopAttach defaults = {};
	struct stat st;
	int r;

	if (file_fd < 0 || !name || !ret_devpath)
		return -EINVAL;
	how = how ?: &defaults;
	if (fstat(file_fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	const char *backing_file = name;

	_cleanup_close_ int ctl_fd = -EBADF;
	r = open_loop_control(&ctl_fd);
	if (r < 0)
		return log_debug_errno(r, "cannot open " LOOP_CONTROL ": %m");

	for (unsigned attempt = 0; attempt < ATTACH_ATTEMPTS; attempt++) {
		int n = ioctl(ctl_fd, LOOP_CTL_GET_FREE);
		if (n < 0)
			return log_debug_errno(negative_errno(), "LOOP_CTL_GET_FREE: %m");

		_cleanup_close_ int loop_fd = -EBADF;
		r = loop_open((unsigned)n, O_RDWR, &loop_fd);
		if (r == -ENXIO)
			continue; /* removed under us */
		if (r < 0)
			return r;
		r = configure(loop_fd, file_fd, how, backing_file);
		if (r == -EBUSY) {
			/* Another process bound it between GET_FREE and now: ask again. */
			log_debug("loop%d taken by someone else, retrying", n);
			continue;
		}
		if (r < 0)
			return log_debug_errno(r, "attaching %s to loop%d: %m", backing_file, n);
		log_debug("attached %s to /dev/loop%d%s", backing_file, n,
			  how->read_only ? " (read-only)" : "");
		*ret_devpath = xasprintf("/dev/loop%d", n);
		return 0;
	}
	return -EBUSY;
}

int loop_block_size_for(const char *backing_file, uint32_t *ret)
{
	_cleanup_close_ int fd = open(backing_file, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return loop_block_size_for_fd(fd, ret);
}

int loop_block_size_for_fd(int file_fd, uint32_t *ret)
{
	struct statfs sf;
	struct statx sx;

	if (fstatfs(file_fd, &sf) < 0)
		return negative_errno();
	uint32_t size =
		sf.f_bsize > 0 ? (uint32_t)MIN((uint64_t)sf.f_bsize, BLOCK_SIZE_MAX) : SECTOR_SIZE;
	if (statx(file_fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align > size)
		size = sx.stx_dio_offset_align;
	/* A power of two in 512..4096: anything else is a filesystem we do not understand. */
	if (size < SECTOR_SIZE || size > BLOCK_SIZE_MAX || (size & (size - 1)))
		size = SECTOR_SIZE;
	*ret = size;
	return 0;
}

/* Whether loopN is bound to the file with st_dev/st_ino of *want. */
static bool loop_matches(unsigned n, const struct stat *want)
{
	_cleanup_free_ char *path = NULL;
	struct stat st;

	if (sysfs_read(n, "loop/backing_file", &path) < 0)
		return false; /* not bound */
	size_t len = strlen(path), slen = strlen(DELETED_SUFFIX);
	if (len > slen && strcmp(path + len - slen, DELETED_SUFFIX) == 0)
		return false; /* an unlinked file cannot be the one we stat'ed */
	if (stat(path, &st) == 0)
		return st.st_dev == want->st_dev && st.st_ino == want->st_ino;

	/* The kernel's path does not resolve here (attached through a mount we do not see):
	 * ask the device for the backing inode instead. */
	_cleanup_close_ int fd = -EBADF;
	struct loop_info64 info;
	if (loop_open(n, O_RDONLY, &fd) < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
		return false;
	return info.lo_device == (__u64)want->st_dev && info.lo_inode == (__u64)want->st_ino;
}

/* Calls f(n, userdata) for each loop device in sysfs; stops when f returns non-zero. */
static int foreach_loop(int (*f)(unsigned n, void *userdata), void *userdata)
{
	_cleanup_closedir_ DIR *d = opendir("/sys/block");
	if (!d)
		return negative_errno();
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		unsigned n;
		if (parse_loop_name(de->d_name, &n) < 0)
			continue;
		int r = f(n, userdata);
		if (r != 0)
			return r;
	}
	return errno > 0 ? -errno : 0;
}

/* Reads /proc/partitions whole into *ret (NUL-terminated). -EOPNOTSUPP when the file there is
 * not procfs's (a container's stand-in would not be the kernel's word) or is too large. */
static int read_partitions(char **ret)
{
	_cleanup_close_ int fd = open("/proc/partitions", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	struct statfs sfs;

	if (fd < 0)
		return negative_errno();
	if (fstatfs(fd, &sfs) < 0)
		return negative_errno();
	if (sfs.f_type != PROC_SUPER_MAGIC)
		return -EOPNOTSUPP;
	for (;;) {
		if (len + 4096 + 1 > PARTITIONS_MAX)
			return -EOPNOTSUPP;
		buf = xgrow(buf, &cap, len + 4096 + 1, 1);
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	return 0;
}

/* Calls f(n, userdata) for each loop device with a capacity, as foreach_loop() does for all: the
 * kernel lists in /proc/partitions only the block devices of at least one sector (its
 * show_partition() has skipped empty disks since Linux 2.6), and an unbound loop device has
 * none, so one read replaces an open per loop device. A device bound with capacity 0 (a file
 * under a sector, an offset at its end) is not visited: it exposes no byte of its file. A bind
 * made while we read is missed as the sysfs scan misses one made behind it. -EOPNOTSUPP when
 * the file cannot be trusted (read_partitions()). */
static int foreach_sized_loop(int (*f)(unsigned n, void *userdata), void *userdata)
{
	_cleanup_free_ char *text = NULL;

	int r = read_partitions(&text);
	if (r < 0)
		return r;
	/* "major minor  #blocks  name" a line, after a heading and a blank line. */
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *name = strrchr(line, ' ');
		unsigned n;
		if (!name || parse_loop_name(name + 1, &n) < 0)
			continue;
		r = f(n, userdata);
		if (r != 0)
			return r;
	}
	return 0;
}

typedef struct FindState {
	struct stat want;
	bool found;
	unsigned lowest;
} FindState;

static int find_one(unsigned n, void *userdata)
{
	FindState *s = userdata;

	if ((!s->found || n < s->lowest) && loop_matches(n, &s->want)) {
		s->found = true;
		s->lowest = n;
	}
	return 0;
}

static int find_stat(FindState *s, bool sized, char **ret_devpath)
{
	int r = -EOPNOTSUPP;

	if (!S_ISREG(s->want.st_mode))
		return -ENOENT;
	if (sized)
		r = foreach_sized_loop(find_one, s);
	if (r < 0) /* not asked, or no /proc/partitions to trust: visit every loop device */
		r = foreach_loop(find_one, s);
	if (r < 0)
		return r;
	if (!s->found)
		return -ENOENT;
	*ret_devpath = xasprintf("/dev/loop%u", s->lowest);
	return 0;
}

int loop_find(const char *backing_file, char **ret_devpath)
{
	FindState s = {};

	if (!backing_file || !ret_devpath)
		return -EINVAL;
	if (stat(backing_file, &s.want) < 0)
		return negative_errno();
	return find_stat(&s, false, ret_devpath);
}

static int find_fd(int file_fd, bool sized, char **ret_devpath)
{
	FindState s = {};

	if (file_fd < 0 || !ret_devpath)
		return -EINVAL;
	if (fstat(file_fd, &s.want) < 0)
		return negative_errno();
	return find_stat(&s, sized, ret_devpath);
}

int loop_find_fd(int file_fd, char **ret_devpath)
{
	return find_fd(file_fd, false, ret_devpath);
}

int loop_find_fd_sized(int file_fd, char **ret_devpath)
{
	return find_fd(file_fd, true, ret_devpath);
}

/* Waits until loopN no longer shows the binding it had (old_backing). */
static int wait_unbound(unsigned n, const char *old_backing)
{
	usec_t until = now_usec(CLOCK_MONOTONIC) + UNBIND_WAIT_USEC;

	for (;;) {
		_cleanup_free_ char *cur = NULL;
		if (sysfs_read(n, "loop/backing_file", &cur) < 0 || strcmp(cur, old_backing) != 0)
			return 0;
		if (now_usec(CLOCK_MONOTONIC) >= until)
			return log_debug_errno(-ETIMEDOUT, "loop%u still bound after detach", n);
		sleep_usec(10 * USEC_PER_MSEC);
	}
}

/* One detach attempt. 0: detached; -EAGAIN: others had it open, left as it was. */
static int detach_once(unsigned n)
{
	struct loop_info64 before, after;
	_cleanup_close_ int fd = -EBADF;

	/* O_EXCL fails with EBUSY while the device is mounted or claimed by a holder; such a
	 * device must not get the kernel's deferred detach. */
	int r = loop_open(n, O_RDONLY | O_EXCL, &fd);
	if (r == -ENXIO)
		return 0;
	if (r == -EBUSY)
		return -EAGAIN;
	if (r < 0)
		return r;
	if (ioctl(fd, LOOP_GET_STATUS64, &before) < 0)
		return errno == ENXIO ? 0 : negative_errno();
	if (ioctl(fd, LOOP_CLR_FD, 0) < 0)
		return errno == ENXIO ? 0 : negative_errno();
	if (ioctl(fd, LOOP_GET_STATUS64, &after) < 0) {
		/* ENXIO: we were the only opener, the device is running down and is released
		 * when we close it. */
		return errno == ENXIO ? 0 : negative_errno();
	}
	/* Still bound: someone else has it open and the kernel turned LOOP_CLR_FD into
	 * autoclear. Put the flag back as it was. */
	if (!(before.lo_flags & LO_FLAGS_AUTOCLEAR)) {
		after.lo_flags &= ~LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_SET_STATUS64, &after) < 0)
			return log_debug_errno(negative_errno(),
					       "loop%u: cannot undo deferred detach: %m", n);
	}
	return -EAGAIN;
}

int loop_detach(const char *devpath)
{
	unsigned n;

	int r = parse_loop_devpath(devpath, &n);
	if (r < 0)
		return r;
	for (unsigned attempt = 0;; attempt++) {
		_cleanup_free_ char *backing = NULL;
		r = sysfs_read(n, "loop/backing_file", &backing);
		if (r == -ENOENT)
			return 0; /* not bound, or no such device */
		if (r < 0)
			return r;
		r = detach_once(n);
		if (r == 0) {
			log_debug("detached %s (%s)", devpath, backing);
			return wait_unbound(n, backing);
		}
		if (r != -EAGAIN)
			return r;
		if (attempt + 1 >= DETACH_ATTEMPTS)
			return log_debug_errno(-EBUSY, "%s is in use", devpath);
		sleep_usec(DETACH_RETRY_USEC);
	}
}

int loop_detach_file(const char *backing_file)
{
	int count = 0;

	for (;;) {
		_cleanup_free_ char *dev = NULL;
		int r = loop_find(backing_file, &dev);
		if (r == -ENOENT)
			return count;
		if (r < 0)
			return r;
		r = loop_detach(dev);
		if (r < 0)
			return r;
		if (++count > 4096)
			return -ELOOP; /* never stops detaching: something re-attaches it */
	}
}

int loop_refresh_size(const char *devpath)
{
	_cleanup_close_ int fd = -EBADF;
	unsigned n;

	int r = parse_loop_devpath(devpath, &n);
	if (r < 0)
		return r;
	r = loop_open(n, O_RDONLY, &fd);
	if (r < 0)
		return r;
	if (ioctl(fd, LOOP_SET_CAPACITY, 0) < 0)
		return negative_errno();
	return 0;
}

int loop_get_size(const char *devpath, uint64_t *ret)
{
	_cleanup_close_ int fd = -EBADF;
	uint64_t size;
	unsigned n;

	int r = parse_loop_devpath(devpath, &n);
	if (r < 0)
		return r;
	r = loop_open(n, O_RDONLY, &fd);
	if (r < 0)
		return r;
	if (ioctl(fd, BLKGETSIZE64, &size) < 0)
		return negative_errno();
	*ret = size;
	return 0;
}

typedef struct ListState {
	const char *prefix;
	LoopInfo *infos;
	size_t n, cap;
} ListState;

static int list_one(unsigned n, void *userdata)
{
	ListState *s = userdata;
	LoopInfo info;

	if (loop_get_info_by_number(n, &info) < 0)
		return 0; /* not bound, or detached while we looked */
	if (strncmp(info.backing_file, s->prefix, strlen(s->prefix)) != 0) {
		loop_info_done(&info);
		return 0;
	}
	s->infos = xgrow(s->infos, &s->cap, s->n + 1, sizeof(LoopInfo));
	s->infos[s->n++] = info;
	return 0;
}

static int cmp_info(const void *a, const void *b)
{
	const LoopInfo *x = a, *y = b;
	return x->number < y->number ? -1 : x->number > y->number;
}

int loop_list_for_dir(const char *dir, LoopInfo **ret, size_t *ret_n)
{
	_cleanup_free_ char *canon = NULL, *prefix = NULL;
	ListState s = {};

	if (!dir || !ret || !ret_n)
		return -EINVAL;
	canon = realpath(dir, NULL);
	if (!canon)
		return negative_errno();
	prefix = strcmp(canon, "/") == 0 ? xstrdup("/") : xasprintf("%s/", canon);
	s.prefix = prefix;
	int r = foreach_loop(list_one, &s);
	if (r < 0) {
		loop_info_array_free(s.infos, s.n);
		return r;
	}
	if (s.n > 1)
		qsort(s.infos, s.n, sizeof(LoopInfo), cmp_info);
	*ret = s.infos;
	*ret_n = s.n;
	return 0;
}

typedef struct LostState {
	const char *want; /* the kernel's path of the file: the path, then " (deleted)" */
	dev_t fs_dev;
	bool found;
	unsigned lowest;
} LostState;

static int lost_one(unsigned n, void *userdata)
{
	LostState *s = userdata;
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct loop_info64 info;

	if ((s->found && n > s->lowest) || sysfs_read(n, "loop/backing_file", &path) < 0 ||
	    strcmp(path, s->want) != 0)
		return 0;
	if (loop_open(n, O_RDONLY, &fd) < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0 ||
	    info.lo_device != (__u64)s->fs_dev)
		return 0;
	s->found = true;
	s->lowest = n;
	return 0;
}

int loop_find_deleted(const char *path, dev_t fs_dev, char **ret_devpath)
{
	_cleanup_free_ char *want = NULL;

	if (!path || *path != '/' || !ret_devpath)
		return -EINVAL;
	want = xasprintf("%s" DELETED_SUFFIX, path);
	LostState s = {.want = want, .fs_dev = fs_dev};
	int r = foreach_loop(lost_one, &s);
	if (r < 0)
		return r;
	if (!s.found)
		return -ENOENT;
	*ret_devpath = xasprintf("/dev/loop%u", s.lowest);
	return 0;
}
