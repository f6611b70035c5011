/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"
#include "install.h"
#include "log.h"
#include "path-util.h"
#include "random-util.h"
#include "registry.h"

static int set_error(int r, char *msg, char **ret_error)
{
	log_debug("%s", msg);
	if (ret_error)
		*ret_error = msg;
	else
		free(msg);
	return r;
}

/* "vendor~name", after checking that the driver name "vendor/name" is one Kubernetes takes. */
static int folder_of(const char *vendor, const char *name, char **ret, char **ret_error)
{
	if (!name || !*name || strchr(name, '/') || strchr(name, '~') || name[0] == '.')
		return set_error(-EINVAL,
				 xasprintf("invalid driver name \"%s\": must not be empty, start "
					   "with '.', or contain '/' or '~'",
					   name ?: ""),
				 ret_error);
	bool has_vendor = vendor && *vendor;
	if (has_vendor && (strchr(vendor, '/') || strchr(vendor, '~')))
		return set_error(
			-EINVAL,
			xasprintf("invalid vendor \"%s\": must not contain '/' or '~'", vendor),
			ret_error);
	_cleanup_free_ char *driver = has_vendor ? xasprintf("%s/%s", vendor, name) : xstrdup(name);
	char *error = NULL;
	int r = flex_driver_name_validate(driver, &error);
	if (r < 0)
		return set_error(r, error, ret_error);
	*ret = flex_driver_name_to_folder(driver);
	return 0;
}

static int copy_fd(int from, int to)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(to, buf + off, (size_t)(n - off));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return negative_errno();
			}
			off += w;
		}
	}
}

int flex_install(const char *plugin_dir, const char *vendor, const char *name, const char *src,
		 char **ret_error)
{
	_cleanup_free_ char *folder = NULL, *tmp = NULL;
	_cleanup_close_ int src_fd = -EBADF, dir_fd = -EBADF, folder_fd = -EBADF, tmp_fd = -EBADF;
	struct stat st;
	bool created = false;
	int r;

	r = folder_of(vendor, name, &folder, ret_error);
	if (r < 0)
		return r;
	src_fd = open(src, O_RDONLY | O_CLOEXEC);
	if (src_fd < 0 || fstat(src_fd, &st) < 0) {
		r = negative_errno();
		return set_error(r, xasprintf("cannot read %s: %s", src, strerror(-r)), ret_error);
	}
	if (!S_ISREG(st.st_mode))
		return set_error(-EINVAL, xasprintf("%s is not a regular file", src), ret_error);

	r = mkdir_p(plugin_dir, 0755);
	if (r < 0)
		return set_error(r, xasprintf("cannot create %s: %s", plugin_dir, strerror(-r)),
				 ret_error);
	dir_fd = open(plugin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		goto io_error;
	if (mkdirat(dir_fd, folder, 0755) == 0)
		created = true;
	else if (errno != EEXIST)
		goto io_error;
	folder_fd = openat(dir_fd, folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (folder_fd < 0)
		goto io_error;

	tmp = xasprintf(".%s.tmp-%016" PRIx64, name, random_u64());
	tmp_fd = openat(folder_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0700);
	if (tmp_fd < 0)
		goto io_error;
	r = copy_fd(src_fd, tmp_fd);
	if (r == 0 && fchmod(tmp_fd, 0755) < 0)
		r = negative_errno();
	if (r == 0 && fsync(tmp_fd) < 0)
		r = negative_errno();
	/* Closed before the rename: exec of a file still open for writing fails (ETXTBSY). */
	if (close(TAKE_FD(tmp_fd)) < 0 && r == 0)
		r = negative_errno();
	if (r == 0 && renameat(folder_fd, tmp, folder_fd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(folder_fd, tmp, 0);
		return set_error(r,
				 xasprintf("cannot install %s/%s/%s: %s", plugin_dir, folder, name,
					   strerror(-r)),
				 ret_error);
	}
	r = fsync_dir(folder_fd);
	if (r == 0 && created)
		r = fsync_dir(dir_fd);
	if (r < 0)
		return set_error(
			r, xasprintf("cannot sync %s/%s: %s", plugin_dir, folder, strerror(-r)),
			ret_error);
	log_debug("flex install: %s -> %s/%s/%s", src, plugin_dir, folder, name);
	return 0;

io_error:
	r = negative_errno();
	return set_error(
		r, xasprintf("cannot install into %s/%s: %s", plugin_dir, folder, strerror(-r)),
		ret_error);
}

/* Deletes name below dir_fd and everything in it, never following a symlink. */
static int rm_rf_at(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno != ENOTDIR && errno != ELOOP)
			return negative_errno();
		return unlinkat(dir_fd, name, 0) < 0 ? negative_errno() : 0;
	}
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	struct dirent *de;
	int r = 0;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int q;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
			q = rm_rf_at(dirfd(d), de->d_name);
		else
			q = unlinkat(dirfd(d), de->d_name, 0) < 0 ? negative_errno() : 0;
		if (q < 0 && q != -ENOENT && r == 0)
			r = q;
	}
	if (errno > 0 && r == 0)
		r = negative_errno();
	if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && r == 0)
		r = negative_errno();
	return r;
}

int flex_remove(const char *plugin_dir, const char *vendor, const char *name, char **ret_error)
{
	_cleanup_free_ char *folder = NULL, *gone = NULL;
	_cleanup_close_ int dir_fd = -EBADF;
	int r;

	r = folder_of(vendor, name, &folder, ret_error);
	if (r < 0)
		return r;
	dir_fd = open(plugin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0) {
		r = negative_errno();
		return set_error(r, xasprintf("cannot open %s: %s", plugin_dir, strerror(-r)),
				 ret_error);
	}
	gone = xasprintf(".%s.removing-%016" PRIx64, folder, random_u64());
	if (renameat(dir_fd, folder, dir_fd, gone) < 0) {
		r = negative_errno();
		if (r == -ENOENT)
			return set_error(r, xasprintf("no driver folder %s/%s", plugin_dir, folder),
					 ret_error);
		return set_error(
			r, xasprintf("cannot remove %s/%s: %s", plugin_dir, folder, strerror(-r)),
			ret_error);
	}
	r = fsync_dir(dir_fd);
	if (r < 0)
		return set_error(r, xasprintf("cannot sync %s: %s", plugin_dir, strerror(-r)),
				 ret_error);
	/* The driver is gone for every watcher now; a failure below leaves only a dot-folder. */
	r = rm_rf_at(dir_fd, gone);
	if (r < 0)
		return set_error(r,
				 xasprintf("removed %s/%s, but deleting %s failed: %s", plugin_dir,
					   folder, gone, strerror(-r)),
				 ret_error);
	log_debug("flex remove: %s/%s", plugin_dir, folder);
	return 0;
}

char *flex_path_absolute(const char *path)
{
	char cwd[PATH_MAX];
	char *abs;

	while (path[0] == '.' && path[1] == '/')
		path += 2 + strspn(path + 2, "/");
	if (path[0] == '/')
		abs = xstrdup(path);
	else if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	else
		abs = *path && strcmp(path, ".") != 0
			      ? xasprintf("%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path)
			      : xstrdup(cwd);
	size_t n = strlen(abs);
	while (n > 1 && abs[n - 1] == '/')
		abs[--n] = 0;
	return abs;
}

/* The executable at path, absolute (its symlinks kept), when it can be run. */
static int exe_at(const char *driver, const char *path, char **ret_exe, char **ret_error)
{
	if (access(path, X_OK) < 0) {
		int r = negative_errno();
		return set_error(
			r,
			driver ? xasprintf("driver \"%s\": %s: %s", driver, path, strerror(-r))
			       : xasprintf("%s: %s", path, strerror(-r)),
			ret_error);
	}
	char *abs = flex_path_absolute(path);
	if (!abs) {
		int r = negative_errno();
		return set_error(r, xasprintf("%s: the working directory: %s", path, strerror(-r)),
				 ret_error);
	}
	*ret_exe = abs;
	return 0;
}

static int locate_path(const char *path, char **ret_exe, char **ret_name, char **ret_error)
{
	int r = exe_at(NULL, path, ret_exe, ret_error);
	if (r < 0)
		return r;
	*ret_name = xstrdup(strrchr(*ret_exe, '/') + 1);
	return 0;
}

int flex_driver_locate(const char *plugin_dir, const char *driver, char **ret_exe, char **ret_name,
		       char **ret_error)
{
	_cleanup_free_ char *error = NULL, *folder = NULL, *name = NULL, *exe_name = NULL,
			    *exe = NULL;
	bool is_file = access(driver, X_OK) == 0;

	if (driver[0] == '/' || driver[0] == '.')
		return locate_path(driver, ret_exe, ret_name, ret_error);
	if (flex_driver_name_validate(driver, &error) < 0)
		return is_file ? locate_path(driver, ret_exe, ret_name, ret_error)
			       : set_error(-EINVAL, TAKE_PTR(error), ret_error);
	folder = flex_driver_name_to_folder(driver);
	if (flex_driver_folder_parse(folder, &name, &exe_name, &error) < 0)
		return set_error(-EINVAL, TAKE_PTR(error), ret_error);
	exe = xasprintf("%s/%s/%s", plugin_dir, folder, exe_name);
	if (access(exe, X_OK) < 0 && is_file)
		return locate_path(driver, ret_exe, ret_name, ret_error);
	int r = exe_at(driver, exe, ret_exe, ret_error);
	if (r < 0)
		return r;
	*ret_name = TAKE_PTR(name);
	return 0;
}
