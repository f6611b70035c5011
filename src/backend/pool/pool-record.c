/* SPDX-License-Identifier: Apache-2.0 */
/* The record beside a pool, PARENT/.NAME.volplug: that volplugd made a pool at PARENT/NAME. A
 * pool directory found absent or empty where such a record is was a pool once: it was deleted,
 * or the filesystem that holds it is not mounted. Making a new, empty pool there would let the
 * pool's users (the CO) believe its volumes are still there; it is refused until the operator
 * asks for one (PoolConfig.init). The record lives outside the pool, so that it outlives it. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "fileio.h"
#include "log.h"
#include "pinned-path.h"
#include "pool-internal.h"

#define RECORD_SUFFIX ".volplug"

/* The pool path's parent and its last component ("pool" of "/var/lib/volplug/pool/"); -EINVAL
 * when there is no last component to record (/, ., ..). */
static int split(const char *path, char **ret_parent, char **ret_base)
{
	_cleanup_free_ char *copy = xstrdup(path);
	size_t n = strlen(copy);

	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = 0;
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return -EINVAL;
	*ret_base = xstrdup(base);
	if (!slash)
		*ret_parent = xstrdup(".");
	else if (slash == copy)
		*ret_parent = xstrdup("/");
	else
		*ret_parent = xstrndup(copy, (size_t)(slash - copy));
	return 0;
}

char *pool_record_path(const char *path)
{
	_cleanup_free_ char *parent = NULL, *base = NULL;

	if (split(path, &parent, &base) < 0)
		return NULL;
	return xasprintf("%s/.%s" RECORD_SUFFIX, parent, base);
}

typedef enum {
	PLACE_POOL,  /* a pool: it has volumes/ */
	PLACE_EMPTY, /* absent, or an empty directory */
	PLACE_OTHER, /* a directory with files, no pool */
} Place;

static int place_of(int parent_fd, const char *base, Place *ret)
{
	_cleanup_close_ int fd = openat(parent_fd, base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT) {
		*ret = PLACE_EMPTY;
		return 0;
	}
	if (fd < 0)
		return negative_errno();
	if (faccessat(fd, "volumes", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		*ret = PLACE_POOL;
	else
		*ret = dir_is_empty(fd) == 1 ? PLACE_EMPTY : PLACE_OTHER;
	return 0;
}

int pool_place_check(const char *path, bool init)
{
	_cleanup_free_ char *parent = NULL, *base = NULL, *record = NULL;
	Place place;

	if (split(path, &parent, &base) < 0)
		return 0; /* nowhere to keep a record: nothing to check */
	_cleanup_close_ int parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent_fd < 0 || place_of(parent_fd, base, &place) < 0 || place == PLACE_POOL)
		return 0; /* opening the pool says what is wrong, if anything */
	record = xasprintf(".%s" RECORD_SUFFIX, base);
	if (faccessat(parent_fd, record, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* never a pool here: the first start makes it */
	/* Another process may have made the pool in between: it records it once it is laid out. */
	if (place_of(parent_fd, base, &place) == 0 && place == PLACE_POOL)
		return 0;
	if (!init)
		return -ENOMEDIUM;
	return place == PLACE_OTHER ? -ENOTEMPTY : 0;
}

void pool_record_write(const char *path)
{
	_cleanup_free_ char *parent = NULL, *base = NULL, *record = NULL, *text = NULL;

	if (split(path, &parent, &base) < 0)
		return;
	_cleanup_close_ int parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	record = xasprintf(".%s" RECORD_SUFFIX, base);
	if (parent_fd < 0 || faccessat(parent_fd, record, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	text = xasprintf("volplugd made a pool at %s/%s: should it be found absent or empty, "
			 "volplugd refuses to make a new one there unless started with "
			 "--pool-init\n",
			 parent, base);
	int r = write_file_atomic_at(parent_fd, record, text, strlen(text), 0644);
	if (r < 0)
		log_debug_errno(r, "pool: cannot write %s/%s: %m", parent, record);
}
