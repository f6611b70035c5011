/* SPDX-License-Identifier: Apache-2.0 */
#include <blkid.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "blockfs.h"
#include "exec.h"
#include "log.h"

#define EXCERPT_MAX 512
#define MAX_ARGS 32

#define SET_ERROR(ret_error, ...)                              \
	do {                                                   \
		if (ret_error)                                 \
			*(ret_error) = xasprintf(__VA_ARGS__); \
	} while (0)

DEFINE_TRIVIAL_CLEANUP_FUNC(blkid_probe, blkid_free_probe)

static bool streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static bool is_ext(const char *fstype)
{
	return streq(fstype, "ext2") || streq(fstype, "ext3") || streq(fstype, "ext4");
}

static bool is_xfs(const char *fstype)
{
	return streq(fstype, "xfs");
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static int check_fstype(const char *fstype, char **ret_error)
{
	if (is_ext(fstype) || is_xfs(fstype))
		return 0;
	SET_ERROR(ret_error, "unsupported filesystem type '%s' (ext2, ext3, ext4, xfs)",
		  fstype ?: "");
	return -EINVAL;
}

/* Tools are looked up in fixed places, never through PATH: exec_run() wants absolute paths
 * and the daemon must not run whatever PATH leads to. */
static int find_tool(const char *name, char **ret, char **ret_error)
{
	static const char *const dirs[] = {"/usr/sbin", "/sbin"};

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		char *p = xasprintf("%s/%s", dirs[i], name);
		if (access(p, X_OK) == 0) {
			*ret = p;
			return 0;
		}
		free(p);
	}
	SET_ERROR(ret_error, "%s: not found in /usr/sbin or /sbin", name);
	return -ENOENT;
}

/* Runs tool with args (NULL-terminated, without argv[0]). Returns 0 when it ran, whatever
 * its exit; *res must then be released with exec_result_done(). */
static int run_tool(const char *tool, const char *const *args, usec_t timeout, ExecResult *res,
		    char **ret_error)
{
	const char *argv[MAX_ARGS];
	_cleanup_free_ char *path = NULL;
	size_t n = 0;

	int r = find_tool(tool, &path, ret_error);
	if (r < 0)
		return r;
	argv[n++] = path;
	for (size_t i = 0; args[i]; i++) {
		if (n + 1 >= MAX_ARGS)
			return -E2BIG;
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	r = exec_run(&(ExecOptions){.argv = argv, .timeout = timeout}, res);
	if (r < 0) {
		SET_ERROR(ret_error, "%s: cannot run: %s", tool, strerror(-r));
		return r;
	}
	log_debug("%s %s: %s in %.3f s", tool, args[0] ?: "", exec_describe(res),
		  (double)res->elapsed / 1e6);
	return 0;
}

/* Turns a failed run into an errno and a message: the tool's first line, its reason (what
 * follows is often its usage text). */
static int tool_failed(const char *tool, const ExecResult *res, int err, char **ret_error)
{
	const char *excerpt = exec_first_line(res, EXCERPT_MAX);

	SET_ERROR(ret_error, "%s: %s%s%s", tool, exec_describe(res), *excerpt ? ": " : "", excerpt);
	if (res->timed_out)
		return -ETIMEDOUT;
	return err;
}

/* Runs tool and succeeds on exit 0 only. */
static int run_tool_ok(const char *tool, const char *const *args, usec_t timeout, char **ret_error)
{
	ExecResult res;

	int r = run_tool(tool, args, timeout, &res, ret_error);
	if (r < 0)
		return r;
	if (!exec_succeeded(&res))
		r = tool_failed(tool, &res, -EIO, ret_error);
	exec_result_done(&res);
	return r;
}

#define PROBE_BLANK 1
#define PROBE_AMBIVALENT 2

/* Probes dev for superblocks and partition tables: 0 with *ret (a probe that found exactly
 * one), PROBE_BLANK, PROBE_AMBIVALENT when signatures conflict, or a negative errno. */
static int probe(const char *dev, blkid_probe *ret)
{
	errno = 0;
	_cleanup_(blkid_free_probep) blkid_probe pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return errno > 0 ? -errno : -EIO;
	if (blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE |
							  BLKID_SUBLKS_UUID |
							  BLKID_SUBLKS_BADCSUM) < 0 ||
	    blkid_probe_enable_partitions(pr, 1) < 0)
		return -EIO;

	errno = 0;
	int r = blkid_do_safeprobe(pr);
	if (r == 1)
		return PROBE_BLANK;
	if (r == -2)
		return PROBE_AMBIVALENT;
	if (r < 0)
		return errno > 0 ? -errno : -EIO;
	*ret = TAKE_PTR(pr);
	return 0;
}

int blockfs_probe(const char *dev, char **ret_fstype)
{
	_cleanup_(blkid_free_probep) blkid_probe pr = NULL;
	const char *v;

	if (!dev || !ret_fstype)
		return -EINVAL;
	int r = probe(dev, &pr);
	if (r < 0)
		return r;
	if (r > 0) {
		*ret_fstype = xstrdup(r == PROBE_BLANK ? "" : BLOCKFS_AMBIVALENT);
		return 0;
	}
	if (blkid_probe_lookup_value(pr, "TYPE", &v, NULL) == 0 && v && *v)
		*ret_fstype = xstrdup(v);
	else if (blkid_probe_lookup_value(pr, "PTTYPE", &v, NULL) == 0 && v && *v)
		*ret_fstype = xasprintf(BLOCKFS_PTTYPE_PREFIX "%s", v);
	else
		*ret_fstype = xstrdup(BLOCKFS_AMBIVALENT); /* found something without a name */
	return 0;
}

int blockfs_probe_uuid(const char *dev, char **ret_uuid)
{
	_cleanup_(blkid_free_probep) blkid_probe pr = NULL;
	const char *v;

	if (!dev || !ret_uuid)
		return -EINVAL;
	int r = probe(dev, &pr);
	if (r < 0)
		return r;
	if (r == 0 && blkid_probe_lookup_value(pr, "UUID", &v, NULL) == 0 && v)
		*ret_uuid = xstrdup(v);
	else
		*ret_uuid = xstrdup("");
	return 0;
}

int blockfs_wipe(const char *dev)
{
	if (!dev)
		return -EINVAL;
	_cleanup_close_ int fd = open(dev, O_RDWR | O_EXCL | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	_cleanup_(blkid_free_probep) blkid_probe pr = blkid_new_probe();
	if (!pr || blkid_probe_set_device(pr, fd, 0, 0) < 0 ||
	    blkid_probe_enable_superblocks(pr, 1) < 0 ||
	    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_BADCSUM) < 0 ||
	    blkid_probe_enable_partitions(pr, 1) < 0 ||
	    blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC) < 0)
		return -EIO;
	/* Each wipe steps the probe back, so the next probe looks at the same place again. */
	for (int i = 0; i < 64; i++) {
		errno = 0;
		int r = blkid_do_probe(pr);
		if (r == 1)
			return fsync(fd) < 0 ? negative_errno() : 0;
		if (r < 0 || blkid_do_wipe(pr, 0) < 0)
			return errno > 0 ? -errno : -EIO;
	}
	return -ELOOP;
}

bool blockfs_uuid_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	}
	return true;
}

int blockfs_probe_block_size(const char *path, uint32_t *ret)
{
	_cleanup_(blkid_free_probep) blkid_probe pr = NULL;
	const char *v;
	char *end;

	if (!path || !ret)
		return -EINVAL;
	int r = probe(path, &pr);
	if (r < 0)
		return r;
	unsigned long size = 0;
	if (r == 0 && blkid_probe_lookup_value(pr, "BLOCK_SIZE", &v, NULL) == 0 && v) {
		errno = 0;
		size = strtoul(v, &end, 10);
		if (errno || end == v || *end || size > UINT32_MAX)
			size = 0;
	}
	*ret = (uint32_t)size;
	return 0;
}

/* Appends "flag <prefix><v>" to args. */
static void add_opt(const char **args, size_t *n, char (*buf)[32], const char *flag,
		    const char *prefix, uint64_t v)
{
	snprintf(*buf, sizeof(*buf), "%s%" PRIu64, prefix, v);
	args[(*n)++] = flag;
	args[(*n)++] = *buf;
}

int blockfs_mkfs(const char *dev, const char *fstype, const BlockfsMkfsOptions *o, char **ret_error)
{
	BlockfsMkfsOptions opt = o ? *o : (BlockfsMkfsOptions){};
	const char *args[MAX_ARGS];
	char bufs[6][32];
	char tool[32];
	size_t n = 0;

	if (!dev)
		return -EINVAL;
	int r = check_fstype(fstype, ret_error);
	if (r < 0)
		return r;

	const struct {
		const char *name;
		uint64_t v;
	} checks[] = {
		{"block_size", opt.block_size},
		{"inode_size", opt.inode_size},
		{"ext4_cluster_size", opt.ext4_cluster_size},
	};
	for (size_t i = 0; i < ELEMENTSOF(checks); i++)
		if (checks[i].v && !is_pow2(checks[i].v)) {
			SET_ERROR(ret_error, "%s %" PRIu64 " is not a power of two", checks[i].name,
				  checks[i].v);
			return -EINVAL;
		}

	if (opt.uuid && !blockfs_uuid_valid(opt.uuid)) {
		SET_ERROR(ret_error, "uuid '%s' is not a UUID", opt.uuid);
		return -EINVAL;
	}

	snprintf(tool, sizeof(tool), "mkfs.%s", fstype);
	args[n++] = "-q";
	_cleanup_free_ char *xfs_uuid = NULL;
	if (is_xfs(fstype)) {
		const char *bad = opt.bytes_per_inode	  ? "bytes_per_inode"
				  : opt.number_of_inodes  ? "number_of_inodes"
				  : opt.ext4_bigalloc	  ? "ext4_bigalloc"
				  : opt.ext4_cluster_size ? "ext4_cluster_size"
				  : opt.ext4_encryption	  ? "ext4_encryption"
				  : opt.ext4_fast_commit  ? "ext4_fast_commit"
							  : NULL;
		if (bad) {
			SET_ERROR(ret_error, "%s is not supported for xfs", bad);
			return -EINVAL;
		}
		if (opt.block_size)
			add_opt(args, &n, &bufs[0], "-b", "size=", opt.block_size);
		if (opt.inode_size)
			add_opt(args, &n, &bufs[1], "-i", "size=", opt.inode_size);
		if (opt.uuid) {
			xfs_uuid = xasprintf("uuid=%s", opt.uuid);
			args[n++] = "-m";
			args[n++] = xfs_uuid;
		}
	} else {
		bool ext4 = streq(fstype, "ext4");
		if ((opt.ext4_bigalloc || opt.ext4_cluster_size || opt.ext4_encryption ||
		     opt.ext4_fast_commit) &&
		    !ext4) {
			SET_ERROR(ret_error, "%s requires ext4",
				  opt.ext4_bigalloc	  ? "ext4_bigalloc"
				  : opt.ext4_cluster_size ? "ext4_cluster_size"
				  : opt.ext4_encryption	  ? "ext4_encryption"
							  : "ext4_fast_commit");
			return -EINVAL;
		}
		if (opt.ext4_cluster_size && !opt.ext4_bigalloc) {
			SET_ERROR(ret_error, "ext4_cluster_size requires ext4_bigalloc");
			return -EINVAL;
		}
		/* Lazy init: inode tables and journal are zeroed later by the kernel, so a big
		 * volume formats in seconds. No -F: see the header. */
		args[n++] = "-E";
		args[n++] = "lazy_itable_init=1,lazy_journal_init=1";
		if (opt.block_size)
			add_opt(args, &n, &bufs[0], "-b", "", opt.block_size);
		if (opt.inode_size)
			add_opt(args, &n, &bufs[1], "-I", "", opt.inode_size);
		if (opt.bytes_per_inode)
			add_opt(args, &n, &bufs[2], "-i", "", opt.bytes_per_inode);
		if (opt.number_of_inodes)
			add_opt(args, &n, &bufs[3], "-N", "", opt.number_of_inodes);
		if (opt.ext4_bigalloc) {
			args[n++] = "-O";
			args[n++] = "bigalloc";
		}
		if (opt.ext4_cluster_size)
			add_opt(args, &n, &bufs[4], "-C", "", opt.ext4_cluster_size);
		if (opt.uuid) {
			args[n++] = "-U";
			args[n++] = opt.uuid;
		}
		if (opt.ext4_encryption) {
			args[n++] = "-O";
			args[n++] = "encrypt";
		}
		if (opt.ext4_fast_commit) {
			args[n++] = "-O";
			args[n++] = "fast_commit";
		}
	}
	args[n++] = dev;
	args[n] = NULL;
	return run_tool_ok(tool, args, BLOCKFS_MKFS_TIMEOUT, ret_error);
}

/* e2fsck exit codes are bits: 1 corrected, 2 corrected (reboot: root fs only), 4 errors
 * left, 8 operational error, 16 usage, 32 cancelled, 128 library error. */
static int e2fsck(const char *dev, bool force, char **ret_error)
{
	const char *args[] = {"-p", dev, NULL, NULL};
	ExecResult res;

	if (force) {
		args[1] = "-f";
		args[2] = dev;
	}
	int r = run_tool("e2fsck", args, BLOCKFS_FSCK_TIMEOUT, &res, ret_error);
	if (r < 0)
		return r;
	if (res.timed_out || res.signal || res.exit_code < 0 || res.exit_code >= 4)
		r = tool_failed("e2fsck", &res,
				(res.exit_code > 0 && (res.exit_code & 4)) ? -EUCLEAN : -EIO,
				ret_error);
	else if (res.exit_code > 0)
		log_debug("e2fsck corrected errors on %s: %s", dev, exec_excerpt(&res, 200));
	exec_result_done(&res);
	return r;
}

int blockfs_fsck(const char *dev, const char *fstype, char **ret_error)
{
	if (!dev)
		return -EINVAL;
	int r = check_fstype(fstype, ret_error);
	if (r < 0)
		return r;
	if (is_xfs(fstype))
		return 0;
	return e2fsck(dev, false, ret_error);
}

int blockfs_resize(const char *dev, const char *mount_path, const char *fstype, char **ret_error)
{
	if (!dev)
		return -EINVAL;
	int r = check_fstype(fstype, ret_error);
	if (r < 0)
		return r;
	if (is_xfs(fstype)) {
		if (!mount_path) {
			SET_ERROR(ret_error, "xfs can only grow while mounted");
			return -EINVAL;
		}
		return run_tool_ok("xfs_growfs", (const char *[]){"-d", mount_path, NULL},
				   BLOCKFS_RESIZE_TIMEOUT, ret_error);
	}
	if (!mount_path) {
		r = e2fsck(dev, true, ret_error);
		if (r < 0)
			return r;
	}
	return run_tool_ok("resize2fs", (const char *[]){dev, NULL}, BLOCKFS_RESIZE_TIMEOUT,
			   ret_error);
}

/* The number after "key" in text ("Block count:   1234", "blocks=81920"), from the first
 * occurrence at or after from. */
static int parse_after(const char *from, const char *key, uint64_t *ret)
{
	const char *p = from ? strstr(from, key) : NULL;
	char *end;

	if (!p)
		return -EBADMSG;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || end == p)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int ext_size(const char *dev, uint64_t *ret_size, uint32_t *ret_unit, char **ret_error)
{
	uint64_t blocks, bsize, csize = 0;
	ExecResult res;

	int r = run_tool("dumpe2fs", (const char *[]){"-h", dev, NULL}, BLOCKFS_QUERY_TIMEOUT, &res,
			 ret_error);
	if (r < 0)
		return r;
	if (!exec_succeeded(&res))
		r = tool_failed("dumpe2fs", &res, -EIO, ret_error);
	else if (parse_after(res.out, "\nBlock count:", &blocks) < 0 ||
		 parse_after(res.out, "\nBlock size:", &bsize) < 0) {
		SET_ERROR(ret_error, "dumpe2fs: no block count or block size in its output");
		r = -EBADMSG;
	}
	if (r == 0) {
		(void)parse_after(res.out, "\nCluster size:", &csize);
		*ret_size = blocks * bsize;
		*ret_unit = (uint32_t)MAX(bsize, csize);
	}
	exec_result_done(&res);
	return r;
}

static int xfs_size(const char *dev, const char *mount_path, uint64_t *ret_size, uint32_t *ret_unit,
		    char **ret_error)
{
	uint64_t blocks, bsize;
	ExecResult res;
	int r;

	/* What xfs_info does, without its shell script: live geometry from the mounted
	 * filesystem, else the on-disk superblock. */
	if (mount_path)
		r = run_tool("xfs_spaceman", (const char *[]){"-c", "info", mount_path, NULL},
			     BLOCKFS_QUERY_TIMEOUT, &res, ret_error);
	else
		r = run_tool("xfs_db", (const char *[]){"-r", "-c", "info", dev, NULL},
			     BLOCKFS_QUERY_TIMEOUT, &res, ret_error);
	if (r < 0)
		return r;
	const char *tool = mount_path ? "xfs_spaceman" : "xfs_db";
	const char *data = res.out ? strstr(res.out, "\ndata") : NULL;
	if (!exec_succeeded(&res))
		r = tool_failed(tool, &res, -EIO, ret_error);
	else if (parse_after(data, "bsize=", &bsize) < 0 ||
		 parse_after(data, "blocks=", &blocks) < 0) {
		SET_ERROR(ret_error, "%s: no data block count in its output", tool);
		r = -EBADMSG;
	}
	if (r == 0) {
		*ret_size = blocks * bsize;
		*ret_unit = (uint32_t)bsize;
	}
	exec_result_done(&res);
	return r;
}

int blockfs_get_size(const char *dev, const char *mount_path, const char *fstype,
		     uint64_t *ret_size, uint32_t *ret_unit, char **ret_error)
{
	if (!dev || !ret_size || !ret_unit)
		return -EINVAL;
	int r = check_fstype(fstype, ret_error);
	if (r < 0)
		return r;
	if (is_xfs(fstype))
		return xfs_size(dev, mount_path, ret_size, ret_unit, ret_error);
	return ext_size(dev, ret_size, ret_unit, ret_error);
}

int blockdev_get_size(const char *dev, uint64_t *ret)
{
	uint64_t size;

	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &size) < 0)
		return negative_errno();
	*ret = size;
	return 0;
}

int blockfs_needs_resize(const char *dev, const char *mount_path, const char *fstype,
			 char **ret_error)
{
	uint64_t dev_size, fs_size;
	uint32_t unit;

	if (!dev)
		return -EINVAL;
	int r = blockdev_get_size(dev, &dev_size);
	if (r < 0) {
		SET_ERROR(ret_error, "%s: cannot read the device size: %s", dev, strerror(-r));
		return r;
	}
	r = blockfs_get_size(dev, mount_path, fstype, &fs_size, &unit, ret_error);
	if (r < 0)
		return r;
	if (unit == 0)
		unit = 1;
	log_debug("%s: device %" PRIu64 " bytes, filesystem %" PRIu64 " bytes", dev, dev_size,
		  fs_size);
	return dev_size / unit * unit > fs_size;
}

int blockfs_stats(const char *mount_path, BlockfsStats *ret)
{
	if (!mount_path || !ret)
		return -EINVAL;
	_cleanup_close_ int fd = open(mount_path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return blockfs_stats_fd(fd, ret);
}

int blockfs_stats_fd(int fd, BlockfsStats *ret)
{
	struct statvfs sv;

	if (fstatvfs(fd, &sv) < 0)
		return negative_errno();
	uint64_t frsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	*ret = (BlockfsStats){
		.bytes_total = (uint64_t)sv.f_blocks * frsize,
		.bytes_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * frsize,
		.bytes_available = (uint64_t)sv.f_bavail * frsize,
		.inodes_total = sv.f_files,
		.inodes_used = sv.f_files - sv.f_ffree,
		.inodes_free = sv.f_ffree,
		.read_only = sv.f_flag & ST_RDONLY,
	};
	return 0;
}

int blockfs_trim_fd(int fd, uint64_t *ret_trimmed)
{
	struct fstrim_range range = {.start = 0, .len = UINT64_MAX, .minlen = 0};

	if (ioctl(fd, FITRIM, &range) < 0)
		return negative_errno();
	if (ret_trimmed)
		*ret_trimmed = range.len;
	return 0;
}
