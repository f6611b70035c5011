/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "path-util.h"
#include "tap.h"

static char tmpdir[] = "/tmp/volplug-test-path-util-XXXXXX";

static bool is_dir(const char *path, mode_t *ret_mode)
{
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	if (ret_mode)
		*ret_mode = st.st_mode & 07777;
	return true;
}

static void rm_rf(void)
{
	_cleanup_free_ char *cmd = xasprintf("rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmpdir);
}

int main(void)
{
	mode_t mode;

	if (!mkdtemp(tmpdir)) {
		printf("Bail out! mkdtemp: %m\n");
		return 1;
	}
	umask(022);

	_cleanup_free_ char *deep = xasprintf("%s/a/b/c", tmpdir);
	is_int(mkdir_p(deep, 0750), 0, "mkdir_p makes a path three levels down");
	ok(is_dir(deep, &mode) && mode == 0750, "the directory itself, with the mode");
	_cleanup_free_ char *a = xasprintf("%s/a", tmpdir);
	ok(is_dir(a, &mode) && mode == 0750, "and its parents, with the mode");
	is_int(mkdir_p(deep, 0700), 0, "again: a directory that exists is success");
	ok(is_dir(deep, &mode) && mode == 0750, "and is left as it was");

	_cleanup_free_ char *slashes = xasprintf("%s//x///y/", tmpdir);
	is_int(mkdir_p(slashes, 0755), 0, "repeated and trailing slashes");
	_cleanup_free_ char *y = xasprintf("%s/x/y", tmpdir);
	ok(is_dir(y, NULL), "made as if written once");

	_cleanup_free_ char *file = xasprintf("%s/file", tmpdir);
	close(open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	is_int(mkdir_p(file, 0755), -ENOTDIR, "a file where the directory should be: -ENOTDIR");
	_cleanup_free_ char *under = xasprintf("%s/file/sub/dir", tmpdir);
	is_int(mkdir_p(under, 0755), -ENOTDIR, "a file where a parent should be: -ENOTDIR");

	_cleanup_free_ char *sock = xasprintf("%s/run/volplug/csi.sock", tmpdir);
	is_int(mkdir_parents(sock, 0755), 0, "mkdir_parents of a socket path");
	_cleanup_free_ char *run = xasprintf("%s/run/volplug", tmpdir);
	ok(is_dir(run, &mode) && mode == 0755, "makes the socket's directory");
	ok(access(sock, F_OK) < 0 && errno == ENOENT, "but not the socket path itself");
	_cleanup_free_ char *in_file = xasprintf("%s/file/x.sock", tmpdir);
	is_int(mkdir_parents(in_file, 0755), -ENOTDIR, "a file where the directory should be");
	is_int(mkdir_parents("relative.sock", 0755), 0, "a bare name: its directory is \".\"");
	is_int(mkdir_p("/", 0755), 0, "the root exists");

	rm_rf();
	return tap_done();
}
