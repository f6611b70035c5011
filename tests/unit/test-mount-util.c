/* SPDX-License-Identifier: Apache-2.0 */
/* Real mounts of a real ext4 on a loop device, in a temporary directory. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "blockfs.h"
#include "loopdev.h"
#include "mount-util.h"
#include "scratch.h"
#include "tap.h"

#define MiB (1024ULL * 1024ULL)

static size_t count_mounts_at(const char *target)
{
	_cleanup_strv_free_ char **l = NULL;
	size_t n = scratch_mounts(&l), c = 0;

	for (size_t i = 0; i < n; i++)
		c += strcmp(l[i], target) == 0;
	return c;
}

/* A formatted ext4 on a fresh loop device. */
static char *make_ext4(const char *name)
{
	_cleanup_free_ char *err = NULL;
	char *dev = scratch_loop(name, 64 * MiB, NULL);

	if (blockfs_mkfs(dev, "ext4", NULL, &err) < 0) {
		printf("Bail out! cannot make ext4 on %s: %s\n", dev, err ?: "");
		exit(1);
	}
	return dev;
}

static bool has_opt(const char *optstr, const char *opt)
{
	size_t l = strlen(opt);
	for (const char *p = optstr; p && (p = strstr(p, opt)); p += l)
		if ((p == optstr || p[-1] == ',') && (p[l] == ',' || p[l] == '=' || !p[l]))
			return true;
	return false;
}

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	bool good = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	return close(fd) == 0 && good;
}

static void test_options_split(void)
{
	unsigned long flags = 0;
	char *data = NULL;

	is_int(mount_options_split("noatime,nodev,commit=7,_netdev,ro", &flags, &data), 0,
	       "split options");
	ok(flags == (MS_NOATIME | MS_NODEV | MS_RDONLY), "flags noatime|nodev|ro (%#lx)", flags);
	is_str(data, "commit=7", "filesystem data kept, userspace option dropped");
	free(data);
	is_int(mount_options_split(NULL, &flags, &data), 0, "NULL options");
	ok(flags == 0 && data == NULL, "nothing");
	is_int(mount_options_split("nosuid,bind", &flags, &data), -EINVAL, "bind refused");
	is_int(mount_options_split("remount", &flags, &data), -EINVAL, "remount refused");
	is_int(mount_options_split("rshared", &flags, &data), -EINVAL, "propagation refused");
}

static void test_mount_fs(const char *dev, const char *mnt)
{
	_cleanup_free_ char *link = scratch_path("link"), *sub = NULL, *dev2 = NULL;
	struct statvfs sv;
	struct stat st;
	MountInfo m;

	is_int(is_mount_point(mnt), 0, "not a mount point yet");
	is_int(mount_find(mnt, &m), -ENOENT, "mount_find before mounting: -ENOENT");
	is_int(mount_fs(dev, mnt, "ext4", "noatime,nodev,commit=7", false), 0, "mount ext4");
	is_int(is_mount_point(mnt), 1, "a mount point now");
	ok(statvfs(mnt, &sv) == 0 && (sv.f_flag & ST_NOATIME) && (sv.f_flag & ST_NODEV) &&
		   !(sv.f_flag & ST_RDONLY),
	   "the kernel has noatime,nodev,rw");

	is_int(mount_find(mnt, &m), 0, "mount_find");
	is_str(m.target, mnt, "target");
	is_str(m.source, dev, "source is the loop device");
	is_str(m.fstype, "ext4", "fstype");
	is_str(m.root, "/", "root");
	ok(stat(dev, &st) == 0 && m.devno == st.st_rdev, "major:minor of the device");
	ok(!m.read_only && !m.fs_read_only, "read-write");
	ok(has_opt(m.vfs_options, "noatime") && has_opt(m.vfs_options, "nodev"), "vfs options '%s'",
	   m.vfs_options);
	ok(has_opt(m.fs_options, "commit"), "fs options '%s' carry commit=7", m.fs_options);
	ok(m.id > 0 && m.parent_id > 0, "ids");
	mount_info_done(&m);

	/* The table lists canonical paths: a symlink to the mount point finds it too. */
	ok(symlink(mnt, link) == 0, "symlink to the mount point");
	is_int(mount_find(link, &m), 0, "mount_find through a symlink");
	is_str(m.target, mnt, "canonical target");
	mount_info_done(&m);

	sub = xasprintf("%s/sub", mnt);
	ok(mkdir(sub, 0755) == 0, "directory inside the mount");
	is_int(mount_find(sub, &m), -ENOENT, "a directory inside a mount is not mounted");
	is_int(is_mount_point(sub), 0, "not a mount point");
	is_int(is_mount_point("/nonexistent/x"), -ENOENT, "missing path: -ENOENT");

	/* Idempotency from the mount table. */
	is_int(mount_fs(dev, mnt, "ext4", "noatime,nodev", false), 0, "mount again: 0");
	is_int(count_mounts_at(mnt), 1, "still one mount there");
	is_int(mount_fs(dev, mnt, "ext4", NULL, true), -EEXIST, "same device read-only: -EEXIST");
	dev2 = make_ext4("other.img");
	is_int(mount_fs(dev2, mnt, "ext4", NULL, false), -EEXIST, "another device: -EEXIST");
	is_int(count_mounts_at(mnt), 1, "nothing stacked");
	is_int(mount_fs(dev2, sub, "ext4", "bind", false), -EINVAL, "bind option refused");
	is_int(mount_fs(dev2, sub, NULL, NULL, false), -EINVAL, "no fstype refused");
	is_int(mount_fs(dev2, sub, "xfs", NULL, false), -EINVAL,
	       "wrong fstype: the kernel's -EINVAL");
	is_int(is_mount_point(sub), 0, "nothing mounted by the failures");
	is_int(loop_detach(dev2), 0, "detach the other device");

	/* A mounted device is busy: no deferred detach behind the mount's back. */
	is_int(loop_detach(dev), -EBUSY, "detach while mounted: -EBUSY");
	LoopInfo li;
	is_int(loop_get_info(dev, &li), 0, "still attached");
	ok(!li.autoclear, "no autoclear set");
	loop_info_done(&li);
}

static void test_bind(const char *dev, const char *mnt)
{
	_cleanup_free_ char *data = xasprintf("%s/data", mnt), *file = NULL, *pub = NULL,
			    *pub_file = NULL, *pub2 = NULL, *blk = NULL;
	char buf[16] = {};
	struct statvfs sv;
	struct stat a, b;
	MountInfo m;

	ok(mkdir(data, 0755) == 0, "data directory");
	file = xasprintf("%s/hello", data);
	ok(write_file(file, "hello"), "file written on the staged fs");
	pub = scratch_mkdir("pub");
	pub_file = xasprintf("%s/hello", pub);

	is_int(mount_bind(data, pub, true, NULL), 0, "bind read-only");
	is_int(is_mount_point(pub), 1, "bind is a mount point");
	int fd = open(pub_file, O_RDONLY | O_CLOEXEC);
	ok(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 5 && strcmp(buf, "hello") == 0,
	   "data readable through the bind");
	if (fd >= 0)
		close(fd);
	errno = 0;
	fd = open(pub_file, O_WRONLY | O_APPEND | O_CLOEXEC);
	ok(fd < 0 && errno == EROFS, "writing through the bind: EROFS (%s)", strerror(errno));
	if (fd >= 0)
		close(fd);
	_cleanup_free_ char *newf = xasprintf("%s/new", pub);
	errno = 0;
	ok(!write_file(newf, "x") && errno == EROFS, "creating a file: EROFS");
	ok(write_file(file, "still rw"), "the staging mount stays writable");

	is_int(mount_find(pub, &m), 0, "mount_find on the bind");
	ok(m.read_only, "read-only mount");
	ok(!m.fs_read_only, "superblock still read-write");
	is_str(m.root, "/data", "root is the bound subdirectory");
	is_str(m.fstype, "ext4", "fstype");
	mount_info_done(&m);

	is_int(mount_bind(data, pub, true, NULL), 0, "same bind again: 0");
	is_int(count_mounts_at(pub), 1, "not stacked");
	is_int(mount_bind(data, pub, false, NULL), -EEXIST, "same source read-write: -EEXIST");
	is_int(mount_bind(mnt, pub, true, NULL), -EEXIST, "other source: -EEXIST");

	/* Per-mount flags on a read-write bind; filesystem options are ignored. */
	pub2 = scratch_mkdir("pub2");
	is_int(mount_bind(data, pub2, false, "nosuid,noexec,discard"), 0,
	       "bind with nosuid,noexec");
	ok(statvfs(pub2, &sv) == 0 && (sv.f_flag & ST_NOSUID) && (sv.f_flag & ST_NOEXEC) &&
		   !(sv.f_flag & ST_RDONLY),
	   "the kernel has nosuid,noexec,rw");
	is_int(mount_bind(data, pub2, false, "bind"), -EINVAL, "bind option refused");

	/* A file bind of the device node: what a block volume publish does. */
	blk = scratch_path("blockdev");
	ok(write_file(blk, ""), "target file");
	is_int(mount_bind(dev, blk, false, NULL), 0, "bind the device node onto a file");
	ok(stat(blk, &a) == 0 && stat(dev, &b) == 0 && S_ISBLK(a.st_mode) && a.st_rdev == b.st_rdev,
	   "the file is the block device now");
	is_int(mount_bind(dev, blk, false, NULL), 0, "again: 0");

	/* The superblock turns read-only under a read-write bind: fs_read_only tells. */
	ok(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0,
	   "staging remounted read-only (as errors=remount-ro would)");
	is_int(mount_find(pub2, &m), 0, "mount_find on the rw bind");
	ok(!m.read_only && m.fs_read_only, "vfs rw, superblock ro ('%s' / '%s')", m.vfs_options,
	   m.fs_options);
	mount_info_done(&m);
	ok(mount(NULL, mnt, NULL, MS_REMOUNT, NULL) == 0, "staging back to read-write");

	is_int(umount_path(blk), 1, "unmount the device bind");
	is_int(umount_path(pub2), 1, "unmount pub2");
	is_int(umount_path(pub), 1, "unmount the read-only bind");
	is_int(umount_path(pub), 0, "unmount again: 0");
	is_int(is_mount_point(pub), 0, "gone");
	is_int(umount_path("/nonexistent/x"), 0, "missing path: 0");
}

/* The mounts of a device, found by its number. Called while dev is mounted at mnt. */
static void test_list_by_devno(const char *dev, const char *mnt)
{
	_cleanup_free_ char *idle = scratch_loop("idle.img", MiB, NULL);
	_cleanup_strv_free_ char **targets = NULL;
	struct stat st;

	ok(stat(dev, &st) == 0, "stat %s", dev);
	is_int(mount_list_by_devno(st.st_rdev, &targets), 0, "mount_list_by_devno");
	ok(strv_length(targets) == 1 && strcmp(targets[0], mnt) == 0,
	   "the device's one mount point");
	strv_free(TAKE_PTR(targets));
	ok(stat(idle, &st) == 0, "stat %s", idle);
	is_int(mount_list_by_devno(st.st_rdev, &targets), 0, "a device mounted nowhere");
	ok(targets == NULL, "has no mount point");
	is_int(loop_detach(idle), 0, "detach it");
}

static void test_stacked(void)
{
	_cleanup_free_ char *stack = scratch_mkdir("stack");
	MountInfo m;

	ok(mount("tmpfs", stack, "tmpfs", 0, "size=1m") == 0 &&
		   mount("tmpfs", stack, "tmpfs", 0, "size=2m") == 0,
	   "two tmpfs stacked");
	is_int(count_mounts_at(stack), 2, "two in the table");
	is_int(mount_find(stack, &m), 0, "mount_find");
	ok(has_opt(m.fs_options, "size") && strstr(m.fs_options, "size=2048k"),
	   "the topmost one (%s)", m.fs_options);
	mount_info_done(&m);
	is_int(umount_all_at(stack), 2, "umount_all_at removes both");
	is_int(count_mounts_at(stack), 0, "none left");
	is_int(umount_all_at(stack), 0, "again: 0");
}

/* The fd-based calls, with the new mount API and with mount(2) through /proc/self/fd. */
static void test_fd_mounts(const char *dev, bool legacy)
{
	const char *how = legacy ? "mount(2)" : "new API";
	_cleanup_free_ char *stage = scratch_mkdir(legacy ? "fd-stage-legacy" : "fd-stage");
	_cleanup_free_ char *target = scratch_mkdir(legacy ? "fd-target-legacy" : "fd-target");
	_cleanup_free_ char *link = scratch_path(legacy ? "fd-link-legacy" : "fd-link");
	_cleanup_free_ char *err = NULL;
	PinnedPath sp = PINNED_PATH_NULL, tp = PINNED_PATH_NULL, lp = PINNED_PATH_NULL;
	PathObject o;
	struct statvfs sv;
	MountInfo m;

	mount_force_legacy_api(legacy);
	ok(pinned_path_open(stage, &sp) == 0 && pinned_path_open(target, &tp) == 0, "%s: pinned",
	   how);
	_cleanup_close_ int sfd = pinned_path_open_object(&sp, O_PATH | O_DIRECTORY);
	is_int(mount_fs_at(dev, sfd, "ext4", "noatime,nodev", false, &err), 0, "%s: mount_fs_at",
	       how);
	ok(mount_find(stage, &m) == 0 && has_opt(m.vfs_options, "noatime") &&
		   has_opt(m.vfs_options, "nodev"),
	   "%s: mounted with its flags", how);
	mount_info_done(&m);
	ok(pinned_path_stat(&sp, &o) == 0 && o.mount_root, "%s: a mount root now", how);

	_cleanup_close_ int root = pinned_path_open_object(&sp, O_PATH | O_DIRECTORY);
	_cleanup_close_ int tfd = pinned_path_open_object(&tp, O_PATH | O_DIRECTORY);
	is_int(mount_bind_at(root, &tp, tfd, true, "nosuid"), 0, "%s: bind read-only, nosuid", how);
	ok(statvfs(target, &sv) == 0 && (sv.f_flag & ST_RDONLY) && (sv.f_flag & ST_NOSUID),
	   "%s: the bind has both flags", how);
	is_int(count_mounts_at(target), 1, "%s: one mount at the target", how);

	/* A symlink to the mount is never followed by the unmount. */
	ok(symlink(stage, link) == 0 && pinned_path_open(link, &lp) == 0, "%s: a symlink pinned",
	   how);
	is_int(umount_at(&lp), 0, "%s: unmounting through a symlink does nothing", how);
	is_int(count_mounts_at(stage), 1, "%s: the mount behind it is still there", how);

	is_int(umount_at(&tp), 1, "%s: unmount the bind", how);
	is_int(umount_at(&tp), 0, "%s: nothing left to unmount", how);
	is_int(umount_at(&sp), -EBUSY, "%s: an fd open on the mount keeps it busy", how);
	closep(&root);
	is_int(umount_at(&sp), 1, "%s: unmount the filesystem", how);
	pinned_path_done(&sp);
	pinned_path_done(&tp);
	pinned_path_done(&lp);
	mount_force_legacy_api(false);
}

static void test_options_check(void)
{
	_cleanup_free_ char *err = NULL;

	is_int(mount_options_check("ext4", "noatime", &err), 0, "a per-mount flag");
	is_int(mount_options_check("ext4", "data=ordered", &err), 0, "an ext4 option");
	is_int(mount_options_check("xfs", "nouuid", &err), 0, "an xfs option");
	is_int(mount_options_check("ext4", "nouuid", &err), -EINVAL, "an xfs option for ext4");
	ok(err && strstr(err, "nouuid"), "the error names it: %s", err ?: "");
	free(TAKE_PTR(err));
	is_int(mount_options_check("ext4", "bind", &err), -EINVAL, "an operation, not an option");
	free(TAKE_PTR(err));
	is_int(mount_options_check("nosuchfs", "ro", &err), -EINVAL, "an unknown filesystem type");
}

int main(void)
{
	MountInfo m;

	if (geteuid() != 0)
		TAP_SKIP_ALL("needs root for mounts and loop devices");
	scratch_init("mount");

	test_options_split();
	_cleanup_free_ char *dev = make_ext4("vol.img");
	_cleanup_free_ char *mnt = scratch_mkdir("staging");
	test_mount_fs(dev, mnt);
	test_list_by_devno(dev, mnt);
	test_bind(dev, mnt);
	test_stacked();
	test_options_check();
	test_fd_mounts(dev, false);
	test_fd_mounts(dev, true);

	is_int(umount_path(mnt), 1, "unmount the staging mount");
	is_int(mount_find(mnt, &m), -ENOENT, "gone from the table");
	is_int(loop_detach(dev), 0, "detach after unmount");
	char **l = NULL;
	is_int(scratch_mounts(&l), 0, "no mount leaked");
	strv_free(l);
	return tap_done();
}
