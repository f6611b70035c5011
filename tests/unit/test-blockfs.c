/* SPDX-License-Identifier: Apache-2.0 */
/* Real mkfs.ext4 / mkfs.xfs, e2fsck, resize2fs and xfs_growfs on loop devices. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "alloc.h"
#include "blockfs.h"
#include "exec.h"
#include "loopdev.h"
#include "mount-util.h"
#include "scratch.h"
#include "tap.h"

#define MiB (1024ULL * 1024ULL)

/* Runs a shell command for checking; returns its exit code and stdout. */
static int sh(const char *cmd, char **ret_out)
{
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	ExecResult r;

	if (exec_run(&(ExecOptions){.argv = argv, .timeout = 60 * USEC_PER_SEC}, &r) < 0)
		return -1;
	int code = r.exit_code;
	if (ret_out)
		*ret_out = TAKE_PTR(r.out);
	exec_result_done(&r);
	return code;
}

/* The value of "key:" in dumpe2fs -h output, or 0. */
static unsigned long long dumpe2fs_value(const char *dev, const char *key)
{
	_cleanup_free_ char *cmd = xasprintf("dumpe2fs -h %s 2>/dev/null", dev), *out = NULL;
	_cleanup_free_ char *k = xasprintf("\n%s:", key);

	if (sh(cmd, &out) != 0 || !out)
		return 0;
	const char *p = strstr(out, k);
	return p ? strtoull(p + strlen(k), NULL, 10) : 0;
}

static bool dumpe2fs_has(const char *dev, const char *text)
{
	_cleanup_free_ char *cmd = xasprintf("dumpe2fs -h %s 2>/dev/null", dev), *out = NULL;
	return sh(cmd, &out) == 0 && out && strstr(out, text);
}

/* Whether name is one of the words of dumpe2fs -h's "Filesystem features:" line. */
static bool dumpe2fs_feature(const char *dev, const char *name)
{
	_cleanup_free_ char *cmd = xasprintf("dumpe2fs -h %s 2>/dev/null", dev), *out = NULL;
	if (sh(cmd, &out) != 0 || !out)
		return false;
	const char *line = strstr(out, "\nFilesystem features:");
	if (!line)
		return false;
	line += strlen("\nFilesystem features:");
	size_t len = strcspn(line, "\n"), nlen = strlen(name);
	for (const char *p = line; (p = strstr(p, name)) && p < line + len; p += nlen)
		if (p[-1] == ' ' && (p[nlen] == ' ' || p[nlen] == '\n'))
			return true;
	return false;
}

/* Whether CAP_SYS_RESOURCE is effective: ext4's online resize needs it. */
static bool has_cap_sys_resource(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long caps = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	if (f)
		fclose(f);
	return caps & (1ULL << 24);
}

static char *probe(const char *dev)
{
	char *t = NULL;
	int r = blockfs_probe(dev, &t);
	return r < 0 ? xasprintf("error %d", r) : t;
}

static bool contains(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

static void test_probe_and_mkfs_ext4(void)
{
	_cleanup_free_ char *dev = scratch_loop("ext4.img", 64 * MiB, NULL);
	_cleanup_free_ char *t = NULL, *err = NULL;
	uint64_t size = 0;
	uint32_t unit = 0;

	t = probe(dev);
	is_str(t, "", "a fresh device is blank");
	free(TAKE_PTR(t));
	is_int(blockfs_probe("/nonexistent/dev", &t), -ENOENT, "probe a missing device");
	unit = 99;
	is_int(blockfs_probe_block_size(dev, &unit), 0, "block size of a blank device");
	is_int(unit, 0, "none");
	is_int(blockfs_probe_block_size("/nonexistent/dev", &unit), -ENOENT, "of a missing one");

	BlockfsMkfsOptions o = {.block_size = 1024, .inode_size = 256};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0, "mkfs.ext4 -b 1024 -I 256 (%s)", err ?: "");
	t = probe(dev);
	is_str(t, "ext4", "probe says ext4");
	free(TAKE_PTR(t));
	is_int(blockfs_probe_block_size(dev, &unit), 0, "block size of the ext4");
	is_int(unit, 1024, "its block size: a device under it must not have larger blocks");
	is_int(dumpe2fs_value(dev, "Block size"), 1024, "dumpe2fs: block size 1024");
	is_int(dumpe2fs_value(dev, "Inode size"), 256, "dumpe2fs: inode size 256");
	ok(dumpe2fs_has(dev, "uninit_bg") || dumpe2fs_has(dev, "metadata_csum"),
	   "lazy-init capable features present");
	is_int(blockfs_get_size(dev, NULL, "ext4", &size, &unit, &err), 0, "get_size");
	is_int(size, 64 * MiB, "filesystem fills the 64 MiB device");
	is_int(unit, 1024, "unit is the block size");
	is_int(blockfs_needs_resize(dev, NULL, "ext4", &err), 0, "no resize needed");
	ok(dumpe2fs_feature(dev, "has_journal") && !dumpe2fs_feature(dev, "fast_commit"),
	   "journal without fast commit by default");

	/* xfs refuses to write over it on its own; we never pass -f. */
	is_int(blockfs_mkfs(dev, "xfs", NULL, &err), -EIO, "mkfs.xfs over ext4 fails");
	ok(contains(err, "mkfs.xfs: exit status 1: ") &&
		   contains(err, "appears to contain an existing filesystem"),
	   "message carries the tool's stderr: %s", err ?: "(none)");
	free(TAKE_PTR(err));
	t = probe(dev);
	is_str(t, "ext4", "still ext4");
	free(TAKE_PTR(t));

	o = (BlockfsMkfsOptions){.block_size = 4096, .bytes_per_inode = 65536};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0, "mkfs.ext4 -i 65536");
	is_int(dumpe2fs_value(dev, "Inode count"), 64 * MiB / 65536, "1024 inodes");
	o = (BlockfsMkfsOptions){.block_size = 4096, .number_of_inodes = 3000};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0, "mkfs.ext4 -N 3000");
	unsigned long long inodes = dumpe2fs_value(dev, "Inode count");
	ok(inodes >= 3000 && inodes < 3000 + 1024, "about 3000 inodes (%llu)", inodes);
	o = (BlockfsMkfsOptions){.ext4_bigalloc = true, .ext4_cluster_size = 65536};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0, "mkfs.ext4 -O bigalloc -C 65536 (%s)",
	       err ?: "");
	ok(dumpe2fs_has(dev, "bigalloc"), "bigalloc feature");
	is_int(dumpe2fs_value(dev, "Cluster size"), 65536, "cluster size 65536");
	is_int(blockfs_get_size(dev, NULL, "ext4", &size, &unit, &err), 0, "get_size");
	is_int(unit, 65536, "unit is the cluster");
	ok(!dumpe2fs_feature(dev, "fast_commit"), "no fast commit unless asked");

	o = (BlockfsMkfsOptions){.ext4_fast_commit = true};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0, "mkfs.ext4 -O fast_commit (%s)", err ?: "");
	ok(dumpe2fs_feature(dev, "fast_commit"), "fast_commit feature");
	ok(dumpe2fs_feature(dev, "has_journal"), "beside the journal");
	/* one -O per feature: mke2fs takes them all */
	o = (BlockfsMkfsOptions){.ext4_bigalloc = true,
				 .ext4_cluster_size = 65536,
				 .ext4_encryption = true,
				 .ext4_fast_commit = true};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), 0,
	       "mkfs.ext4 -O bigalloc -C 65536 -O encrypt -O fast_commit (%s)", err ?: "");
	ok(dumpe2fs_feature(dev, "bigalloc") && dumpe2fs_feature(dev, "encrypt") &&
		   dumpe2fs_feature(dev, "fast_commit"),
	   "bigalloc, encrypt and fast_commit together");

	/* Invalid combinations: -EINVAL with a message naming the option. */
	struct {
		const char *fstype;
		BlockfsMkfsOptions o;
		const char *names;
	} bad[] = {
		{"xfs", {.bytes_per_inode = 16384}, "bytes_per_inode"},
		{"xfs", {.number_of_inodes = 100}, "number_of_inodes"},
		{"xfs", {.ext4_bigalloc = true}, "ext4_bigalloc"},
		{"ext3", {.ext4_bigalloc = true}, "ext4_bigalloc"},
		{"xfs", {.ext4_fast_commit = true}, "ext4_fast_commit"},
		{"ext3", {.ext4_fast_commit = true}, "ext4_fast_commit"},
		{"ext2", {.ext4_fast_commit = true}, "ext4_fast_commit"},
		{"ext4", {.ext4_cluster_size = 65536}, "ext4_cluster_size"},
		{"ext4", {.block_size = 1000}, "block_size"},
		{"xfs", {.inode_size = 300}, "inode_size"},
		{"btrfs", {}, "btrfs"},
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		is_int(blockfs_mkfs(dev, bad[i].fstype, &bad[i].o, &err), -EINVAL,
		       "%s with bad %s: -EINVAL", bad[i].fstype, bad[i].names);
		ok(contains(err, bad[i].names), "message: %s", err ?: "(none)");
		free(TAKE_PTR(err));
	}
	/* A value only the tool knows is wrong: its stderr reaches the message. */
	o = (BlockfsMkfsOptions){.block_size = 128};
	is_int(blockfs_mkfs(dev, "ext4", &o, &err), -EIO, "mkfs.ext4 -b 128 fails");
	ok(contains(err, "mkfs.ext4: exit status 1: ") && contains(err, "block size"),
	   "message: %s", err ?: "(none)");
	free(TAKE_PTR(err));

	is_int(loop_detach(dev), 0, "detach");
}

/* A DOS partition table with one partition, written by hand (no sfdisk needed). */
static bool write_mbr(const char *dev)
{
	unsigned char mbr[512] = {};
	unsigned char *e = mbr + 446;
	uint32_t start = 2048, count = 8192;

	e[0] = 0x00; /* not bootable */
	e[1] = 0xfe; /* CHS: use LBA */
	e[2] = 0xff;
	e[3] = 0xff;
	e[4] = 0x83; /* Linux */
	e[5] = 0xfe;
	e[6] = 0xff;
	e[7] = 0xff;
	memcpy(e + 8, &start, 4); /* little-endian on x86 and arm */
	memcpy(e + 12, &count, 4);
	mbr[510] = 0x55;
	mbr[511] = 0xaa;
	int fd = open(dev, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool good = pwrite(fd, mbr, sizeof(mbr), 0) == (ssize_t)sizeof(mbr) && fsync(fd) == 0;
	close(fd);
	return good;
}

static void test_partition_table(void)
{
	_cleanup_free_ char *dev = scratch_loop("pt.img", 16 * MiB, NULL);
	_cleanup_free_ char *t = NULL, *err = NULL;

	ok(write_mbr(dev), "MBR written");
	t = probe(dev);
	is_str(t, BLOCKFS_PTTYPE_PREFIX "dos", "probe sees the partition table");
	is_int(loop_detach(dev), 0, "detach");
}

static void test_fsck(void)
{
	_cleanup_free_ char *dev = scratch_loop("fsck.img", 64 * MiB, NULL);
	_cleanup_free_ char *mnt = scratch_mkdir("fsck-mnt"), *err = NULL, *t = NULL, *cmd = NULL;
	struct stat st = {};

	is_int(blockfs_mkfs(dev, "ext4", NULL, &err), 0, "mkfs.ext4");
	is_int(blockfs_fsck(dev, "ext4", &err), 0, "fsck a clean filesystem");

	/* An inconsistency preen mode repairs (exit 1): fine to mount afterwards. */
	_cleanup_free_ char *f = xasprintf("%s/f", mnt);
	is_int(mount_fs(dev, mnt, "ext4", NULL, false), 0, "mount");
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd >= 0 && fstat(fd, &st) == 0 && close(fd) == 0, "file created (inode %llu)",
	   (unsigned long long)st.st_ino);
	is_int(umount_path(mnt), 1, "unmount");
	cmd = xasprintf("debugfs -w -R 'sif <%llu> links_count 5' %s >/dev/null 2>&1 && "
			"tune2fs -E force_fsck %s >/dev/null 2>&1",
			(unsigned long long)st.st_ino, dev, dev);
	is_int(sh(cmd, NULL), 0, "wrong link count planted, check forced");
	is_int(blockfs_fsck(dev, "ext4", &err), 0, "fsck corrects it (exit 1 is success)");
	free(TAKE_PTR(cmd));
	cmd = xasprintf("e2fsck -fn %s >/dev/null 2>&1", dev);
	is_int(sh(cmd, NULL), 0, "filesystem clean afterwards");

	/* A damaged superblock: still ext4 to the probe (bad checksums count), never blank. */
	uint32_t junk = 7;
	fd = open(dev, O_WRONLY | O_CLOEXEC);
	ok(fd >= 0 && pwrite(fd, &junk, 4, 1024) == 4 && fsync(fd) == 0 && close(fd) == 0,
	   "s_inodes_count overwritten");
	t = probe(dev);
	is_str(t, "ext4", "a corrupted ext4 is not blank");
	is_int(blockfs_fsck(dev, "ext4", &err), -EIO, "fsck fails");
	ok(contains(err, "e2fsck: exit status 8: ") &&
		   contains(err, "Superblock checksum does not match"),
	   "message carries e2fsck's stderr: %s", err ?: "(none)");
	free(TAKE_PTR(err));

	is_int(blockfs_fsck(dev, "xfs", &err), 0, "xfs: nothing to do at mount time");
	is_int(blockfs_fsck(dev, "vfat", &err), -EINVAL, "unsupported type");
	free(TAKE_PTR(err));
	is_int(loop_detach(dev), 0, "detach");
}

static void test_resize_ext4(void)
{
	_cleanup_free_ char *file = NULL, *err = NULL, *f = NULL;
	_cleanup_free_ char *dev = scratch_loop("grow4.img", 64 * MiB, &file);
	_cleanup_free_ char *mnt = scratch_mkdir("grow4-mnt");
	BlockfsStats s1, s2, s3;
	uint64_t size = 0;
	uint32_t unit;

	is_int(blockfs_mkfs(dev, "ext4", &(BlockfsMkfsOptions){.block_size = 4096}, &err), 0,
	       "mkfs.ext4");
	is_int(mount_fs(dev, mnt, "ext4", NULL, false), 0, "mount");
	is_int(blockfs_stats(mnt, &s1), 0, "stats");
	ok(s1.bytes_total > 50 * MiB && s1.bytes_total <= 64 * MiB, "total %llu",
	   (unsigned long long)s1.bytes_total);
	ok(s1.bytes_used + s1.bytes_available <= s1.bytes_total && s1.bytes_available > 0,
	   "used %llu + available %llu <= total", (unsigned long long)s1.bytes_used,
	   (unsigned long long)s1.bytes_available);
	ok(s1.inodes_total > 0 && s1.inodes_used + s1.inodes_free == s1.inodes_total,
	   "inodes add up");
	ok(!s1.read_only, "read-write");
	for (int i = 0; i < 10; i++) {
		f = xasprintf("%s/f%d", mnt, i);
		int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
		free(TAKE_PTR(f));
	}
	is_int(blockfs_stats(mnt, &s2), 0, "stats after 10 files");
	is_int(s2.inodes_used - s1.inodes_used, 10, "10 more inodes used");
	is_int(blockfs_needs_resize(dev, mnt, "ext4", &err), 0, "no resize needed");

	/* Online: grow the file, refresh the device, grow the mounted filesystem. */
	ok(truncate(file, (off_t)(128 * MiB)) == 0, "backing file grown to 128 MiB");
	is_int(loop_refresh_size(dev), 0, "loop device refreshed");
	is_int(blockfs_needs_resize(dev, mnt, "ext4", &err), 1, "resize needed");
	if (has_cap_sys_resource()) {
		is_int(blockfs_resize(dev, mnt, "ext4", &err), 0, "resize2fs online (%s)",
		       err ?: "");
		is_int(blockfs_stats(mnt, &s3), 0, "stats");
		ok(s3.bytes_total >= s2.bytes_total + 60 * MiB,
		   "statvfs sees the space: %llu -> %llu", (unsigned long long)s2.bytes_total,
		   (unsigned long long)s3.bytes_total);
		is_int(blockfs_get_size(dev, mnt, "ext4", &size, &unit, &err), 0, "get_size");
		is_int(size, 128 * MiB, "filesystem is 128 MiB");
		is_int(blockfs_needs_resize(dev, mnt, "ext4", &err), 0, "no resize needed now");
		is_int(blockfs_resize(dev, mnt, "ext4", &err), 0, "resize again: nothing to do");
	} else {
		/* ext4's online resize ioctl demands CAP_SYS_RESOURCE, which some sandboxes
		 * drop: then the kernel's refusal must reach the message. */
		is_int(blockfs_resize(dev, mnt, "ext4", &err), -EIO,
		       "resize2fs online without CAP_SYS_RESOURCE fails");
		ok(contains(err, "resize2fs: exit status 1: ") &&
			   contains(err, "Permission denied"),
		   "message: %s", err ?: "(none)");
		free(TAKE_PTR(err));
		ok(1, "online ext4 growth # SKIP no CAP_SYS_RESOURCE");
	}

	/* Offline: e2fsck -f then resize2fs. */
	is_int(umount_path(mnt), 1, "unmount");
	ok(truncate(file, (off_t)(160 * MiB)) == 0, "backing file grown to 160 MiB");
	is_int(loop_refresh_size(dev), 0, "loop device refreshed");
	is_int(blockfs_needs_resize(dev, NULL, "ext4", &err), 1, "resize needed");
	is_int(blockfs_resize(dev, NULL, "ext4", &err), 0, "resize2fs offline (%s)", err ?: "");
	is_int(blockfs_get_size(dev, NULL, "ext4", &size, &unit, &err), 0, "get_size");
	is_int(size, 160 * MiB, "filesystem is 160 MiB");
	is_int(blockfs_fsck(dev, "ext4", &err), 0, "clean after the resize");
	is_int(loop_detach(dev), 0, "detach");
}

static void test_xfs(void)
{
	_cleanup_free_ char *file = NULL, *err = NULL, *t = NULL;
	/* mkfs.xfs wants at least 300 MB. */
	_cleanup_free_ char *dev = scratch_loop("xfs.img", 320 * MiB, &file);
	_cleanup_free_ char *mnt = scratch_mkdir("xfs-mnt");
	BlockfsStats s1, s2;
	uint64_t size = 0;
	uint32_t unit = 0;

	/* mkfs.xfs follows its reason with its usage text: the message has the reason. */
	BlockfsMkfsOptions o = {.block_size = 1024, .inode_size = 4096};
	is_int(blockfs_mkfs(dev, "xfs", &o, &err), -EIO, "mkfs.xfs -b size=1024 -i size=4096");
	is_str(err,
	       "mkfs.xfs: exit status 1: Invalid value 4096 for -i size option. Value is too "
	       "large.",
	       "message: mkfs's first line");
	free(TAKE_PTR(err));

	o = (BlockfsMkfsOptions){.block_size = 4096, .inode_size = 512};
	is_int(blockfs_mkfs(dev, "xfs", &o, &err), 0, "mkfs.xfs -b size=4096 -i size=512 (%s)",
	       err ?: "");
	t = probe(dev);
	is_str(t, "xfs", "probe says xfs");
	is_int(blockfs_probe_block_size(file, &unit), 0, "block size, through the image file");
	is_int(unit, 512, "xfs's sector size (the device's), not its 4 KiB blocks");
	is_int(blockfs_get_size(dev, NULL, "xfs", &size, &unit, &err), 0, "get_size unmounted (%s)",
	       err ?: "");
	is_int(size, 320 * MiB, "320 MiB");
	is_int(unit, 4096, "4 KiB blocks");
	_cleanup_free_ char *cmd = xasprintf("xfs_db -r -c 'sb 0' -c 'p inodesize' %s", dev);
	_cleanup_free_ char *out = NULL;
	ok(sh(cmd, &out) == 0 && contains(out, "inodesize = 512"), "xfs_db: inode size 512");

	is_int(blockfs_resize(dev, NULL, "xfs", &err), -EINVAL, "xfs cannot grow unmounted");
	ok(contains(err, "mounted"), "message: %s", err ?: "(none)");
	free(TAKE_PTR(err));

	is_int(mount_fs(dev, mnt, "xfs", NULL, false), 0, "mount xfs");
	is_int(blockfs_stats(mnt, &s1), 0, "stats");
	is_int(blockfs_needs_resize(dev, mnt, "xfs", &err), 0, "no resize needed");
	ok(truncate(file, (off_t)(400 * MiB)) == 0, "backing file grown to 400 MiB");
	is_int(loop_refresh_size(dev), 0, "loop device refreshed");
	is_int(blockfs_needs_resize(dev, mnt, "xfs", &err), 1, "resize needed");
	is_int(blockfs_resize(dev, mnt, "xfs", &err), 0, "xfs_growfs (%s)", err ?: "");
	is_int(blockfs_stats(mnt, &s2), 0, "stats");
	ok(s2.bytes_total >= s1.bytes_total + 75 * MiB, "statvfs sees the space: %llu -> %llu",
	   (unsigned long long)s1.bytes_total, (unsigned long long)s2.bytes_total);
	is_int(blockfs_get_size(dev, mnt, "xfs", &size, &unit, &err), 0, "get_size mounted");
	is_int(size, 400 * MiB, "400 MiB");
	is_int(blockfs_needs_resize(dev, mnt, "xfs", &err), 0, "no resize needed now");
	is_int(blockfs_resize(dev, mnt, "xfs", &err), 0, "xfs_growfs again: nothing to do");
	is_int(umount_path(mnt), 1, "unmount");
	is_int(loop_detach(dev), 0, "detach");
}

/* A filesystem made with a given UUID shows it to the probe; a wipe leaves the device blank for
 * a plain mkfs again; a bad UUID never reaches mkfs. */
static void test_uuid_and_wipe(void)
{
	_cleanup_free_ char *dev = scratch_loop("wipe.img", 320 * MiB, NULL);
	_cleanup_free_ char *err = NULL, *t = NULL, *uuid = NULL;
	const char *id = "6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6f";

	ok(blockfs_uuid_valid(id), "a UUID is valid");
	ok(!blockfs_uuid_valid("6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6") &&
		   !blockfs_uuid_valid("6f1d2c3b04a59-4e8d-9c7b-1a2b3c4d5e6f") &&
		   !blockfs_uuid_valid("6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6g") &&
		   !blockfs_uuid_valid(""),
	   "short, misplaced dash, not hex, empty: not UUIDs");
	is_int(blockfs_probe_uuid(dev, &uuid), 0, "the UUID of a blank device");
	is_str(uuid, "", "none");
	free(TAKE_PTR(uuid));
	BlockfsMkfsOptions o = {.uuid = "-L evil"};
	is_int(blockfs_mkfs(dev, "xfs", &o, &err), -EINVAL, "a uuid that is not one");
	ok(contains(err, "uuid '-L evil' is not a UUID"), "message: %s", err ?: "(none)");
	free(TAKE_PTR(err));

	const char *types[] = {"xfs", "ext4"};
	for (size_t i = 0; i < ELEMENTSOF(types); i++) {
		o = (BlockfsMkfsOptions){.uuid = id};
		is_int(blockfs_mkfs(dev, types[i], &o, &err), 0, "mkfs.%s with a UUID (%s)",
		       types[i], err ?: "");
		is_int(blockfs_probe_uuid(dev, &uuid), 0, "probe its UUID");
		is_str(uuid, id, "the one mkfs was given");
		free(TAKE_PTR(uuid));
		is_int(blockfs_wipe(dev), 0, "wipe it");
		t = probe(dev);
		is_str(t, "", "blank again");
		free(TAKE_PTR(t));
	}
	is_int(blockfs_wipe("/nonexistent/dev"), -ENOENT, "wipe a missing device");
	is_int(loop_detach(dev), 0, "detach");
}

/* The bytes a file really holds on disk. */
static uint64_t allocated(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

static void test_trim(void)
{
	_cleanup_free_ char *file = NULL, *err = NULL;
	_cleanup_free_ char *dev = scratch_loop("trim.img", 64 * MiB, &file);
	_cleanup_free_ char *mnt = scratch_mkdir("trim-mnt");
	_cleanup_free_ char *data = xasprintf("%s/data", mnt);
	_cleanup_free_ char *chunk = xmalloc(MiB);
	uint64_t trimmed = 0;

	memset(chunk, 0x5a, MiB);
	is_int(blockfs_mkfs(dev, "ext4", NULL, &err), 0, "mkfs.ext4");
	is_int(mount_fs(dev, mnt, "ext4", NULL, false), 0, "mount");
	int fd = open(data, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	bool written = fd >= 0;
	for (int i = 0; written && i < 16; i++)
		written = write(fd, chunk, MiB) == (ssize_t)MiB;
	ok(written && fsync(fd) == 0, "16 MiB written in the filesystem");
	if (fd >= 0)
		close(fd);
	uint64_t full = allocated(file);
	ok(full >= 16 * MiB, "the image holds them: %llu bytes", (unsigned long long)full);
	ok(unlink(data) == 0, "the file deleted");
	int mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(mfd >= 0 && syncfs(mfd) == 0, "synced");
	ok(allocated(file) >= 16 * MiB, "the image still holds them before a trim");
	is_int(blockfs_trim_fd(mfd, &trimmed), 0, "FITRIM");
	ok(trimmed >= 16 * MiB, "the filesystem trimmed %llu bytes", (unsigned long long)trimmed);
	ok(allocated(file) + 15 * MiB <= full, "the image gave them back: %llu -> %llu bytes",
	   (unsigned long long)full, (unsigned long long)allocated(file));
	if (mfd >= 0)
		close(mfd);
	is_int(umount_path(mnt), 1, "unmount");
	is_int(loop_detach(dev), 0, "detach");
}

int main(void)
{
	LoopInfo *l;
	size_t n;

	if (geteuid() != 0)
		TAP_SKIP_ALL("needs root for loop devices and mounts");
	if (access("/usr/sbin/mkfs.xfs", X_OK) < 0 && access("/sbin/mkfs.xfs", X_OK) < 0)
		TAP_SKIP_ALL("xfsprogs not installed");
	scratch_init("blockfs");

	test_probe_and_mkfs_ext4();
	test_partition_table();
	test_fsck();
	test_resize_ext4();
	test_xfs();
	test_uuid_and_wipe();
	test_trim();

	is_int(loop_list_for_dir(scratch, &l, &n), 0, "final list");
	is_int(n, 0, "no loop device leaked");
	loop_info_array_free(l, n);
	return tap_done();
}
