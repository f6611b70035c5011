/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <libgen.h>
#include <sys/stat.h>

#include "alloc.h"
#include "path-util.h"

/* mkdir, with an existing directory as success. */
static int mkdir_one(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return negative_errno();
	if (stat(path, &st) < 0)
		return negative_errno();
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int mkdir_p(const char *path, mode_t mode)
{
	int r = mkdir_one(path, mode);
	if (r != -ENOENT)
		return r;

	/* A parent is missing: make each from the top down. */
	_cleanup_free_ char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/' || s[-1] == '/')
			continue;
		*s = 0;
		r = mkdir_one(p, mode);
		*s = '/';
		if (r < 0)
			return r;
	}
	return mkdir_one(p, mode);
}

int mkdir_parents(const char *path, mode_t mode)
{
	_cleanup_free_ char *copy = xstrdup(path);
	return mkdir_p(dirname(copy), mode);
}
