/* SPDX-License-Identifier: Apache-2.0 */
/* Request paths: the string rules, the parent opened without following symlinks (openat2 and
 * the component walk), the pool's names opened beneath a directory, what is seen at a path (mount
 * roots through fds), empty directories. The mount parts need root; the rest runs anywhere. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "alloc.h"
#include "pinned-path.h"
#include "scratch.h"
#include "tap.h"

static void test_strings(void)
{
	static const struct {
		const char *path;
		bool good;
	} table[] = {
		{"/var/lib/kubelet/pods/x/volumes/v", true},
		{"/a", true},
		{"/a/.hidden", true},
		{"/a/..x/b", true},
		{"", false},
		{"/", false},
		{"relative/path", false},
		{"./a", false},
		{"/a//b", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/a/..", false},
		{"/a/.", false},
		{"/a/", false},
		{"//", false},
	};
	const char *why;

	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		why = NULL;
		int r = request_path_check(table[i].path, &why);
		is_int(r, table[i].good ? 0 : -EINVAL, "'%s' %s", table[i].path,
		       table[i].good ? "accepted" : "refused");
		ok(table[i].good || (why && *why), "'%s': a reason is given (%s)", table[i].path,
		   why ?: "none");
	}
	is_int(request_path_check(NULL, &why), -EINVAL, "NULL refused");
	_cleanup_free_ char *huge = xmalloc(PATH_MAX + 2);
	huge[0] = '/';
	memset(huge + 1, 'a', PATH_MAX);
	huge[PATH_MAX + 1] = 0;
	is_int(request_path_check(huge, &why), -EINVAL, "a path of PATH_MAX bytes refused (%s)",
	       why);
}

/* The parent is opened, never through a symlink, both ways. */
static void test_open(bool fallback)
{
	const char *how = fallback ? "component walk" : "openat2";
	_cleanup_free_ char *dir = xasprintf("%s/%s", scratch, fallback ? "walk" : "at2");
	_cleanup_free_ char *real = xasprintf("%s/real", dir);
	_cleanup_free_ char *link = xasprintf("%s/link", dir);
	_cleanup_free_ char *through = xasprintf("%s/link/target", dir);
	_cleanup_free_ char *inside = xasprintf("%s/real/target", dir);
	_cleanup_free_ char *missing = xasprintf("%s/nope/target", dir);
	PinnedPath p = PINNED_PATH_NULL;
	PathObject o;

	pinned_path_force_fallback(fallback);
	if (mkdir(dir, 0755) < 0 || mkdir(real, 0755) < 0 || symlink(real, link) < 0) {
		printf("Bail out! cannot make the tree in %s\n", dir);
		exit(1);
	}
	is_int(pinned_path_open(inside, &p), 0, "%s: a real parent opens", how);
	is_str(p.base, "target", "%s: the base is the last component", how);
	is_int(pinned_path_stat(&p, &o), -ENOENT, "%s: nothing there yet", how);
	ok(mkdirat(p.parent_fd, p.base, 0700) == 0, "%s: made through the pinned parent", how);
	is_int(pinned_path_stat(&p, &o), 0, "%s: now something is there", how);
	ok(S_ISDIR(o.mode) && !o.mount_root, "%s: a plain directory", how);
	pinned_path_done(&p);

	is_int(pinned_path_open(through, &p), -ELOOP, "%s: a symlink in the parent is refused",
	       how);
	is_int(pinned_path_open(missing, &p), -ENOENT, "%s: a missing parent", how);

	/* A symlink as the last component is seen as one, never followed. */
	is_int(pinned_path_open(link, &p), 0, "%s: the parent of a symlink opens", how);
	is_int(pinned_path_stat(&p, &o), 0, "%s: the symlink is seen", how);
	ok(S_ISLNK(o.mode), "%s: as a symlink", how);
	is_int(pinned_path_open_object(&p, O_PATH | O_DIRECTORY), -ELOOP,
	       "%s: opening it as a directory says it is a symlink", how);
	pinned_path_done(&p);

	/* The parent stays pinned: a swap after the open does not redirect what follows. */
	is_int(pinned_path_open(inside, &p), 0, "%s: pinned again", how);
	_cleanup_free_ char *moved = xasprintf("%s/moved", dir);
	ok(rename(real, moved) == 0 && symlink("/", real) == 0, "%s: parent swapped for a symlink",
	   how);
	is_int(pinned_path_stat(&p, &o), 0, "%s: still the same directory", how);
	ok(S_ISDIR(o.mode), "%s: the directory made above, not /", how);
	pinned_path_done(&p);
	pinned_path_force_fallback(false);
}

static void test_empty(void)
{
	_cleanup_free_ char *dir = scratch_mkdir("empty");
	_cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	is_int(dir_is_empty(fd), 1, "a new directory is empty");
	_cleanup_free_ char *f = xasprintf("%s/.hidden", dir);
	close(open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	is_int(dir_is_empty(fd), 0, "a hidden file makes it non-empty");
}

static void test_mount_root(void)
{
	_cleanup_free_ char *m = scratch_mkdir("mnt");
	PinnedPath p = PINNED_PATH_NULL;
	PathObject o;

	if (mount("tmpfs", m, "tmpfs", 0, "size=1m") < 0) {
		printf("Bail out! cannot mount a tmpfs: %s\n", strerror(errno));
		exit(1);
	}
	is_int(pinned_path_open(m, &p), 0, "pin a mount point");
	is_int(pinned_path_stat(&p, &o), 0, "look at it");
	ok(o.mount_root, "seen as the root of a mount");
	ok(o.mnt_id != 0, "with its mount ID");
	struct stat st;
	ok(stat(m, &st) == 0 && st.st_dev == o.dev, "the mounted filesystem's device");
	pinned_path_done(&p);
	umount2(m, 0);
}

/* The pool's own names: open_beneath() never goes through a symlink, never leaves the
 * directory, and says when it found another type than asked for. */
static void test_beneath(bool fallback)
{
	const char *how = fallback ? "component walk" : "openat2";
	_cleanup_free_ char *dir = scratch_mkdir(fallback ? "beneath-walk" : "beneath-at2");
	_cleanup_free_ char *canary = scratch_mkdir(fallback ? "canary-walk" : "canary-at2");
	_cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *cfile = xasprintf("%s/file", canary);
	struct stat st;

	pinned_path_force_fallback(fallback);
	close(open(cfile, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	ok(mkdirat(fd, "d", 0700) == 0 && symlinkat(canary, fd, "d/dirlink") == 0 &&
		   symlinkat(cfile, fd, "d/filelink") == 0 && symlinkat(canary, fd, "top") == 0 &&
		   mkfifoat(fd, "d/fifo", 0600) == 0,
	   "%s: tree made", how);
	int f = open_beneath(fd, "d/new", O_RDWR | O_CREAT | O_EXCL, 0600, S_IFREG);
	ok(f >= 0, "%s: a file made beneath", how);
	if (f >= 0)
		close(f);
	f = open_beneath(fd, "d", O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	ok(f >= 0, "%s: a directory opens as one", how);
	if (f >= 0)
		close(f);
	is_int(open_beneath(fd, "d/filelink", O_RDWR, 0, S_IFREG), -ELOOP,
	       "%s: a symlink to a file is refused", how);
	is_int(open_beneath(fd, "d/filelink", O_RDWR | O_CREAT, 0600, S_IFREG), -ELOOP,
	       "%s: O_CREAT does not follow it either", how);
	is_int(open_beneath(fd, "d/dirlink", O_RDONLY | O_DIRECTORY, 0, S_IFDIR), -ELOOP,
	       "%s: a symlink to a directory is refused", how);
	is_int(open_beneath(fd, "top/file", O_RDONLY, 0, S_IFREG), -ELOOP,
	       "%s: a symlink on the way is refused", how);
	is_int(open_beneath(fd, "d/dirlink", O_PATH, 0, 0), -ELOOP,
	       "%s: O_PATH sees the symlink and refuses it", how);
	is_int(stat_beneath(fd, "top", S_IFDIR, &st), -ELOOP, "%s: stat_beneath refuses it", how);
	is_int(open_beneath(fd, "../x", O_RDONLY, 0, 0), -EXDEV, "%s: '..' leaves: refused", how);
	is_int(open_beneath(fd, "d/fifo", O_RDONLY, 0, S_IFREG), -EBADFD,
	       "%s: a FIFO is no regular file (and the open did not hang)", how);
	is_int(open_beneath(fd, "d", O_RDONLY, 0, S_IFREG), -EISDIR,
	       "%s: a directory is no regular file", how);
	is_int(open_beneath(fd, "d/new", O_RDONLY, 0, S_IFDIR), -ENOTDIR,
	       "%s: a file is no directory", how);
	is_int(open_beneath(fd, "d/none", O_RDONLY, 0, S_IFREG), -ENOENT, "%s: missing", how);
	ok(stat(cfile, &st) == 0 && st.st_size == 0, "%s: the canary is untouched", how);
	pinned_path_force_fallback(false);
}

int main(void)
{
	scratch_init("pinned");
	test_strings();
	test_open(false);
	test_open(true);
	test_beneath(false);
	test_beneath(true);
	test_empty();
	if (geteuid() == 0)
		test_mount_root();
	else
		ok(true, "# SKIP mount roots need root");
	return tap_done();
}
