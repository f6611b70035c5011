/* SPDX-License-Identifier: Apache-2.0 */
/* Removing what the pool made: an object's directory, a leftover in tmp/. In an object's
 * directory only the names the pool makes there are removed; a directory in place of one of them
 * is the pool's leftover too and goes with all it holds. Nothing is followed (a symlink is
 * unlinked, never opened) and no mount point is entered. What cannot be removed (an immutable or
 * append-only file, a name that is no file of the pool, a mount point) is found by a look that
 * changes nothing, so that a caller can refuse before it removes anything. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "alloc.h"
#include "error-util.h"
#include "pool-internal.h"

/* Directories in place of a file are removed this deep at most: a deeper tree was made on
 * purpose, by someone else. */
#define DEPTH_MAX 16
/* A directory volume's tree/ holds what its users made: deeper, but not without bound (each
 * level holds a directory open while it is walked). */
#define TREE_DEPTH_MAX 256

static bool pool_name(const char *name)
{
	static const char *const names[] = {META_FILE, DATA_FILE, TREE_DIR, USE_FILE, USE_LOCK};

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return write_file_is_temporary(name);
}

typedef struct Walk {
	bool remove;
	dev_t dev;	      /* the pool's filesystem */
	PoolTreeFiles *files; /* the names found in the top directory, or NULL */
	char **ret_why;
} Walk;

/* Notes an entry of the top directory (a directory among them makes it no flat one). */
static void note_entry(PoolTreeFiles *f, const char *name, bool dir)
{
	if (!f->flat)
		return;
	if (dir || f->n == POOL_TREE_FILES_MAX || strlen(name) >= sizeof(f->names[0])) {
		f->flat = false;
		return;
	}
	strcpy(f->names[f->n++], name);
}

/* dir_fd/name (at where in the pool): top is an object's directory or an entry of tmp/, whose
 * entries must be the pool's names; below, in a directory in place of one of them (or in a
 * directory volume's tree/), anything goes, symlinks unlinked and never followed. depth_max:
 * how deep that may go. */
static int walk(const Walk *w, int dir_fd, const char *name, const char *where, bool top, int depth,
		int depth_max)
{
	struct statx sx;

	if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_MODE, &sx) < 0)
		return errno == ENOENT ? 0 : errorf(w->ret_why, negative_errno(), "%s: %m", where);
	if (sx.stx_attributes & STATX_ATTR_IMMUTABLE)
		return errorf(w->ret_why, -EPERM,
			      "%s is immutable (chattr +i): make it mutable (chattr -i) or move it "
			      "out of the pool",
			      where);
	if (sx.stx_attributes & STATX_ATTR_APPEND)
		return errorf(
			w->ret_why, -EPERM,
			"%s is append-only (chattr +a): chattr -a it or move it out of the pool",
			where);
	if (depth == 1 && w->files)
		note_entry(w->files, name, S_ISDIR(sx.stx_mode));
	if (!S_ISDIR(sx.stx_mode)) {
		if (w->remove && unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
			return errorf(w->ret_why, negative_errno(), "removing %s failed: %m",
				      where);
		return 0;
	}
	if ((sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ||
	    makedev(sx.stx_dev_major, sx.stx_dev_minor) != w->dev)
		return errorf(w->ret_why, -EBUSY, "%s is a mount point: unmount it", where);
	if (depth > depth_max)
		return errorf(w->ret_why, -ELOOP,
			      "%s is nested more than %d directories deep: remove it by hand",
			      where, depth_max);
	_cleanup_close_ int fd =
		openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errorf(w->ret_why, negative_errno(), "%s: %m", where);
	_cleanup_closedir_ DIR *d = pool_opendir(fd);
	if (!d)
		return errorf(w->ret_why, negative_errno(), "%s: %m", where);
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", where, de->d_name);
		if (top && !pool_name(de->d_name))
			return errorf(w->ret_why, -ENOTEMPTY,
				      "%s is no file of the pool: move it out of the pool", sub);
		int max = top && strcmp(de->d_name, TREE_DIR) == 0 ? TREE_DEPTH_MAX : depth_max;
		int r = walk(w, fd, de->d_name, sub, false, depth + 1, max);
		if (r < 0)
			return r;
	}
	if (errno > 0)
		return errorf(w->ret_why, negative_errno(), "%s: %m", where);
	if (w->remove && unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return errorf(w->ret_why, negative_errno(), "removing %s failed: %m", where);
	return 0;
}

static int tree(int dir_fd, const char *name, const char *where, bool remove, PoolTreeFiles *files,
		char **ret_why)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", where, name);
	struct stat st;

	if (fstat(dir_fd, &st) < 0)
		return errorf(ret_why, negative_errno(), "%s: %m", where);
	Walk w = {.remove = remove, .dev = st.st_dev, .files = files, .ret_why = ret_why};
	if (files)
		*files = (PoolTreeFiles){.flat = true};
	return walk(&w, dir_fd, name, path, true, 0, DEPTH_MAX);
}

int pool_tree_check(int dir_fd, const char *name, const char *where, char **ret_why)
{
	return tree(dir_fd, name, where, false, NULL, ret_why);
}

int pool_tree_check_files(int dir_fd, const char *name, const char *where, PoolTreeFiles *ret_files,
			  char **ret_why)
{
	return tree(dir_fd, name, where, false, ret_files, ret_why);
}

int pool_tree_remove(int dir_fd, const char *name, const char *where, char **ret_why)
{
	return tree(dir_fd, name, where, true, NULL, ret_why);
}

int pool_tree_remove_files(int dir_fd, const char *name, int object_fd, const PoolTreeFiles *files,
			   const char *where, char **ret_why)
{
	size_t i = 0;

	if (files->flat) {
		/* unlinkat() never follows a symlink; a directory put in a file's place fails
		 * (EISDIR) and leaves it to the walk. */
		while (i < files->n &&
		       (unlinkat(object_fd, files->names[i], 0) == 0 || errno == ENOENT))
			i++;
		if (i == files->n && unlinkat(dir_fd, name, AT_REMOVEDIR) == 0)
			return 0;
	}
	return pool_tree_remove(dir_fd, name, where, ret_why);
}
