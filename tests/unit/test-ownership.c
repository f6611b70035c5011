/* SPDX-License-Identifier: Apache-2.0 */
/* The fsGroup walk on real trees: every rule asserted on disk, the symlink-swap race, a tree
 * 100,000 levels deep under a low fd limit, a tree moved under the walk, mounts; wide
 * directories examined through io_uring and without it, with the same results. Needs root. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>

#if HAVE_LIBURING
#include <linux/io_uring.h>
#endif

#include "alloc.h"
#include "ownership.h"
#include "tap.h"

#define G 4321
#define G2 4322
#define OWNER 1234
#define DEEP 100000
#define NO_URING "VOLPLUG_OWNERSHIP_NO_URING"

/* tap.h's is_int evaluates its first argument twice: a call with side effects goes here. */
#define is_call(call, want, ...)                   \
	do {                                       \
		long long _got = (call);           \
		is_int(_got, (want), __VA_ARGS__); \
	} while (0)

static char base[64];
static int base_fd = -EBADF;

/* --- building and checking trees ------------------------------------------------------ */

static void mkfile(int dfd, const char *name, mode_t mode, uid_t uid)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || fchown(fd, uid, 0) < 0 || fchmod(fd, mode) < 0) {
		printf("# create %s: %m\n", name);
		exit(1);
	}
	close(fd);
}

static int mkdir_open(int dfd, const char *name, mode_t mode)
{
	if (mkdirat(dfd, name, 0700) < 0 || fchmodat(dfd, name, mode, 0) < 0) {
		printf("# mkdir %s: %m\n", name);
		exit(1);
	}
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		exit(1);
	return fd;
}

static struct stat lstat_at(int dfd, const char *name)
{
	struct stat st = {};
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		printf("# stat %s: %m\n", name);
	return st;
}

static void check(int dfd, const char *name, mode_t mode, gid_t gid, const char *what)
{
	struct stat st = lstat_at(dfd, name);
	ok((st.st_mode & 07777) == mode, "%s: %s has mode %04o (want %04o)", what, name,
	   st.st_mode & 07777, mode);
	ok(st.st_gid == gid, "%s: %s has group %u (want %u)", what, name, st.st_gid, gid);
}

static char *path_of(const char *name)
{
	return xasprintf("%s/%s", base, name);
}

static int set_flags(int dfd, const char *name, int flags)
{
	int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	int r = ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* Removes dir_fd/name and everything below it, without recursion: the deep tree needs it. */
static int rm_tree(int dir_fd, const char *name)
{
	char **stack = NULL, buf[8192];
	size_t n = 0, n_alloc = 0;
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (;;) {
		bool seen = false;
		char *sub = NULL;
		ssize_t len;

		lseek(fd, 0, SEEK_SET);
		while (!sub && (len = getdents64(fd, buf, sizeof(buf))) > 0)
			for (ssize_t off = 0; off < len && !sub;) {
				struct dirent64 *de = (struct dirent64 *)(buf + off);
				off += de->d_reclen;
				if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
					continue;
				seen = true;
				struct stat st = lstat_at(fd, de->d_name);
				if (S_ISDIR(st.st_mode))
					sub = xstrdup(de->d_name);
				else if (unlinkat(fd, de->d_name, 0) < 0)
					return -errno;
			}
		if (sub) {
			int child =
				openat(fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child < 0)
				return -errno;
			close(fd);
			fd = child;
			if (n ==
			    n_alloc) { /* doubling: one realloc per level is quadratic under ASan */
				n_alloc = n_alloc ? 2 * n_alloc : 64;
				stack = xrealloc(stack, n_alloc * sizeof(char *));
			}
			stack[n++] = sub;
			continue;
		}
		if (seen)
			continue; /* unlinked some: list again until empty */
		if (n == 0) {
			close(fd);
			free(stack);
			return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
		}
		int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		if (up < 0 || unlinkat(up, stack[n - 1], AT_REMOVEDIR) < 0)
			return -errno;
		free(stack[--n]);
		fd = up;
	}
}

static int apply(const char *name, gid_t gid, bool ro, OwnershipPolicy policy, OwnershipReport *rep)
{
	_cleanup_free_ char *p = path_of(name);
	ownership_report_done(rep);
	*rep = (OwnershipReport){};
	return ownership_apply(p, gid, ro, policy, NULL, rep);
}

/* --- the tests -------------------------------------------------------------------------- */

static void test_policy_strings(void)
{
	is_int(ownership_policy_from_string("Always"), OWNERSHIP_ALWAYS, "Always");
	is_int(ownership_policy_from_string("onrootmismatch"), OWNERSHIP_ON_ROOT_MISMATCH,
	       "OnRootMismatch, any case");
	is_int(ownership_policy_from_string("Never"), -EINVAL, "unknown policy");
	is_int(ownership_policy_from_string(NULL), -EINVAL, "NULL policy");
	is_str(ownership_policy_to_string(OWNERSHIP_ON_ROOT_MISMATCH), "OnRootMismatch",
	       "policy name");
	ok(!ownership_policy_to_string(_OWNERSHIP_POLICY_MAX), "no name out of range");
}

static void test_no_group(void)
{
	OwnershipReport rep = {};
	int d = mkdir_open(base_fd, "nogroup", 0700);
	mkfile(d, "f", 0600, 0);

	is_call(apply("nogroup", OWNERSHIP_GID_NONE, false, OWNERSHIP_ALWAYS, &rep), 0,
		"no group: succeeds");
	ok(rep.skipped && rep.entries == 0 && rep.changed == 0, "no group: nothing walked");
	check(base_fd, "nogroup", 0700, 0, "no group");
	check(d, "f", 0600, 0, "no group");
	is_call(ownership_apply("/nonexistent/volplug", OWNERSHIP_GID_NONE, false, OWNERSHIP_ALWAYS,
				NULL, &rep),
		0, "no group: the path is not even looked at");
	close(d);
	ownership_report_done(&rep);
}

static void test_rules(void)
{
	OwnershipReport rep = {};
	int r = mkdir_open(base_fd, "rules", 0755);
	int outside = mkdir_open(base_fd, "outside", 0700);
	mkfile(outside, "secret", 0600, 0);
	_cleanup_free_ char *outside_path = path_of("outside");
	_cleanup_free_ char *secret_path = path_of("outside/secret");
	uint64_t expect = 1; /* the root */

	mkfile(r, "f", 0600, OWNER), expect++;
	mkfile(r, "other-w", 0607, 0), expect++;
	mkfile(r, "zero", 0000, 0), expect++;
	mkfile(r, "suid", 04755, OWNER), expect++;
	mkfile(r, "sgid-x", 02750, 0), expect++;
	int d = mkdir_open(r, "d", 0700);
	expect++;
	int e = mkdir_open(d, "e", 0500);
	expect++;
	mkfile(e, "deep", 0644, 0), expect++;
	close(e);
	int s = mkdir_open(r, "sticky", 01700);
	expect++;
	close(s);
	ok(symlinkat(secret_path, r, "lnk") == 0, "symlink to a file outside");
	ok(symlinkat(outside_path, r, "dlnk") == 0, "symlink to a directory outside");
	expect += 2;
	ok(mkfifoat(r, "fifo", 0600) == 0, "fifo");
	expect++;
	mkfile(r, "h1", 0640, 0), expect++;
	ok(linkat(r, "h1", d, "h2", 0) == 0, "hard link"), expect++;

	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/rules/sock", base);
	ok(bind(sock, (struct sockaddr *)&sa, sizeof(sa)) == 0, "socket bound");
	close(sock);
	fchmodat(r, "sock", 0600, 0);
	expect++;

	bool have_dev = mknodat(r, "null", S_IFCHR | 0600, makedev(1, 3)) == 0;
	if (have_dev)
		expect++;
	else
		printf("# mknod: %m (device node not covered)\n");

	is_call(apply("rules", G, false, OWNERSHIP_ALWAYS, &rep), 0, "rules: walk succeeds");
	is_int(rep.errors, 0, "rules: no errors (%s)", rep.first_errors ?: "");
	is_int(rep.entries, expect, "rules: every entry examined");
	is_int(rep.changed, expect - 1,
	       "rules: every entry changed (a hard link's second name "
	       "finds it done)");
	ok(!rep.skipped, "rules: walked");

	check(base_fd, "rules", 02775, G, "root dir: g+rwx, setgid, bits kept");
	check(r, "f", 0660, G, "file");
	ok(lstat_at(r, "f").st_uid == OWNER, "owner untouched");
	check(r, "other-w", 0667, G, "bits never removed (o+rwx kept)");
	check(r, "zero", 0660, G, "mode 0000 gets the Kubernetes 0660");
	check(r, "suid", 04775, G, "setuid survives the chown");
	ok(lstat_at(r, "suid").st_uid == OWNER, "setuid file keeps its owner");
	check(r, "sgid-x", 02770, G, "setgid file survives the chown");
	check(r, "d", 02770, G, "directory: setgid and g+x");
	check(d, "e", 02770, G, "nested directory");
	check(d, "h2", 0660, G, "hard link, second name");
	check(r, "h1", 0660, G, "hard link, first name");
	is_int(lstat_at(r, "h1").st_nlink, 2, "still one inode with two names");
	check(r, "sticky", 03770, G, "sticky bit kept");
	check(r, "fifo", 0660, G, "fifo");
	check(r, "sock", 0660, G, "socket");
	if (have_dev) {
		check(r, "null", 0660, G, "char device");
		ok(lstat_at(r, "null").st_rdev == makedev(1, 3), "device number unchanged");
	}
	ok(lstat_at(r, "lnk").st_gid == G, "symlink's own group changed");
	ok(lstat_at(r, "dlnk").st_gid == G, "symlink to dir: own group changed");
	check(base_fd, "outside", 0700, 0, "symlink target dir untouched");
	check(outside, "secret", 0600, 0, "symlink target file untouched");

	e = openat(d, "e", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(e, "deep", 0664, G, "file two levels down");

	/* Second run: nothing to do, and no syscall that would touch ctime. */
	struct stat before = lstat_at(e, "deep"), dbefore = lstat_at(r, "d");
	nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
	is_call(apply("rules", G, false, OWNERSHIP_ALWAYS, &rep), 0, "second run succeeds");
	is_int(rep.changed, 0, "second run: zero changes");
	is_int(rep.entries, expect, "second run: same entries");
	is_int(rep.errors, 0, "second run: no errors");
	struct stat after = lstat_at(e, "deep"), dafter = lstat_at(r, "d");
	ok(before.st_ctim.tv_sec == after.st_ctim.tv_sec &&
		   before.st_ctim.tv_nsec == after.st_ctim.tv_nsec &&
		   dbefore.st_ctim.tv_nsec == dafter.st_ctim.tv_nsec,
	   "second run: no chown/chmod syscall (ctime unchanged)");

	/* Another group: everything moves to it, modes stay. */
	is_call(apply("rules", G2, false, OWNERSHIP_ALWAYS, &rep), 0, "new group");
	is_int(rep.changed, expect - 1, "new group: every inode changed");
	check(r, "suid", 04775, G2, "new group: setuid still there");
	check(base_fd, "rules", 02775, G2, "new group: root");

	/* The fd API, on an O_PATH fd the caller keeps. */
	int p = openat(base_fd, "rules", O_PATH | O_DIRECTORY | O_CLOEXEC);
	is_call(ownership_apply_fd(p, G, false, OWNERSHIP_ALWAYS, NULL, &rep), 0, "fd API");
	is_int(rep.changed, expect - 1, "fd API: every inode changed");
	check(e, "deep", 0664, G, "fd API: deep file");
	ok(fcntl(p, F_GETFD) >= 0, "fd API: the caller's fd stays open");
	close(p);

	close(e);
	close(d);
	close(r);
	close(outside);
	ownership_report_done(&rep);
}

static void test_read_only(void)
{
	OwnershipReport rep = {};
	int r = mkdir_open(base_fd, "ro", 0700);
	mkfile(r, "f", 0600, 0);
	mkfile(r, "w", 0200, 0);
	close(mkdir_open(r, "d", 0700));

	is_call(apply("ro", G, true, OWNERSHIP_ALWAYS, &rep), 0, "read-only: succeeds");
	is_int(rep.changed, 4, "read-only: all changed");
	check(base_fd, "ro", 02750, G, "read-only root: g+rx and setgid, no g+w");
	check(r, "f", 0640, G, "read-only file: g+r, no g+w");
	check(r, "w", 0640, G, "read-only: u+w kept, u+r g+r added");
	check(r, "d", 02750, G, "read-only directory");
	close(r);
	ownership_report_done(&rep);
}

static void test_on_root_mismatch(void)
{
	OwnershipReport rep = {};
	int r = mkdir_open(base_fd, "orm", 0755);
	int d = mkdir_open(r, "d", 0755);
	mkfile(d, "f", 0644, 0);

	is_call(apply("orm", G, false, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM: first run");
	ok(!rep.skipped && rep.changed == 3, "ORM: root not done yet, so it walked");
	check(d, "f", 0664, G, "ORM: first run fixed the tree");

	fchownat(d, "f", -1, 0, 0); /* behind its back */
	usec_t best = USEC_INFINITY;
	for (int i = 0; i < 5; i++) {
		is_call(apply("orm", G, false, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM: again");
		best = MIN(best, rep.elapsed);
	}
	ok(rep.skipped && rep.entries == 1 && rep.changed == 0, "ORM: root done, skipped");
	check(d, "f", 0664, 0, "ORM: skipped means the tree was not walked");
	ok(best < 1000, "ORM: skip takes %llu us (< 1 ms)", (unsigned long long)best);

	is_call(apply("orm", G, true, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM read-only");
	ok(rep.skipped, "ORM: a read-write root also satisfies read-only");

	is_call(apply("orm", G, false, OWNERSHIP_ALWAYS, &rep), 0, "Always after ORM");
	ok(!rep.skipped && rep.changed == 1, "Always walks although the root is done");
	check(d, "f", 0664, G, "Always: fixed");

	fchmodat(base_fd, "orm", 0775, 0); /* setgid lost */
	fchownat(d, "f", -1, 0, 0);
	is_call(apply("orm", G, false, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM: no setgid");
	ok(!rep.skipped && rep.changed == 2, "ORM: root without setgid, walked");
	check(base_fd, "orm", 02775, G, "ORM: root fixed");
	check(d, "f", 0664, G, "ORM: tree fixed");

	fchmodat(base_fd, "orm", 02755, 0); /* no g+w */
	is_call(apply("orm", G, false, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM: no g+w");
	ok(!rep.skipped, "ORM: root without g+w, walked");
	check(base_fd, "orm", 02775, G, "ORM: g+w added");

	is_call(apply("orm", G2, false, OWNERSHIP_ON_ROOT_MISMATCH, &rep), 0, "ORM: other gid");
	ok(!rep.skipped && rep.changed == 3, "ORM: other group, walked");
	check(d, "f", 0664, G2, "ORM: moved to the other group");
	close(d);
	close(r);
	ownership_report_done(&rep);
}

static void test_errors(void)
{
	OwnershipReport rep = {};
	int r = mkdir_open(base_fd, "err", 0700);
	mkfile(r, "a", 0600, 0);
	mkfile(r, "imm", 0600, 0);
	mkfile(r, "z", 0600, 0);
	int d = mkdir_open(r, "immd", 0700);
	mkfile(d, "inner", 0600, 0);
	close(d);

	int k = set_flags(r, "imm", FS_IMMUTABLE_FL);
	if (k < 0) {
		printf("# chattr +i: %s\n", strerror(-k));
		ok(1, "# SKIP no immutable attribute on this filesystem");
		close(r);
		return;
	}
	set_flags(r, "immd", FS_IMMUTABLE_FL);
	is_call(apply("err", G, false, OWNERSHIP_ALWAYS, &rep), 0,
		"unchangeable entries are not fatal");
	is_int(rep.errors, 2, "errors counted");
	ok(rep.first_errors && strstr(rep.first_errors, "imm: chown: Operation not permitted\n") &&
		   strstr(rep.first_errors, "immd: chown: Operation not permitted\n"),
	   "errors name the entries: %s", rep.first_errors ?: "(none)");
	check(r, "imm", 0600, 0, "immutable file unchanged");
	check(r, "a", 0660, G, "entry before it fixed");
	check(r, "z", 0660, G, "entry after it fixed");
	d = openat(r, "immd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(d, "inner", 0660, G, "inside an unchangeable directory still fixed");
	close(d);
	check(base_fd, "err", 02770, G, "root fixed");
	set_flags(r, "imm", 0);
	set_flags(r, "immd", 0);
	close(r);

	is_call(ownership_apply("/nonexistent/volplug", G, false, OWNERSHIP_ALWAYS, NULL, &rep),
		-ENOENT, "root missing: fatal -ENOENT");
	_cleanup_free_ char *file = path_of("err/a");
	is_call(ownership_apply(file, G, false, OWNERSHIP_ALWAYS, NULL, &rep), -ENOTDIR,
		"root not a directory: -ENOTDIR");
	_cleanup_free_ char *dir = path_of("err");
	is_call(ownership_apply(dir, G, false, (OwnershipPolicy)7, NULL, &rep), -EINVAL,
		"bad policy: -EINVAL");
	ownership_report_done(&rep);
}

static void test_mounts(void)
{
	OwnershipReport rep = {};
	int r = mkdir_open(base_fd, "mnt", 0700);
	close(mkdir_open(r, "tmp", 0700));
	close(mkdir_open(r, "bind", 0700));
	int other = mkdir_open(base_fd, "bindsrc", 0700);
	mkfile(other, "x", 0600, 0);
	_cleanup_free_ char *tmp = path_of("mnt/tmp"), *bind = path_of("mnt/bind"),
			    *src = path_of("bindsrc");

	if (mount("tmpfs", tmp, "tmpfs", 0, "mode=0700") < 0 ||
	    mount(src, bind, NULL, MS_BIND, NULL) < 0) {
		printf("# mount: %m\n");
		ok(1, "# SKIP cannot mount here");
		close(r);
		close(other);
		return;
	}
	int t = openat(r, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	mkfile(t, "y", 0600, 0);

	is_call(apply("mnt", G, false, OWNERSHIP_ALWAYS, &rep), 0, "tree with mounts");
	is_int(rep.mounts, 2, "two mounts found and left alone");
	check(t, "y", 0600, 0, "tmpfs below the root untouched");
	check(r, "tmp", 0700, 0, "its mount point untouched");
	check(other, "x", 0600, 0, "bind mount of the same filesystem untouched");
	check(base_fd, "mnt", 02770, G, "root fixed");
	close(t);
	umount2(tmp, MNT_DETACH);
	umount2(bind, MNT_DETACH);
	check(r, "tmp", 0700, 0, "unmounted: the directory under the mount was not touched");
	check(r, "bind", 0700, 0, "unmounted: same for the bind mount point");
	close(r);
	close(other);
	ownership_report_done(&rep);
}

/* Swaps a directory for a symlink to outside, and a file for a symlink to an outside file,
 * as fast as it can, until told to stop. */
typedef struct Swapper {
	int dfd;
	atomic_bool stop;
	atomic_ulong swaps;
} Swapper;

static void *swapper(void *userdata)
{
	Swapper *s = userdata;

	while (!atomic_load(&s->stop)) {
		if (renameat2(s->dfd, "sw", s->dfd, "sl", RENAME_EXCHANGE) == 0)
			atomic_fetch_add(&s->swaps, 1);
		if (renameat2(s->dfd, "fsw", s->dfd, "fsl", RENAME_EXCHANGE) == 0)
			atomic_fetch_add(&s->swaps, 1);
	}
	return NULL;
}

/* fillers: that many more files in the raced directory, half created before the swapped
 * names and half after, so that in either listing order the swapped names sit in the middle
 * of a batch the walk sends through io_uring (256 entries at a time). */
static void test_swap_race(int dfd, const char *dir, unsigned fillers, usec_t duration,
			   unsigned min_walks, const char *what)
{
	OwnershipReport rep = {};
	int r = mkdir_open(dfd, "race", 0700);
	int out = mkdir_open(dfd, "race-outside", 0700);
	char fname[32];

	for (unsigned i = 0; i < fillers / 2; i++) {
		snprintf(fname, sizeof(fname), "a%u", i);
		mkfile(r, fname, 0600, 0);
	}
	mkfile(out, "inner", 0600, 0);
	mkfile(out, "file", 0600, 0);
	int sw = mkdir_open(r, "sw", 0700);
	mkfile(sw, "inner", 0600, 0);
	close(mkdir_open(sw, "sub", 0700));
	mkfile(r, "fsw", 0600, 0);
	int fsw = openat(r, "fsw", O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *outp = xasprintf("%s/race-outside", dir),
			    *outf = xasprintf("%s/race-outside/file", dir),
			    *race = xasprintf("%s/race", dir);
	symlinkat(outp, r, "sl");
	symlinkat(outf, r, "fsl");
	for (unsigned i = fillers / 2; i < fillers; i++) {
		snprintf(fname, sizeof(fname), "z%u", i);
		mkfile(r, fname, 0600, 0);
	}

	Swapper s = {.dfd = r};
	pthread_t t;
	pthread_create(&t, NULL, swapper, &s);
	unsigned walks = 0, errors = 0, batched = 0;
	usec_t end = now_usec(CLOCK_MONOTONIC) + duration;
	while (walks < 20000 && now_usec(CLOCK_MONOTONIC) < end) {
		/* Undo the last walk through fds that follow the real inodes, so that every walk
		 * has chowns and chmods to do. */
		fchmod(sw, 0700);
		fchmodat(sw, "inner", 0600, 0);
		fchmodat(sw, "sub", 0700, 0);
		fchmod(fsw, 0600);
		ownership_report_done(&rep);
		if (ownership_apply(race, walks % 2 ? G : G2, false, OWNERSHIP_ALWAYS, NULL, &rep) <
		    0)
			break;
		errors += rep.errors;
		batched += rep.batched;
		walks++;
	}
	atomic_store(&s.stop, true);
	pthread_join(t, NULL);

	printf("# %s: %u walks (%u through io_uring), %lu swaps, %u entry errors\n", what, walks,
	       batched, atomic_load(&s.swaps), errors);
	ok(walks >= min_walks && atomic_load(&s.swaps) >= min_walks,
	   "%s: many walks against many swaps", what);
	_cleanup_free_ char *never = xasprintf("%s: outside never changed", what);
	check(dfd, "race-outside", 0700, 0, never);
	check(out, "inner", 0600, 0, never);
	check(out, "file", 0600, 0, never);
	struct stat st;
	fstat(sw, &st);
	ok(st.st_gid == G || st.st_gid == G2, "%s: the real directory was fixed", what);
	close(sw);
	close(fsw);
	close(out);
	close(r);
	ownership_report_done(&rep);
}

/* Whether this kernel lets the walk set up an io_uring (the walk falls back when not). */
static bool uring_works(void)
{
#if HAVE_LIBURING
	struct io_uring_params params = {};
	int fd = (int)syscall(__NR_io_uring_setup, 4, &params);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	printf("# io_uring_setup: %m: walks here examine one entry at a time\n");
#else
	printf("# built without liburing: walks examine one entry at a time\n");
#endif
	return false;
}

/* A directory of 700 entries of every kind, 600 of them not directories: two full io_uring
 * batches and a rest examined one at a time. */
static void make_wide(const char *name)
{
	int r = mkdir_open(base_fd, name, 0755);
	_cleanup_free_ char *secret = path_of("wide-outside/secret");
	char n[32];

	for (int i = 0; i < 700; i++) {
		snprintf(n, sizeof(n), "e%03d", i);
		switch (i % 7) {
		case 0:
			mkfile(r, n, 0600, OWNER);
			break;
		case 1:
			mkfile(r, n, 04755, OWNER);
			break;
		case 2:
			mkfile(r, n, 0000, 0);
			break;
		case 3:
			if (symlinkat(secret, r, n) < 0)
				exit(1);
			break;
		case 4:
			if (mkfifoat(r, n, 0604) < 0)
				exit(1);
			break;
		case 5:
			mkfile(r, n, 02750, 0);
			break;
		default: {
			int d = mkdir_open(r, n, i % 2 ? 0700 : 0750);
			mkfile(d, "inner", 0640, 0);
			close(d);
		}
		}
	}
	if (linkat(r, "e000", r, "hard", 0) < 0)
		exit(1);
	close(r);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "path mode uid gid" for every entry below dfd/name (two levels), sorted: what is on disk. */
static char *listing(int dfd, const char *name)
{
	char **lines = NULL;
	size_t n = 0, total = 1;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		for (int level = 0; level < 2; level++) {
			_cleanup_free_ char *sub =
				level ? xasprintf("%s/inner", de->d_name) : xstrdup(de->d_name);
			struct stat st;
			if (fstatat(fd, sub, &st, AT_SYMLINK_NOFOLLOW) < 0)
				break;
			lines = xrealloc(lines, (n + 1) * sizeof(char *));
			lines[n] =
				xasprintf("%s %06o %u %u\n", sub, st.st_mode, st.st_uid, st.st_gid);
			total += strlen(lines[n++]);
			if (!S_ISDIR(st.st_mode))
				break;
		}
	}
	if (d)
		closedir(d);
	qsort(lines, n, sizeof(char *), cmp_str);
	char *all = xmalloc(total), *p = all;
	*p = 0;
	for (size_t i = 0; i < n; i++) {
		p = stpcpy(p, lines[i]);
		free(lines[i]);
	}
	free(lines);
	return all;
}

/* Applies gid to wide-a with io_uring allowed and to wide-b with the fallback forced, then
 * asserts the same reports and the same trees on disk. */
static void apply_both_ways(gid_t gid, bool ro, bool ring, const char *what)
{
	OwnershipReport a = {}, b = {};

	is_call(apply("wide-a", gid, ro, OWNERSHIP_ALWAYS, &a), 0, "%s, io_uring: walk succeeds",
		what);
	is_int(a.batched, ring, "%s: examined through io_uring where the kernel allows it", what);
	setenv(NO_URING, "1", 1);
	is_call(apply("wide-b", gid, ro, OWNERSHIP_ALWAYS, &b), 0,
		"%s, " NO_URING "=1: walk succeeds", what);
	unsetenv(NO_URING);
	ok(!b.batched, "%s, " NO_URING "=1: one statx per entry", what);

	/* Through io_uring both names of the hard link may be examined before either is
	 * changed: the second then repeats the same change and counts it again. */
	ok(a.entries == b.entries && (a.changed == b.changed || a.changed == b.changed + 1) &&
		   a.errors == b.errors && a.mounts == b.mounts,
	   "%s: same counts both ways (%" PRIu64 "/%" PRIu64 " entries, %" PRIu64 "/%" PRIu64
	   " changed, %" PRIu64 "/%" PRIu64 " errors)",
	   what, a.entries, b.entries, a.changed, b.changed, a.errors, b.errors);
	is_str(a.first_errors ?: "", b.first_errors ?: "", "%s: same errors both ways", what);
	_cleanup_free_ char *la = listing(base_fd, "wide-a"), *lb = listing(base_fd, "wide-b");
	bool same = strcmp(la, lb) == 0;
	for (const char *p = la, *q = lb; !same && *p;
	     p = strchr(p, '\n') + 1, q = strchr(q, '\n') + 1)
		if (strncmp(p, q, strcspn(p, "\n") + 1) != 0) {
			printf("# first difference:\n# %.*s# %.*s", (int)strcspn(p, "\n") + 1, p,
			       (int)strcspn(q, "\n") + 1, q);
			break;
		}
	ok(same && strlen(la) > 700 * 10, "%s: same modes, owners and groups on disk both ways",
	   what);
	ownership_report_done(&a);
	ownership_report_done(&b);
}

static void test_wide(void)
{
	OwnershipReport rep = {};
	bool ring = uring_works();
	int out = mkdir_open(base_fd, "wide-outside", 0700);
	mkfile(out, "secret", 0600, 0);
	make_wide("wide-a");
	make_wide("wide-b");
	int wa = openat(base_fd, "wide-a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int wb = openat(base_fd, "wide-b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* An entry that cannot be changed, to compare the errors too. */
	bool imm = set_flags(wa, "e007", FS_IMMUTABLE_FL) == 0 &&
		   set_flags(wb, "e007", FS_IMMUTABLE_FL) == 0;
	if (!imm)
		printf("# chattr +i: not here, errors not compared\n");

	unsetenv(NO_URING);
	apply_both_ways(G, false, ring, "wide");
	is_call(apply("wide-a", G, false, OWNERSHIP_ALWAYS, &rep), 0, "wide: again");
	is_int(rep.entries, 1 + 700 + 100 + 1, "wide: every entry examined");
	is_int(rep.errors, imm, "wide: the immutable entry is the only error");
	is_int(rep.changed, 0, "wide, second run: nothing changed");
	check(wa, "e000", 0660, G, "wide");
	ok(lstat_at(wa, "e000").st_uid == OWNER, "wide: owner untouched");
	check(wa, "e001", 04775, G, "wide: setuid survives");
	check(wa, "e002", 0660, G, "wide: mode 0000");
	ok(lstat_at(wa, "e003").st_gid == G, "wide: symlink's own group changed");
	check(out, "secret", 0600, 0, "wide: symlink target outside untouched");
	check(wa, "e004", 0664, G, "wide: fifo");
	check(wa, "e005", 02770, G, "wide: setgid file");
	check(wa, "e006", 02770, G, "wide: directory");
	check(wa, "e013/inner", 0660, G, "wide: inside a directory");
	check(wa, "e007", imm ? 0600 : 0660, imm ? 0 : G, "wide: immutable file");
	check(wa, "e699", 02770, G, "wide: the last entry");

	apply_both_ways(G, false, ring, "wide, second run");
	apply_both_ways(G2, true, ring, "wide, read-only, another group");
	check(wa, "e002", 0660, G2, "wide, read-only: bits only added");

	set_flags(wa, "e007", 0);
	set_flags(wb, "e007", 0);
	close(wa);
	close(wb);
	close(out);
	ownership_report_done(&rep);
}

typedef struct Progress {
	unsigned calls;
	uint64_t last;
	bool monotonic;
	int sabotage_dfd; /* >= 0: move part of the tree away on the first call */
	bool sabotaged;
	bool watch_root; /* check on every call that root_fd does not have gid yet */
	int root_fd;
	gid_t gid;
	bool root_early;
} Progress;

static void on_progress(const OwnershipReport *so_far, void *userdata)
{
	Progress *p = userdata;

	p->calls++;
	if (so_far->entries < p->last)
		p->monotonic = false;
	p->last = so_far->entries;
	struct stat st;
	if (p->watch_root && fstat(p->root_fd, &st) == 0 && st.st_gid == p->gid)
		p->root_early = true;
	if (p->sabotage_dfd < 0 || p->sabotaged)
		return;
	/* Level 100 ("d" x 100) moves to the root, then level 99 is renamed: the walk, deep
	 * below with both parked, finds ".." of level 100 is not level 99 any more, and cannot
	 * reach level 99 by name either. */
	char from[2 * 100 + 1] = "";
	for (int i = 0; i < 100; i++)
		strcat(from, i ? "/d" : "d");
	p->sabotaged = renameat(p->sabotage_dfd, from, p->sabotage_dfd, "moved") == 0;
	from[2 * 99 - 1] = 0;
	char to[2 * 100 + 16];
	snprintf(to, sizeof(to), "%.*s/renamed", 2 * 98 - 1, from);
	p->sabotaged = p->sabotaged && renameat(p->sabotage_dfd, from, p->sabotage_dfd, to) == 0;
}

/* A chain of n directories "d" below dfd/name, a file "leaf" at the bottom. */
static void make_chain(int dfd, const char *name, unsigned n)
{
	int fd = mkdir_open(dfd, name, 0700);
	for (unsigned i = 0; i < n; i++) {
		int next = mkdir_open(fd, "d", 0700);
		close(fd);
		fd = next;
	}
	mkfile(fd, "leaf", 0600, 0);
	close(fd);
}

/* Counts the levels of the chain whose group or mode is not the expected one. */
static unsigned chain_wrong(int dfd, const char *name, unsigned n, gid_t gid)
{
	unsigned wrong = 0;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (unsigned i = 0; i < n && fd >= 0; i++) {
		struct stat st = lstat_at(fd, "d");
		if (st.st_gid != gid || (st.st_mode & 07777) != 02770)
			wrong++;
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	if (fd < 0)
		return n + 1;
	struct stat st = lstat_at(fd, "leaf");
	if (st.st_gid != gid || (st.st_mode & 07777) != 0660)
		wrong++;
	close(fd);
	return wrong;
}

/* The root is fixed last, so that a walk cut short is done again by OnRootMismatch; with
 * directory fixes waiting for io_uring batches too: at every progress call the root does not
 * have the group yet, and at the end the whole tree has it. */
static void test_root_last(void)
{
	int root = mkdir_open(base_fd, "bushy", 0755);
	_cleanup_free_ char *path = path_of("bushy");
	char name[32];

	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		int d = mkdir_open(root, name, 0750);
		int sub = mkdir_open(d, "sub", 0700);
		for (int k = 0; k < 40; k++) {
			snprintf(name, sizeof(name), "f%d", k);
			mkfile(d, name, 0600, 0);
			if (k % 4 == 0)
				mkfile(sub, name, 0640, 0);
		}
		close(sub);
		close(d);
	}
	for (int way = 0; way < 2; way++) {
		const char *what = way ? NO_URING "=1" : "io_uring allowed";
		OwnershipReport rep = {};
		Progress prog = {.monotonic = true,
				 .sabotage_dfd = -EBADF,
				 .watch_root = true,
				 .root_fd = root,
				 .gid = way ? G2 : G};
		OwnershipProgress pr = {.func = on_progress, .userdata = &prog, .interval = 1};

		if (way)
			setenv(NO_URING, "1", 1);
		is_call(ownership_apply(path, prog.gid, false, OWNERSHIP_ALWAYS, &pr, &rep), 0,
			"bushy tree, %s: walk succeeds", what);
		unsetenv(NO_URING);
		is_int(rep.entries, 1 + 60 * (2 + 40 + 10), "bushy tree, %s: every entry", what);
		is_int(rep.errors, 0, "bushy tree, %s: no errors", what);
		is_int(rep.batched, !way && uring_works(),
		       "bushy tree, %s: through io_uring or not", what);
		ok(prog.calls >= 2 && !prog.root_early,
		   "bushy tree, %s: the root had the group at none of %u progress calls", what,
		   prog.calls);
		check(base_fd, "bushy", 02775, prog.gid, "bushy tree: the root, at the end");
		check(root, "d59/sub/f36", 0660, prog.gid, "bushy tree: the last file");
		check(root, "d0/sub", 02770, prog.gid, "bushy tree: a subdirectory");
		ownership_report_done(&rep);
	}
	close(root);
}

static void test_deep(int dfd, const char *dir)
{
	OwnershipReport rep = {};
	Progress prog = {.monotonic = true, .sabotage_dfd = -EBADF};
	OwnershipProgress pr = {.func = on_progress, .userdata = &prog, .interval = 1};
	struct rlimit old, low = {.rlim_cur = 128};
	_cleanup_free_ char *deep = xasprintf("%s/deep", dir);

	make_chain(dfd, "deep", DEEP);
	getrlimit(RLIMIT_NOFILE, &old);
	low.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_NOFILE, &low);
	int r = ownership_apply(deep, G, false, OWNERSHIP_ALWAYS, &pr, &rep);
	setrlimit(RLIMIT_NOFILE, &old);
	is_int(r, 0, "100,000 levels deep, 128 fds allowed: succeeds");
	is_int(rep.errors, 0, "deep: no errors (%s)", rep.first_errors ?: "");
	is_int(rep.entries, DEEP + 2, "deep: every level and the leaf");
	is_int(rep.changed, DEEP + 2, "deep: every level changed");
	is_call(chain_wrong(dfd, "deep", DEEP, G), 0, "deep: every level right on disk");
	ok(prog.calls > 10 && prog.monotonic, "deep: progress reported %u times", prog.calls);
	printf("# deep walk: %llu ms\n", (unsigned long long)(rep.elapsed / USEC_PER_MSEC));

	is_call(ownership_apply(deep, G, false, OWNERSHIP_ALWAYS, NULL, &rep), 0, "deep: again");
	is_int(rep.changed, 0, "deep: second run changes nothing");
	is_call(rm_tree(dfd, "deep"), 0, "deep: removed without recursion");
	ownership_report_done(&rep);
}

static void test_moved_mid_walk(int dfd, const char *dir)
{
	OwnershipReport rep = {};
	Progress prog = {.monotonic = true, .sabotage_dfd = -EBADF};
	OwnershipProgress pr = {.func = on_progress, .userdata = &prog, .interval = 1};
	_cleanup_free_ char *path = xasprintf("%s/moving", dir);

	make_chain(dfd, "moving", 3000);
	prog.sabotage_dfd = openat(dfd, "moving", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	is_call(ownership_apply(path, G, false, OWNERSHIP_ALWAYS, &pr, &rep), 0,
		"tree moved under the walk: not fatal");
	ok(prog.sabotaged, "the tree was moved mid-walk");
	is_int(rep.errors, 1, "the one directory that could not be found again is reported");
	ok(rep.first_errors && strstr(rep.first_errors, "moved during the walk"),
	   "error says why: %s", rep.first_errors ?: "(none)");

	/* Everything else is right: the moved subtree (it was entered before it moved) and
	 * the levels above it. Only level 99, never found again, keeps its old mode. */
	int fd = prog.sabotage_dfd;
	is_call(chain_wrong(fd, "moved", 2900, G), 0, "moved subtree fixed");
	char up[2 * 98];
	snprintf(up, sizeof(up), "d");
	for (int i = 1; i < 98; i++)
		strcat(up, "/d");
	int l98 = openat(fd, up, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(l98, "renamed", 0700, 0, "the lost directory is left alone");
	check(fd, "d", 02770, G, "levels above it fixed");
	close(l98);
	close(fd);
	is_call(rm_tree(dfd, "moving"), 0, "moving: removed");
	ownership_report_done(&rep);
}

int main(void)
{
	if (geteuid() != 0)
		TAP_SKIP_ALL("needs root (chown, mknod, mount, chattr)");
	umask(022);
	snprintf(base, sizeof(base), "%s/test-ownership.XXXXXX", getenv("TMPDIR") ?: "/tmp");
	if (!mkdtemp(base)) {
		printf("# mkdtemp: %m\n");
		return 1;
	}
	base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	test_policy_strings();
	test_no_group();
	test_rules();
	test_read_only();
	test_on_root_mismatch();
	test_errors();
	test_mounts();
	test_wide();
	test_root_last();
	test_swap_race(base_fd, base, 0, 4 * USEC_PER_SEC, 1000, "race");
	/* The chains get their own tmpfs: removing 100,000 directories from a disk filesystem
	 * mounted with discard takes 20 s. */
	_cleanup_free_ char *chains = path_of("chains");
	close(mkdir_open(base_fd, "chains", 0755));
	bool mounted = mount("tmpfs", chains, "tmpfs", 0, "mode=0755") == 0;
	int chains_fd = open(chains, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_deep(chains_fd, chains);
	test_moved_mid_walk(chains_fd, chains);
	/* On the tmpfs: its listing order is the creation order, so that the fillers put the
	 * swapped names in the middle of an io_uring batch. */
	test_swap_race(chains_fd, chains, 600, 2 * USEC_PER_SEC, 100, "race, wide");
	close(chains_fd);
	if (mounted)
		umount2(chains, MNT_DETACH);

	close(base_fd);
	is_call(rm_tree(AT_FDCWD, base), 0, "test tree removed");
	return tap_done();
}
