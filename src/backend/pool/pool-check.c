/* SPDX-License-Identifier: Apache-2.0 */
/* pool check: reads every object of a pool, the temporaries anywhere in it and the loop
 * devices over its files, and reports what is wrong; --repair also fixes what can be fixed
 * without losing anything. */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "fileio.h"
#include "loopdev.h"
#include "mount-util.h"
#include "pinned-path.h"
#include "pool-internal.h"
#include "pool-meta.h"

typedef struct Checker {
	int dir_fd;
	const char *path;
	Pool *repair; /* NULL: change nothing */
	PoolCheckReport *report;
	size_t cap_items; /* room in report->items */
} Checker;

static PoolCheckItem *problem(Checker *c, const char *object, const char *fmt, ...) _printf_(3, 4);
static PoolCheckItem *problem(Checker *c, const char *object, const char *fmt, ...)
{
	PoolCheckReport *r = c->report;
	va_list ap;
	char *text;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		abort(); /* only on out of memory */
	va_end(ap);
	r->items = xgrow(r->items, &c->cap_items, r->n_items + 1, sizeof(PoolCheckItem));
	r->items[r->n_items] = (PoolCheckItem){.object = xstrdup(object), .problem = text};
	return &r->items[r->n_items++];
}

static void repaired(Checker *c, PoolCheckItem *item, const char *fmt, ...) _printf_(3, 4);
static void repaired(Checker *c, PoolCheckItem *item, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&item->repair, fmt, ap) < 0)
		abort();
	va_end(ap);
	c->report->repaired++;
}

void pool_check_report_done(PoolCheckReport *r)
{
	for (size_t i = 0; i < r->n_items; i++) {
		free(r->items[i].object);
		free(r->items[i].problem);
		free(r->items[i].repair);
	}
	free(r->items);
	*r = (PoolCheckReport){};
}

/* Whether dir_fd/name is held by a live operation (its exclusive flock). The shared flock
 * tried here lasts only the test and changes nothing. */
static bool held(int dir_fd, const char *name)
{
	_cleanup_close_ int fd =
		openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	return fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

static bool listed(const char *const *names, const char *name)
{
	for (; *names; names++)
		if (strcmp(*names, name) == 0)
			return true;
	return false;
}

/* The entries of dir_fd (where): temporaries of atomic writes (a live write keeps its temporary
 * in tmp/, so one here was left by an interrupted write of an earlier version) and, when files
 * lists what belongs there (NULL: anything may), whatever else is there; it is only reported. */
static void check_entries(Checker *c, int dir_fd, const char *where, const char *const *files)
{
	_cleanup_closedir_ DIR *d = pool_opendir(dir_fd);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char object[512];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(object, sizeof(object), "%s/%s", where, de->d_name);
		if (!write_file_is_temporary(de->d_name)) {
			if (files && !listed(files, de->d_name))
				problem(c, object, "unknown: no file of the pool (left as it is)");
			continue;
		}
		if (held(dir_fd, de->d_name))
			continue;
		PoolCheckItem *item =
			problem(c, object, "a temporary file left by an interrupted write");
		if (c->repair && unlinkat(dir_fd, de->d_name, 0) == 0)
			repaired(c, item, "removed");
	}
}

/* node.json, when there is one, must parse: a damaged one stops every node call of the volume
 * (where it is staged and published, and what the node service made there, is unknown). */
static void check_use_record(Checker *c, int obj_fd, const char *where)
{
	_cleanup_free_ char *text = NULL, *boot = NULL;
	NodeUse u = {};
	size_t len;

	int r = read_file_at(obj_fd, USE_FILE, USE_MAX, &text, &len);
	if (r == -ENOENT)
		return;
	if (r < 0)
		problem(c, where, USE_FILE " is unreadable: %s", strerror(-r));
	else if (node_use_from_json(text, len, &u, &boot) < 0)
		problem(c, where,
			USE_FILE " is damaged: where this machine stages and publishes "
				 "the volume is unknown");
	node_use_done(&u);
}

/* Records the size of a data file an interrupted expand grew before it could record it (the
 * bytes are the volume's, and already counted). Under the volume's lock, checked again. */
static void repair_size(Checker *c, PoolCheckItem *item, const char *id)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	struct stat st;
	int lock = -EBADF;

	if (pool_volume_lock(c->repair, id, &lock) < 0)
		return;
	/* The pool's own data file: never the size of what a symlink points to. */
	_cleanup_close_ int data = pool_volume_data_open(c->repair, id, O_PATH);
	if (data >= 0 && pool_volume_load(c->repair, id, &v) == 0 && fstat(data, &st) == 0 &&
	    (uint64_t)st.st_size > v->size) {
		v->size = (uint64_t)st.st_size;
		if (pool_volume_save(c->repair, v) == 0)
			repaired(c, item, "recorded %llu bytes, the size an expand was making",
				 (unsigned long long)v->size);
	}
	pool_unlock(lock);
}

/* Makes again the data file of a blank volume not in use (not published, not staged here),
 * when a crash lost it or its size: a create does not sync a blank data file where the
 * filesystem keeps its directory entry with meta.json's fsync (staging_sync()). Holes of the
 * recorded size are what it held when made. Under the volume's lock, checked again. */
static void repair_blank(Checker *c, PoolCheckItem *item, const char *id)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	struct stat st;
	int lock = -EBADF;

	if (pool_volume_lock(c->repair, id, &lock) < 0)
		return;
	_cleanup_close_ int dir = pool_volume_dir_open(c->repair, id);
	if (dir < 0 || pool_volume_load(c->repair, id, &v) < 0 || *v->source_kind ||
	    v->n_attachments > 0 || faccessat(dir, USE_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
	    errno != ENOENT) {
		pool_unlock(lock);
		return;
	}
	_cleanup_close_ int data =
		openat(dir, DATA_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (data >= 0 && fstat(data, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size < v->size && ftruncate(data, (off_t)v->size) == 0 &&
	    fsync(data) == 0 && fsync_dir(dir) == 0) {
		if (pool_lock_take(c->repair) == 0) {
			(void)pool_ledger_write(c->repair, pool_ledger_recount(c->repair));
			pool_lock_release(c->repair);
		}
		repaired(
			c, item,
			"made again: %llu bytes of holes, the blank volume a crash left unfinished",
			(unsigned long long)v->size);
	}
	pool_unlock(lock);
}

/* Checks one object directory's data file against the size its metadata records. */
static void check_data(Checker *c, int obj_fd, const char *where, const char *volume_id,
		       uint64_t size)
{
	struct stat st;
	if (fstatat(obj_fd, DATA_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		PoolCheckItem *item = problem(c, where, "data file missing");
		if (c->repair && volume_id)
			repair_blank(c, item, volume_id);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		problem(c, where,
			S_ISLNK(st.st_mode) ? "data is a symbolic link, not a file of the pool"
					    : "data is not a regular file");
		return;
	}
	c->report->provisioned += (uint64_t)st.st_size;
	c->report->allocated += (uint64_t)st.st_blocks * 512;
	if ((uint64_t)st.st_size == size)
		return;
	PoolCheckItem *item = problem(c, where, "data file is %lld bytes, metadata says %llu",
				      (long long)st.st_size, (unsigned long long)size);
	if (c->repair && volume_id && (uint64_t)st.st_size > size)
		repair_size(c, item, volume_id);
	else if (c->repair && volume_id)
		repair_blank(c, item, volume_id);
}

static void check_volume(Checker *c, int obj_fd, const char *id, const char *text, size_t len)
{
	PoolVolume *v = NULL;
	char where[64], expect[POOL_ID_MAX];

	snprintf(where, sizeof(where), "volumes/%s", id);
	c->report->volumes++;
	if (pool_volume_from_json(text, len, &v) < 0) {
		PoolCheckItem *item = problem(c, where, "meta.json is damaged");
		snprintf(item->volume_id, sizeof(item->volume_id), "%s", id);
		return;
	}
	if (strcmp(v->id, id) != 0)
		problem(c, where, "meta.json names another volume (%s)", v->id);
	pool_volume_id_for_name(v->name, expect);
	if (strcmp(expect, id) != 0)
		problem(c, where, "ID does not match its name '%s' (want %s)", v->name, expect);
	check_data(c, obj_fd, where, id, v->size);
	struct stat st;
	int missing = fstatat(obj_fd, TREE_DIR, &st, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
	if (v->directory && (missing || !S_ISDIR(st.st_mode)))
		problem(c, where, "a directory volume without its directory " TREE_DIR "/ (%s)",
			missing		      ? strerror(missing)
			: S_ISLNK(st.st_mode) ? "a symbolic link"
					      : "not a directory");
	pool_volume_free(v);
}

static void check_snapshot(Checker *c, int obj_fd, const char *id, const char *text, size_t len)
{
	PoolSnapshot *s = NULL;
	char where[64];

	snprintf(where, sizeof(where), "snapshots/%s", id);
	c->report->snapshots++;
	if (pool_snapshot_from_json(text, len, &s) < 0) {
		problem(c, where, "meta.json is damaged");
		return;
	}
	if (strcmp(s->id, id) != 0)
		problem(c, where, "meta.json names another snapshot (%s)", s->id);
	check_data(c, obj_fd, where, NULL, s->size);
	pool_snapshot_free(s);
}

static void check_group(Checker *c, int obj_fd, const char *id, const char *text, size_t len)
{
	PoolGroup *g = NULL;
	char where[64];

	(void)obj_fd;
	snprintf(where, sizeof(where), "groups/%s", id);
	if (pool_group_from_json(text, len, &g) < 0) {
		problem(c, where, "meta.json is damaged");
		return;
	}
	pool_group_free(g);
}

/* One kind of object: its directory, its IDs, its check, the files its directories hold. */
typedef struct ObjectDir {
	const char *sub;
	bool (*valid)(const char *id);
	void (*check)(Checker *c, int obj_fd, const char *id, const char *text, size_t len);
	const char *const *files;
} ObjectDir;

static void check_dir(Checker *c, const ObjectDir *k)
{
	bool volumes = k->check == check_volume;

	_cleanup_close_ int fd =
		open_beneath(c->dir_fd, k->sub, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (fd < 0) {
		problem(c, k->sub, "missing or unreadable: %s", strerror(-fd));
		return;
	}
	_cleanup_closedir_ DIR *d = pool_opendir(fd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char where[512];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(where, sizeof(where), "%s/%s", k->sub, de->d_name);
		if (!k->valid(de->d_name)) {
			problem(c, where, "orphan: not an object of this pool");
			continue;
		}
		_cleanup_close_ int obj =
			open_beneath(fd, de->d_name, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
		_cleanup_free_ char *text = NULL;
		size_t len;
		if (obj == -ELOOP || obj == -ENOTDIR) {
			/* Never followed: what it points to is not the pool's. */
			PoolCheckItem *item = problem(
				c, where, "%s, not a directory of the pool (a delete removes it)",
				obj == -ELOOP ? "a symbolic link" : "no directory");
			if (volumes) {
				c->report->volumes++;
				snprintf(item->volume_id, sizeof(item->volume_id), "%.*s",
					 POOL_ID_MAX - 1, de->d_name);
			}
			continue;
		}
		if (obj >= 0)
			check_entries(c, obj, where, k->files);
		if (obj >= 0 && volumes)
			check_use_record(c, obj, where);
		if (obj < 0 || read_file_at(obj, META_FILE, META_MAX, &text, &len) < 0) {
			PoolCheckItem *item = problem(c, where, "meta.json missing or unreadable");
			if (volumes) {
				c->report->volumes++;
				snprintf(item->volume_id, sizeof(item->volume_id), "%.*s",
					 POOL_ID_MAX - 1, de->d_name);
			}
			continue;
		}
		k->check(c, obj, de->d_name, text, len);
	}
}

static void check_nodes(Checker *c)
{
	_cleanup_close_ int fd =
		open_beneath(c->dir_fd, "nodes", O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (fd >= 0)
		check_entries(c, fd, "nodes", NULL);
}

static void check_tmp(Checker *c)
{
	_cleanup_close_ int fd = open_beneath(c->dir_fd, "tmp", O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (fd < 0)
		return;
	/* What pool_open() removed before we looked. */
	for (char **name = c->repair ? c->repair->recovered : NULL; name && *name; name++) {
		char where[512];
		snprintf(where, sizeof(where), "tmp/%s", *name);
		repaired(c, problem(c, where, "left by an interrupted operation"), "removed");
	}
	_cleanup_closedir_ DIR *d = pool_opendir(fd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char where[512];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    held(fd, de->d_name))
			continue; /* an operation in flight */
		snprintf(where, sizeof(where), "tmp/%s", de->d_name);
		/* What cannot be removed is said, with what to do: never promised away. */
		_cleanup_free_ char *why = NULL;
		if (!pool_tmp_name_ours(de->d_name)) {
			problem(c, where, "unknown: no file of the pool (left as it is)");
			continue;
		}
		if (!c->repair) {
			if (pool_tree_check(fd, de->d_name, "tmp", &why) < 0)
				problem(c, where,
					"left by an interrupted operation, and it cannot be "
					"removed: %s, then repair",
					why);
			else
				problem(c, where,
					"left by an interrupted operation (removed when volplugd "
					"next opens the pool)");
			continue;
		}
		int r = pool_tmp_clean(c->repair, de->d_name, &why);
		if (r == -EBUSY && !why)
			continue; /* taken by an operation since we looked */
		if (r == 0)
			repaired(c, problem(c, where, "left by an interrupted operation"),
				 "removed");
		else
			problem(c, where,
				"left by an interrupted operation, and it cannot be removed: %s%s",
				why ?: strerror(-r), why ? ", then repair again" : "");
	}
}

/* Whether a loop device's backing file (relative to the pool) is a volume's data file: the
 * only pool file a record explains a loop device over. */
static bool loop_explained(Checker *c, const LoopInfo *loop, const char *rel)
{
	char id[POOL_ID_MAX];
	struct stat st;

	if (loop->deleted || strncmp(rel, "volumes/", 8) != 0)
		return false;
	const char *slash = strchr(rel + 8, '/');
	if (!slash || (size_t)(slash - (rel + 8)) >= sizeof(id) || strcmp(slash, "/" DATA_FILE))
		return false;
	snprintf(id, sizeof(id), "%.*s", (int)(slash - (rel + 8)), rel + 8);
	return pool_volume_id_valid(id) && fstatat(c->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A loop device over a pool file that no record uses: detached, unless it is mounted (then
 * each mount is reported and left alone: unmounting is for whoever mounted it). */
static void check_stray_loop(Checker *c, const LoopInfo *loop, const char *rel)
{
	_cleanup_strv_free_ char **mounts = NULL;

	(void)mount_list_by_devno(loop->devno, &mounts);
	for (char **m = mounts; m && *m; m++)
		problem(c, loop->devpath,
			"mounted at %s, over %s, which no record of the pool uses (not unmounted)",
			*m, rel);
	if (!mounts && !c->repair)
		problem(c, loop->devpath, "attached over %s, which no record uses", rel);
	else if (!mounts) {
		int r = loop_detach(loop->devpath);
		if (r == 0)
			repaired(c,
				 problem(c, loop->devpath, "attached over %s, which no record uses",
					 rel),
				 "detached");
		else
			problem(c, loop->devpath,
				"attached over %s, which no record uses (cannot detach it: %s)",
				rel, strerror(-r));
	}
}

static void check_loops(Checker *c)
{
	_cleanup_free_ char *canon = realpath(c->path, NULL);
	LoopInfo *loops = NULL;
	size_t n = 0;

	if (!canon || loop_list_for_dir(canon, &loops, &n) < 0)
		return; /* no loop support here (a container): nothing can be attached */
	for (size_t i = 0; i < n; i++) {
		const char *rel = loops[i].backing_file + strlen(canon);
		rel += *rel == '/';
		if (!loop_explained(c, &loops[i], rel))
			check_stray_loop(c, &loops[i], rel);
	}
	loop_info_array_free(loops, n);
}

static void check_space(Checker *c)
{
	struct statvfs sv;

	if (fstatvfs(c->dir_fd, &sv) < 0)
		return;
	c->report->fs_size = (uint64_t)sv.f_blocks * sv.f_frsize;
	c->report->fs_free = (uint64_t)sv.f_bavail * sv.f_frsize;
}

static void check_all(Checker *c)
{
	static const char *const volume_files[] = {META_FILE, DATA_FILE, TREE_DIR,
						   USE_FILE,  USE_LOCK,	 NULL};
	static const char *const snapshot_files[] = {META_FILE, DATA_FILE, TREE_DIR, NULL};
	static const char *const group_files[] = {META_FILE, NULL};
	static const ObjectDir kinds[] = {
		{"volumes", pool_volume_id_valid, check_volume, volume_files},
		{"snapshots", pool_snapshot_id_valid, check_snapshot, snapshot_files},
		{"groups", pool_group_id_valid, check_group, group_files},
	};

	for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
		check_dir(c, &kinds[i]);
	check_nodes(c);
	check_tmp(c);
	check_loops(c);
	check_space(c);
}

int pool_check(const char *path, PoolCheckReport *ret)
{
	PoolCheckReport report = {};
	Checker c = {.path = path, .report = &report};

	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	c.dir_fd = fd;
	check_all(&c);
	*ret = report;
	return 0;
}

int pool_check_repair(Pool *p, PoolCheckReport *ret)
{
	PoolCheckReport report = {};
	Checker c = {.dir_fd = p->dir_fd, .path = p->path, .repair = p, .report = &report};

	check_all(&c);
	/* Reported once: a second pass on the same pool reports only what it finds itself. */
	strv_free(p->recovered);
	p->recovered = NULL;
	*ret = report;
	return 0;
}
