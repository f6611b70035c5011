/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "alloc.h"
#include "error-util.h"
#include "failpoint.h"
#include "fileio.h"
#include "hash-util.h"
#include "log.h"
#include "loopdev.h"
#include "mount-util.h"
#include "pool-internal.h"
#include "quota.h"
#include "pool-meta.h"
#include "pinned-path.h"
#include "random-util.h"

typedef enum {
	KIND_VOLUME,
	KIND_SNAPSHOT,
	KIND_GROUP,
} ObjectKind;

static const char *const kind_prefix[] = {
	[KIND_VOLUME] = POOL_VOLUME_PREFIX,
	[KIND_SNAPSHOT] = POOL_SNAPSHOT_PREFIX,
	[KIND_GROUP] = "group-",
};

static int kind_fd(const Pool *p, ObjectKind k)
{
	return k == KIND_VOLUME	    ? p->volumes_fd
	       : k == KIND_SNAPSHOT ? p->snapshots_fd
				    : p->groups_fd;
}

/* Group commit of the object directories' fsyncs (DirSync). */

static void dir_sync_init(DirSync *s)
{
	*s = (DirSync){};
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->done_cond, NULL);
}

static void dir_sync_done(DirSync *s)
{
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->done_cond);
}

/* Makes durable every change the caller made to dir_fd (renames of entries into or out of it)
 * before this call: by an fsync of dir_fd started after the call, by this caller or a
 * concurrent one. A failed fsync covers nobody: its runner returns the error, the others run
 * it again. */
static int dir_sync_wait(DirSync *s, int dir_fd)
{
	int r = 0;

	pthread_mutex_lock(&s->lock);
	uint64_t mine = ++s->ticket;
	while (s->done < mine) {
		if (s->running) {
			pthread_cond_wait(&s->done_cond, &s->lock);
			continue;
		}
		/* Every caller up to here made its change before the fsync starts. */
		uint64_t upto = s->ticket;
		s->running = true;
		s->fsyncs++;
		pthread_mutex_unlock(&s->lock);
		failpoint("pool-dir-sync");
		r = fsync_dir(dir_fd);
		pthread_mutex_lock(&s->lock);
		s->running = false;
		if (r == 0)
			s->done = upto;
		pthread_cond_broadcast(&s->done_cond);
		if (r < 0)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

static int kind_sync(Pool *p, ObjectKind k)
{
	return dir_sync_wait(&p->dir_syncs[k], kind_fd(p, k));
}

uint64_t pool_dir_fsyncs(Pool *p)
{
	uint64_t n = 0;

	for (size_t k = 0; k < ELEMENTSOF(p->dir_syncs); k++) {
		pthread_mutex_lock(&p->dir_syncs[k].lock);
		n += p->dir_syncs[k].fsyncs;
		pthread_mutex_unlock(&p->dir_syncs[k].lock);
	}
	return n;
}

/* IDs */

static bool id_valid(const char *id, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strncmp(id, prefix, n) != 0 || strlen(id) != n + 16)
		return false;
	for (const char *c = id + n; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

bool pool_volume_id_valid(const char *id)
{
	return id_valid(id, kind_prefix[KIND_VOLUME]);
}

bool pool_snapshot_id_valid(const char *id)
{
	return id_valid(id, kind_prefix[KIND_SNAPSHOT]);
}

char *pool_volume_not_found(const char *field, const char *id)
{
	if (!pool_volume_id_valid(id))
		return xasprintf("%s: '%s' is not a volume ID of this pool", field, id);
	return xasprintf("%s: volume %s not found", field, id);
}

/* 64 bits of a name, mixed well enough that IDs spread evenly (FNV-1a, then the murmur3
 * finaliser). Not a defence against chosen collisions: those cost a slot, not a volume. */
static void id_for_name(ObjectKind k, const char *name, unsigned slot, char ret[POOL_ID_MAX])
{
	snprintf(ret, POOL_ID_MAX, "%s%016llx", kind_prefix[k],
		 (unsigned long long)hash_mix64(fnv1a64_string(name, slot)));
}

void pool_volume_id_for_name(const char *name, char ret_id[POOL_ID_MAX])
{
	id_for_name(KIND_VOLUME, name, 0, ret_id);
}

void pool_snapshot_id_for_name(const char *name, char ret_id[POOL_ID_MAX])
{
	id_for_name(KIND_SNAPSHOT, name, 0, ret_id);
}

/* Directory helpers */

DIR *pool_opendir(int dir_fd)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (fd >= 0 && !d)
		close(fd);
	return d;
}

int pool_list_ids(int dir_fd, const char *prefix, char ***ret_ids, size_t *ret_n)
{
	_cleanup_closedir_ DIR *d = pool_opendir(dir_fd);
	char **ids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d)
		return negative_errno();
	while ((de = readdir(d)))
		if (id_valid(de->d_name, prefix))
			strv_push(&ids, &n, &cap, xstrdup(de->d_name));
	strv_sort(ids);
	*ret_ids = ids;
	*ret_n = n;
	return 0;
}

/* An object's directory: -ENOENT when there is none, -EUCLEAN when something else is at its
 * name (a symlink is never followed). */
static int object_open(const Pool *p, ObjectKind k, const char *id)
{
	if (!id_valid(id, kind_prefix[k]))
		return -ENOENT; /* never a path from an unchecked ID */
	int fd = open_beneath(kind_fd(p, k), id, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	return fd == -ELOOP || fd == -ENOTDIR ? -EUCLEAN : fd;
}

int pool_volume_dir_open(const Pool *p, const char *id)
{
	return object_open(p, KIND_VOLUME, id);
}

bool pool_volume_present(const Pool *p, const char *id)
{
	return pool_volume_id_valid(id) &&
	       faccessat(p->volumes_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool object_dir_current(const Pool *p, ObjectKind k, const char *id, int dir_fd)
{
	struct stat held, there;

	return fstat(dir_fd, &held) == 0 &&
	       fstatat(kind_fd(p, k), id, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
	       held.st_ino == there.st_ino && held.st_dev == there.st_dev;
}

bool pool_volume_dir_current(const Pool *p, const char *id, int dir_fd)
{
	return object_dir_current(p, KIND_VOLUME, id, dir_fd);
}

/* Opens and flocks an object's directory, and checks that it is still the object at its place:
 * it may have been removed (or removed and made again) while we waited for the lock. */
static int object_lock(const Pool *p, ObjectKind k, const char *id, int *ret_fd)
{
	_cleanup_close_ int fd = object_open(p, k, id);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	if (!object_dir_current(p, k, id, fd))
		return -ENOENT;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Records */

int pool_write_atomic(Pool *p, int dir_fd, const char *name, const char *text, size_t len,
		      WriteFileFlags flags)
{
	int r = write_file_atomic_via(p->tmp_fd, dir_fd, name, text, len, 0600, flags);
	if (r == -ENOSPC && pool_reserve_release(p))
		r = write_file_atomic_via(p->tmp_fd, dir_fd, name, text, len, 0600, flags);
	return r;
}

/* Open and recovery */

/* run/: state of the processes serving the pool, for their own recovery (the exec registry
 * of volplugd's children); the pool itself never reads it. */
static const char *const pool_subdirs[] = {"volumes", "snapshots", "groups", "nodes", "tmp", "run"};

static int pool_layout(int dir_fd)
{
	for (size_t i = 0; i < ELEMENTSOF(pool_subdirs); i++)
		if (mkdirat(dir_fd, pool_subdirs[i], 0700) < 0 && errno != EEXIST)
			return negative_errno();
	return 0;
}

bool pool_tmp_name_ours(const char *name)
{
	static const char *const prefixes[] = {POOL_STAGING_PREFIX, "del-", ".direct-io-"};

	for (size_t i = 0; i < ELEMENTSOF(prefixes); i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0 && !strchr(name, '/'))
			return true;
	return write_file_is_temporary(name);
}

/* Whether tmp/name (open as fd) is a staging directory whose object was committed: the same
 * directory is in place under the object's ID. The rename that commits an object syncs only the
 * directory it lands in (docs/pool.md, Crash safety), so after a crash on a filesystem without
 * a journal the staging name may be found again: it is no leftover to remove. */
static bool staging_committed(Pool *p, const char *name, int fd)
{
	char id[POOL_ID_MAX];
	struct stat a, b;
	const char *start = name + strlen(POOL_STAGING_PREFIX), *dot;

	if (strncmp(name, POOL_STAGING_PREFIX, strlen(POOL_STAGING_PREFIX)) != 0 ||
	    !(dot = strchr(start, '.')) || (size_t)(dot - start) >= sizeof(id))
		return false;
	memcpy(id, start, (size_t)(dot - start));
	id[dot - start] = 0;
	for (size_t k = 0; k < ELEMENTSOF(kind_prefix); k++)
		if (id_valid(id, kind_prefix[k]) && fstat(fd, &a) == 0 &&
		    fstatat(kind_fd(p, (ObjectKind)k), id, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return true;
	return false;
}

/* Removes tmp/name unless a live operation holds its flock; what is in the way stays
 * (pool_tree_remove()). Hold the pool lock. */
static int tmp_clean_locked(Pool *p, const char *name, char **ret_why)
{
	if (!pool_tmp_name_ours(name))
		return -EPERM; /* nothing the pool made: left as it is */
	/* O_NONBLOCK: a FIFO someone left here must not hang the open. */
	_cleanup_close_ int fd =
		openat(p->tmp_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno != ELOOP) /* ELOOP: a symlink, nobody's operation, never followed */
		return errno == ENOENT ? 0 : negative_errno();
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
	if (fd >= 0 && staging_committed(p, name, fd)) {
		log_warning("pool: tmp/%s is also the object it made (a crash lost the directory "
			    "entry's removal, the filesystem needs a check): left as it is",
			    name);
		return -EEXIST;
	}
	uint32_t project = fd >= 0 ? pool_dirvol_project(fd) : 0;
	int r = pool_tree_remove(p->tmp_fd, name, "tmp", ret_why);
	if (r == 0)
		pool_ledger_release(p, pool_staging_reserved(name));
	if (fd >= 0)
		pool_dirvol_release(p, fd, project);
	return r;
}

int pool_tmp_clean(Pool *p, const char *name, char **ret_why)
{
	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	r = tmp_clean_locked(p, name, ret_why);
	pool_lock_release(p);
	return r;
}

/* Removes what a crash left in tmp/: objects half made or half removed, temporaries of
 * atomic writes. What another process is still working on holds its flock and is left alone.
 * Hold the pool lock. */
static void pool_recover(Pool *p)
{
	_cleanup_closedir_ DIR *d = pool_opendir(p->tmp_fd);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!pool_tmp_name_ours(de->d_name)) {
			log_debug("pool: tmp/%s is nothing the pool made: left as it is",
				  de->d_name);
			continue;
		}
		_cleanup_free_ char *why = NULL;
		int r = tmp_clean_locked(p, de->d_name, &why);
		if (r == -EBUSY)
			continue;
		if (r < 0) { /* pool_check_repair() reports it, with why */
			log_debug_errno(r, "pool: cannot clean tmp/%s: %s", de->d_name,
					why ?: strerror(-r));
			continue;
		}
		log_debug("pool: cleaned tmp/%s left by an interrupted operation", de->d_name);
		strv_append(&p->recovered, xstrdup(de->d_name));
	}
}

/* Whether the filesystem holding dir_fd makes a new file's directory entry durable with the
 * file's own fsync. ext4 (journal or not: without one it syncs the new entry's parents), XFS
 * and btrfs do; POSIX does not say so, and ext2 (the same magic number as ext4, told apart
 * here by the mount table's type) does not. */
static bool fs_entry_with_file(int dir_fd)
{
	static const char *const types[] = {"ext4", "xfs", "btrfs"};
	MountInfo m = {};
	struct statx sx;
	bool yes = false;

	if (statx(dir_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 ||
	    !(sx.stx_mask & STATX_MNT_ID) || mount_find_by_id(sx.stx_mnt_id, &m) < 0)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		yes = yes || (m.fstype && strcmp(m.fstype, types[i]) == 0);
	mount_info_done(&m);
	return yes;
}

static int open_subdir(int dir_fd, const char *name)
{
	return open_beneath(dir_fd, name, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
}

/* The pinned pool directory, laid out unless it must hold a pool already. */
static int pool_dir_open(const PoolConfig *config)
{
	int r = config->existing ? 0 : pool_place_check(config->path, config->init);
	if (r < 0)
		return r;
	if (!config->existing && mkdir(config->path, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	_cleanup_close_ int fd = open(config->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
		return negative_errno();
	if (config->existing && faccessat(fd, "volumes", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return -ENOENT;
	if ((r = pool_layout(fd)) < 0)
		return r;
	if (!config->existing)
		pool_record_write(config->path);
	return TAKE_FD(fd);
}

/* Cleans tmp/ and recounts the ledger, under the pool lock: another process's operations in
 * flight are counted by their staging directories, which they hold. */
static int pool_recover_and_count(Pool *p, uint64_t *ret_provisioned)
{
	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	pool_recover(p);
	*ret_provisioned = pool_ledger_recount(p);
	r = pool_ledger_write(p, *ret_provisioned);
	pool_lock_release(p);
	return r;
}

#define NODE_FILE "node"
#define NODE_MAX 256

char *pool_layout_damage(const char *path)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	for (size_t i = 0; fd >= 0 && i <= ELEMENTSOF(pool_subdirs); i++) {
		bool dir = i < ELEMENTSOF(pool_subdirs);
		const char *name = dir ? pool_subdirs[i] : LEDGER_FILE;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(st.st_mode))
			return xasprintf("%s%s is a symbolic link, not a %s of the pool (never "
					 "followed)",
					 name, dir ? "/" : "", dir ? "directory" : "file");
		if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
			return xasprintf("%s%s is not a %s", name, dir ? "/" : "",
					 dir ? "directory" : "regular file");
	}
	return NULL;
}

char *pool_recorded_node(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *text = NULL;
	size_t len;

	if (fd < 0 || read_file_at(fd, NODE_FILE, NODE_MAX, &text, &len) < 0)
		return NULL;
	text[strcspn(text, "\n")] = 0;
	return text;
}

/* Records the node a pool serves at its first use, and refuses (-EXDEV) another one: the IDs
 * of its objects carry that node (pool-ids.c), so one pool serves one node. */
static int pool_node_check(Pool *p, const char *node_id)
{
	_cleanup_free_ char *recorded = pool_recorded_node(p->path);
	_cleanup_free_ char *line = NULL;

	if (!node_id)
		return 0;
	if (recorded)
		return strcmp(recorded, node_id) == 0 ? 0 : -EXDEV;
	line = xasprintf("%s\n", node_id);
	return write_file_atomic_via(p->tmp_fd, p->dir_fd, NODE_FILE, line, strlen(line), 0600,
				     WRITE_FILE_DURABLE);
}

int pool_open(const PoolConfig *config, Pool **ret)
{
	uint64_t provisioned;
	int r;

	int fd = pool_dir_open(config);
	if (fd < 0)
		return fd;
	Pool *p = xnew0(Pool, 1);
	p->volumes_fd = p->snapshots_fd = p->groups_fd = p->nodes_fd = p->tmp_fd = -EBADF;
	p->ledger_fd = -EBADF;
	p->path = xstrdup(config->path);
	p->real_path = realpath(config->path, NULL);
	p->dir_fd = fd;
	p->zone = xstrdup(config->zone ?: "local");
	p->boot_id = node_use_boot_id();
	pthread_mutex_init(&p->lock, NULL);
	for (size_t k = 0; k < ELEMENTSOF(p->dir_syncs); k++)
		dir_sync_init(&p->dir_syncs[k]);
	if ((r = p->volumes_fd = open_subdir(p->dir_fd, "volumes")) < 0 ||
	    (r = p->snapshots_fd = open_subdir(p->dir_fd, "snapshots")) < 0 ||
	    (r = p->groups_fd = open_subdir(p->dir_fd, "groups")) < 0 ||
	    (r = p->nodes_fd = open_subdir(p->dir_fd, "nodes")) < 0 ||
	    (r = p->tmp_fd = open_subdir(p->dir_fd, "tmp")) < 0) {
		pool_close(p);
		return r;
	}
	p->ledger_fd = open_beneath(p->dir_fd, LEDGER_FILE, O_RDWR | O_CREAT, 0600, S_IFREG);
	if (p->ledger_fd < 0 || (r = pool_recover_and_count(p, &provisioned)) < 0 ||
	    (r = pool_node_check(p, config->node_id)) < 0) {
		r = p->ledger_fd < 0 ? p->ledger_fd : r;
		pool_close(p);
		return r;
	}
	p->entry_with_file = fs_entry_with_file(p->dir_fd);
	p->capacity = config->capacity;
	p->overprovision = config->overprovision > 0 ? config->overprovision : 1;
	pool_reserve_restore(p);
	*ret = p;
	return 0;
}

void pool_close(Pool *p)
{
	if (!p)
		return;
	closep(&p->dir_fd);
	closep(&p->volumes_fd);
	closep(&p->snapshots_fd);
	closep(&p->groups_fd);
	closep(&p->nodes_fd);
	closep(&p->tmp_fd);
	closep(&p->ledger_fd);
	pthread_mutex_destroy(&p->lock);
	for (size_t k = 0; k < ELEMENTSOF(p->dir_syncs); k++)
		dir_sync_done(&p->dir_syncs[k]);
	strv_free(p->recovered);
	free(p->path);
	free(p->real_path);
	free(p->zone);
	free(p->boot_id);
	free(p);
}

int pool_probe(Pool *p)
{
	struct statvfs sv;
	struct stat st, there;

	if (fstat(p->dir_fd, &st) < 0)
		return negative_errno();
	if (st.st_nlink == 0)
		return -ENOMEDIUM; /* the directory was removed under us */
	/* Its path leads elsewhere now (removed and made again, moved, a mount over it): the
	 * pool's paths (a data file's, for a loop device) no longer reach it. */
	if (stat(p->path, &there) < 0 || there.st_ino != st.st_ino || there.st_dev != st.st_dev)
		return -ENOMEDIUM;
	if (fstatat(p->volumes_fd, ".", &st, 0) < 0 || st.st_nlink == 0)
		return -ENOMEDIUM;
	if (fstatvfs(p->dir_fd, &sv) < 0)
		return negative_errno();
	if (sv.f_flag & ST_RDONLY)
		return -EROFS;
	return 0;
}

const char *pool_path(const Pool *p)
{
	return p->path;
}

const char *pool_zone(const Pool *p)
{
	return p->zone;
}

/* Making and removing objects */

typedef struct Staging {
	char name[POOL_ID_MAX + 48]; /* below tmp/: new-<id>.<random>.<reserved bytes> */
	uint64_t size;		     /* reserved in the ledger while the directory exists */
	int fd;			     /* the staging dir, flock'ed */
} Staging;

static int staging_mkdir(Pool *p, Staging *s)
{
	if (mkdirat(p->tmp_fd, s->name, 0700) < 0)
		return negative_errno();
	s->fd = open_beneath(p->tmp_fd, s->name, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (s->fd < 0 || flock(s->fd, LOCK_EX) < 0) {
		int r = s->fd < 0 ? s->fd : negative_errno();
		(void)unlinkat(p->tmp_fd, s->name, AT_REMOVEDIR);
		closep(&s->fd);
		return r;
	}
	return 0;
}

/* Reserves size bytes and makes the staging directory that holds them, in one critical
 * section: -ENOSPC beyond the capacity. */
static int staging_begin(Pool *p, const char *id, uint64_t size, Staging *ret)
{
	snprintf(ret->name, sizeof(ret->name), POOL_STAGING_PREFIX "%s.%08" PRIx32 ".%" PRIu64, id,
		 (uint32_t)random_u64(), size);
	ret->size = size;

	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	r = pool_ledger_reserve(p, size);
	if (r == 0 && (r = staging_mkdir(p, ret)) < 0)
		pool_ledger_release(p, size);
	pool_lock_release(p);
	return r;
}

/* Gives up a staged object: renamed out of the ledger's sight with its bytes given back, then
 * removed outside the lock. */
static void staging_abort(Pool *p, Staging *s)
{
	char trash[sizeof(s->name) + 4];
	const char *name = s->name;
	_cleanup_free_ char *why = NULL;
	uint32_t project = pool_dirvol_project(s->fd);

	snprintf(trash, sizeof(trash), "del-%s", s->name + strlen(POOL_STAGING_PREFIX));
	if (pool_lock_take(p) == 0) {
		if (renameat2(p->tmp_fd, s->name, p->tmp_fd, trash, RENAME_NOREPLACE) == 0)
			name = trash;
		else
			(void)pool_tree_remove(p->tmp_fd, s->name, "tmp", &why);
		pool_ledger_release(p, s->size);
		pool_lock_release(p);
	}
	(void)pool_tree_remove(p->tmp_fd, name, "tmp", &why); /* else the next open's */
	pool_dirvol_release(p, s->fd, project);
	closep(&s->fd);
}

/* Makes a staged object durable before it can appear: its files, then its directory. Done
 * once, after every write, so that one journal commit covers them all (syncing each file as
 * it was written cost a commit apiece). Where the filesystem makes a new file's directory entry
 * durable with the file's own fsync (entry_with_file), the directory is not synced, and neither
 * is a blank data file (holes of the size meta.json records): should a crash lose it or its
 * size, the next start makes it again (pool_check_repair()). docs/pool.md, What each fsync is
 * for. */
static int staging_sync(Pool *p, Staging *s, bool blank)
{
	static const char *const files[] = {META_FILE, DATA_FILE};

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		if (blank && p->entry_with_file && strcmp(files[i], DATA_FILE) == 0)
			continue;
		_cleanup_close_ int fd = openat(s->fd, files[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT)
			continue; /* a group has no data file */
		if (fd < 0 || fsync(fd) < 0)
			return negative_errno();
	}
	return p->entry_with_file ? 0 : fsync_dir(s->fd);
}

/* Moves the finished object into place; -EEXIST when another one got there first. The rename
 * hands the reserved bytes on to the object's data file (of the same size): under the pool
 * lock, so that a recount never sees both or neither. blank: its data file is holes only. */
static int staging_commit(Pool *p, ObjectKind k, Staging *s, const char *id, bool blank)
{
	int r = staging_sync(p, s, blank);
	if (r < 0) {
		staging_abort(p, s);
		return r;
	}
	failpoint("pool-commit-after-sync");
	r = pool_lock_take(p);
	if (r < 0) {
		staging_abort(p, s);
		return r;
	}
	if (renameat2(p->tmp_fd, s->name, kind_fd(p, k), id, RENAME_NOREPLACE) < 0)
		r = errno == EEXIST || errno == ENOTEMPTY ? -EEXIST : negative_errno();
	pool_lock_release(p);
	if (r < 0) {
		staging_abort(p, s);
		return r;
	}
	closep(&s->fd);
	failpoint("pool-commit-after-rename");
	/* tmp/ is not synced: should its side of the rename be lost, the open's clean-up finds
	 * the old name to be the object itself and leaves it (tmp_clean_locked()). */
	r = kind_sync(p, k);
	if (r == 0)
		failpoint("pool-commit-after-dir-sync");
	return r;
}

/* Fills a staged object's data file: blank of size bytes, or a copy of source's data file
 * (opened by the caller) grown to size. staging_commit() syncs it (staging_sync()). */
static int staging_fill(Staging *s, int source_data_fd, uint64_t size, CopyMethod *ret_method)
{
	struct stat st;
	_cleanup_close_ int fd =
		openat(s->fd, DATA_FILE, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return negative_errno();
	if (source_data_fd >= 0) {
		if (fstat(source_data_fd, &st) < 0)
			return negative_errno();
		if ((uint64_t)st.st_size > size)
			return -ERANGE;
		int r = copy_file_contents(source_data_fd, fd, ret_method);
		if (r < 0)
			return r;
	}
	if (ftruncate(fd, (off_t)size) < 0)
		return negative_errno();
	return 0;
}

/* Writes a staged object's meta.json in place: nobody sees it before staging_commit() has
 * synced it and renamed the whole directory, so it needs no temporary file of its own. */
static int staging_write_meta(Staging *s, const char *text, size_t len)
{
	_cleanup_close_ int fd = openat(s->fd, META_FILE,
					O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return negative_errno();
	while (len > 0) {
		ssize_t n = write(fd, text, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? negative_errno() : -EIO;
		text += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Whether the volume is staged on this machine: a loop device over its data file is the
 * kernel's word for it (whatever the records say); its use record names the node and the
 * staging path when it has them. Hold the volume's lock (dir_fd, its directory) and its node
 * lock. */
static int volume_check_unstaged(Pool *p, int dir_fd, const char *id, PoolVolumeFound *found)
{
	NodeUse u = {};
	char *dev;

	/* A directory volume: a mount whose root is its tree/ (kernel truth), or its use record
	 * saying it is staged (a bind not found by its path: both err on keeping the data). */
	_cleanup_close_ int tree = open_beneath(dir_fd, TREE_DIR, O_PATH | O_DIRECTORY, 0, S_IFDIR);
	int r = tree >= 0 ? pool_dirvol_mounted(p, id, &found->device) : 0;
	if (r < 0)
		return r;
	if (tree >= 0 && pool_volume_use_load(p, id, &u) == 0 && u.staging.path) {
		found->node = u.node && *u.node ? TAKE_PTR(u.node) : NULL;
		found->staging_path = TAKE_PTR(u.staging.path);
		r = 1;
	}
	node_use_done(&u);
	if (r > 0) {
		found->use = POOL_VOLUME_STAGED;
		found->directory = true;
		if (!found->device)
			found->device = xstrdup(found->staging_path);
		return -ENOTEMPTY;
	}

	/* Through the data file the pool holds: a symlink's target is not the volume's. */
	_cleanup_close_ int data = open_beneath(dir_fd, DATA_FILE, O_PATH, 0, S_IFREG);
	if (data == -ENOENT || data == -ELOOP || data == -ENOTDIR || data == -EISDIR ||
	    data == -EBADFD)
		return 0;
	if (data < 0)
		return data;
	/* Among the devices with a capacity: one bound with none exposes no byte of the file. */
	r = loop_find_fd_sized(data, &dev);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	found->use = POOL_VOLUME_STAGED;
	found->device = dev;
	if (pool_volume_use_load(p, id, &u) == 0 && u.staging.path) {
		found->node = u.node && *u.node ? TAKE_PTR(u.node) : NULL;
		found->staging_path = TAKE_PTR(u.staging.path);
	}
	node_use_done(&u);
	return -ENOTEMPTY;
}

/* What keeps a volume from being deleted, checked under its lock and its node lock in the
 * same hold as the delete (dir_fd, locked): its attachments (published to a node, as far as
 * its metadata says: a damaged volume's are unknown), and whether it is staged on this machine.
 * -ENOTEMPTY when it is in use; *found says what it is and what uses it. */
static int pool_volume_check_unused(Pool *p, int dir_fd, const char *id, PoolVolumeFound *found)
{
	_cleanup_free_ char *text = NULL;
	PoolVolume *v = NULL;
	size_t len;

	if (read_file_at(dir_fd, META_FILE, META_MAX, &text, &len) == 0 &&
	    pool_volume_from_json(text, len, &v) == 0) {
		found->name = TAKE_PTR(v->name);
		if (v->n_attachments > 0) {
			found->use = POOL_VOLUME_PUBLISHED;
			found->node = xstrdup(v->attachments[0].node);
		}
		pool_volume_free(v);
		if (found->node)
			return -ENOTEMPTY;
	}
	return volume_check_unstaged(p, dir_fd, id, found);
}

static const char *const kind_dir[] = {
	[KIND_VOLUME] = "volumes",
	[KIND_SNAPSHOT] = "snapshots",
	[KIND_GROUP] = "groups",
};

/* Removes what is at an object's name and is no directory (a symlink, a file): that entry
 * itself, never what a symlink points to. */
static int object_remove_entry(Pool *p, ObjectKind k, const char *id)
{
	struct stat st;

	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	if (fstatat(kind_fd(p, k), id, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	else if (S_ISDIR(st.st_mode))
		r = -EBUSY; /* replaced by a directory meanwhile: not ours to judge here */
	else if (unlinkat(kind_fd(p, k), id, 0) < 0)
		r = negative_errno();
	pool_lock_release(p);
	if (r < 0)
		return r;
	log_debug("pool: removed %s/%s, which was no directory", kind_dir[k], id);
	return kind_sync(p, k);
}

/* The node lock of a volume being deleted (its directory dir_fd, locked): a node.lock that is no
 * file of the pool (a symlink) is a damage the delete repairs, by removing that name itself,
 * never what it points to. Nobody can hold a lock on it. */
static int volume_use_lock_for_delete(int dir_fd, int *ret_lock_fd)
{
	int r = pool_volume_use_lock_at(dir_fd, ret_lock_fd);
	if (r != -ELOOP && r != -EBADFD)
		return r;
	if (unlinkat(dir_fd, USE_LOCK, 0) < 0)
		return negative_errno();
	return pool_volume_use_lock_at(dir_fd, ret_lock_fd);
}

/* Removes an object: one rename makes it gone, and gives its data's size back to the ledger in
 * the same critical section; the files go after. A volume (found non-NULL) is checked unused
 * first, under the same hold of its lock and of its node lock: a NodeStageVolume waiting for
 * the node lock finds the volume gone when it gets it. So is whether its files can all be
 * removed: a delete that could not finish is refused before anything changes (-EPERM, *ret_why
 * says what is in the way), never left half done in tmp/. Should a file still resist (changed
 * since), the object is gone all the same and *ret_why says what is left in tmp/. */
static int object_remove(Pool *p, ObjectKind k, const char *id, PoolVolumeFound *found,
			 char **ret_why)
{
	char trash[POOL_ID_MAX + 24];
	struct stat st;
	PoolTreeFiles files;
	_cleanup_close_ int fd = -EBADF, node_lock = -EBADF;

	int r = object_lock(p, k, id, &fd);
	if (r == -EUCLEAN)
		return object_remove_entry(p, k, id);
	if (r < 0)
		return r;
	if (found && (r = volume_use_lock_for_delete(fd, &node_lock)) < 0)
		return r;
	if (found && (r = pool_volume_check_unused(p, fd, id, found)) < 0)
		return r;
	if (pool_tree_check_files(kind_fd(p, k), id, kind_dir[k], &files, ret_why) < 0)
		return -EPERM;
	failpoint("pool-delete-after-check");
	snprintf(trash, sizeof(trash), "del-%s.%08" PRIx32, id, (uint32_t)random_u64());
	if ((r = pool_lock_take(p)) < 0)
		return r;
	if (stat_beneath(fd, DATA_FILE, S_IFREG, &st) < 0)
		st.st_size = 0; /* no data file of the pool: nothing counted for it */
	if (renameat2(kind_fd(p, k), id, p->tmp_fd, trash, RENAME_NOREPLACE) < 0)
		r = errno == ENOENT ? -ENOENT : negative_errno();
	else
		pool_ledger_release(p, (uint64_t)st.st_size);
	pool_lock_release(p);
	pool_unlock(TAKE_FD(node_lock)); /* renamed away (or not): a waiting stage may look now */
	if (r < 0)
		return r;
	r = kind_sync(p, k);
	if (r < 0)
		return r;
	failpoint("pool-delete-after-rename");
	uint32_t project = pool_dirvol_project(fd); /* fd: the object's directory, now in tmp/ */
	(void)pool_tree_remove_files(p->tmp_fd, trash, fd, &files, "tmp", ret_why);
	pool_dirvol_release(p, fd, project);
	pool_reserve_restore(p); /* with the space it held, where the reserve was given up */
	return 0;
}

static int meta_load(const Pool *p, ObjectKind k, const char *id, char **ret_text, size_t *ret_len)
{
	_cleanup_close_ int fd = object_open(p, k, id);
	if (fd < 0)
		return fd;
	int r = read_file_at(fd, META_FILE, META_MAX, ret_text, ret_len);
	return r == -ENOENT ? -EBADMSG : r; /* a committed object always has its metadata */
}

/* Volumes */

int pool_volume_load(Pool *p, const char *id, PoolVolume **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	int r = meta_load(p, KIND_VOLUME, id, &text, &len);
	if (r < 0)
		return r;
	r = pool_volume_from_json(text, len, ret);
	if (r < 0)
		return log_debug_errno(r, "pool: volumes/%s/" META_FILE " is damaged", id);
	return 0;
}

static int open_source_data(Pool *p, const char *kind, const char *id, int *ret_lock_fd,
			    int *ret_data_fd)
{
	ObjectKind k;

	if (!kind || !*kind) {
		*ret_lock_fd = *ret_data_fd = -EBADF;
		return 0;
	}
	if (strcmp(kind, "snapshot") == 0)
		k = KIND_SNAPSHOT;
	else if (strcmp(kind, "volume") == 0)
		k = KIND_VOLUME;
	else
		return -EINVAL;
	_cleanup_close_ int fd = object_open(p, k, id);
	if (fd < 0)
		return fd;
	/* The source stays put (no delete, no grow) while it is copied. */
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	int data = open_beneath(fd, DATA_FILE, O_RDONLY, 0, S_IFREG);
	if (data == -ELOOP || data == -EISDIR || data == -EBADFD)
		return -EUCLEAN; /* never what a symlink there points to */
	if (data < 0)
		return data;
	*ret_lock_fd = TAKE_FD(fd);
	*ret_data_fd = data;
	return 0;
}

/* Replaces an object's meta.json through a temporary in tmp/, so that a crash leaves no
 * litter in the object's directory. */
static int write_meta(Pool *p, int dir_fd, const char *text, size_t len)
{
	return pool_write_atomic(p, dir_fd, META_FILE, text, len, WRITE_FILE_DURABLE);
}

/* What a new object is made of. */
typedef struct ObjectSpec {
	ObjectKind kind;
	const char *id;
	bool with_data;			     /* a data file of size bytes */
	const char *source_kind, *source_id; /* its content: NULL for blank */
	PoolFill fill;			     /* or made by this (pool_volume_create_filled()) */
	void *fill_userdata;
	char **fill_error;
	uint64_t size;
	const char *meta;
	size_t meta_len;
	const char *failpoint; /* crash point just before the object appears */
	/* A directory volume: its tree/ made with a project of its own, recorded in the volume's
	 * meta.json (serialised from it once the project is known, instead of meta). */
	PoolVolume *directory;
	bool copy_tree; /* the source's tree/ is copied into the new object's tree/ */
} ObjectSpec;

/* Fills a staged object's data file by o->fill, which makes it whole or not at all, then grows
 * it to o->size: -ERANGE when fill made it larger. */
static int staging_fill_with(Staging *s, const ObjectSpec *o)
{
	struct stat st;

	int r = o->fill(s->fd, DATA_FILE, o->fill_userdata, o->fill_error);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open_beneath(s->fd, DATA_FILE, O_RDWR, 0, S_IFREG);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if ((uint64_t)st.st_size > o->size)
		return -ERANGE;
	if ((uint64_t)st.st_size < o->size && ftruncate(fd, (off_t)o->size) < 0)
		return negative_errno();
	return 0;
}

/* Copies the tree/ of the source object (source_fd, locked) into the staging object's tree/
 * (made by the caller). */
static int staging_copy_tree(Staging *s, int source_fd, CopyMethod *ret_method)
{
	_cleanup_free_ char *why = NULL;

	_cleanup_close_ int src =
		open_beneath(source_fd, TREE_DIR, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (src < 0)
		return src == -ELOOP || src == -ENOTDIR ? -EUCLEAN : src;
	_cleanup_close_ int dst = open_beneath(s->fd, TREE_DIR, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
	if (dst < 0)
		return dst;
	int r = copy_tree_at(src, dst, TREE_DIR, ret_method, &why);
	if (r < 0)
		log_debug("pool: copying a tree failed: %s", why ?: strerror(-r));
	return r;
}

/* A directory volume's tree/ and project (its content copied from source_fd's tree/ when
 * that is open), then its record with the project. Its data file (staging_fill()) holds no
 * bytes: only the size the ledger counts. */
static int staging_directory(Pool *p, Staging *s, PoolVolume *v, int source_fd,
			     CopyMethod *ret_method)
{
	size_t len;

	failpoint("pool-create-directory");
	int r = pool_dirvol_make(p, s->fd, v->size, &v->project);
	if (r < 0)
		return r;
	if (source_fd >= 0 && (r = staging_copy_tree(s, source_fd, ret_method)) < 0)
		return r;
	_cleanup_free_ char *meta = pool_volume_to_json(v, &len);
	if (!meta)
		return -EINVAL;
	return staging_write_meta(s, meta, len);
}

/* A snapshot of a directory volume: its tree/ copied (no project of its own: its size is
 * counted as every snapshot's, by its data file). */
static int staging_snapshot_tree(Staging *s, int source_fd, CopyMethod *ret_method)
{
	if (mkdirat(s->fd, TREE_DIR, 0700) < 0)
		return negative_errno();
	return staging_copy_tree(s, source_fd, ret_method);
}

/* What goes into a staged object: its data (filled, copied or empty), a directory volume's
 * tree/ and project, a snapshot's copy of a tree/, and its record. */
static int staging_content(Pool *p, Staging *s, const ObjectSpec *o, int source_lock,
			   int source_data, CopyMethod *ret_method)
{
	int r = 0;

	if (o->fill)
		r = staging_fill_with(s, o);
	else if (o->with_data)
		r = staging_fill(s, source_data, o->size, ret_method);
	if (r < 0)
		return r;
	if (o->directory)
		return staging_directory(p, s, o->directory, o->copy_tree ? source_lock : -EBADF,
					 ret_method);
	if (o->copy_tree && (r = staging_snapshot_tree(s, source_lock, ret_method)) < 0)
		return r;
	return staging_write_meta(s, o->meta, o->meta_len);
}

/* Makes an object in tmp/ and renames it into place: it appears whole or not at all. */
static int object_create(Pool *p, const ObjectSpec *o, CopyMethod *ret_method)
{
	_cleanup_close_ int source_lock = -EBADF, source_data = -EBADF;
	Staging s = {.fd = -EBADF};

	if (!id_valid(o->id, kind_prefix[o->kind]))
		return -EINVAL;
	if (faccessat(kind_fd(p, o->kind), o->id, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	int r = open_source_data(p, o->source_kind, o->source_id, &source_lock, &source_data);
	if (r < 0)
		return r;
	r = staging_begin(p, o->id, o->size, &s);
	if (r < 0)
		return r;
	r = staging_content(p, &s, o, source_lock, source_data, ret_method);
	if (r < 0) {
		staging_abort(p, &s);
		return r;
	}
	failpoint(o->failpoint);
	return staging_commit(p, o->kind, &s, o->id,
			      o->with_data && !(o->source_kind && *o->source_kind));
}

int pool_volume_create(Pool *p, PoolVolume *spec, const char *source, CopyMethod *ret_method)
{
	ObjectSpec o = {
		.directory = spec->directory ? spec : NULL,
		.copy_tree = spec->directory && spec->source_kind && *spec->source_kind,
		.kind = KIND_VOLUME,
		.id = spec->id,
		.with_data = true,
		.source_kind = spec->source_kind,
		.source_id = source,
		.size = spec->size,
		.failpoint = "pool-create-before-commit",
	};
	_cleanup_free_ char *meta = pool_volume_to_json(spec, &o.meta_len);
	if (!meta)
		return -EINVAL; /* a string not UTF-8: refused before anything is made */
	o.meta = meta;
	return object_create(p, &o, ret_method);
}

int pool_volume_create_filled(Pool *p, const PoolVolume *spec, PoolFill fill, void *userdata,
			      char **ret_error)
{
	ObjectSpec o = {
		.kind = KIND_VOLUME,
		.id = spec->id,
		.with_data = true,
		.fill = fill,
		.fill_userdata = userdata,
		.fill_error = ret_error,
		.size = spec->size,
		.failpoint = "pool-create-before-commit",
	};
	_cleanup_free_ char *meta = pool_volume_to_json(spec, &o.meta_len);
	if (!meta)
		return -EINVAL;
	o.meta = meta;
	return object_create(p, &o, NULL);
}

int pool_volume_delete(Pool *p, const char *id, PoolVolumeFound *found)
{
	return object_remove(p, KIND_VOLUME, id, found, &found->why);
}

void pool_volume_found_done(PoolVolumeFound *f)
{
	free(f->name);
	free(f->node);
	free(f->device);
	free(f->staging_path);
	free(f->why);
	*f = (PoolVolumeFound){};
}

int pool_volume_lock(Pool *p, const char *id, int *ret_lock_fd)
{
	return object_lock(p, KIND_VOLUME, id, ret_lock_fd);
}

void pool_unlock(int lock_fd)
{
	if (lock_fd >= 0)
		close(lock_fd); /* closing drops the flock */
}

int pool_volume_save(Pool *p, const PoolVolume *v)
{
	size_t len;
	_cleanup_close_ int fd = object_open(p, KIND_VOLUME, v->id);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *meta = pool_volume_to_json(v, &len);
	if (!meta)
		return -EINVAL;
	return write_meta(p, fd, meta, len);
}

/* Grows a data file to size under the pool lock, with the ledger: never shrinks it (a file
 * already larger, left by an interrupted grow, is kept and its bytes are already counted). */
static int data_grow(Pool *p, int data_fd, uint64_t size)
{
	struct stat st;

	int r = pool_lock_take(p);
	if (r < 0)
		return r;
	if (fstat(data_fd, &st) < 0)
		r = negative_errno();
	else if ((uint64_t)st.st_size < size) {
		uint64_t add = size - (uint64_t)st.st_size;
		r = pool_ledger_reserve(p, add);
		if (r == 0 && ftruncate(data_fd, (off_t)size) < 0) {
			r = negative_errno();
			pool_ledger_release(p, add);
		}
	}
	pool_lock_release(p);
	return r;
}

int pool_volume_grow(Pool *p, PoolVolume *v, uint64_t new_size)
{
	if (new_size < v->size)
		return -ERANGE;
	if (new_size == v->size)
		return 0;
	_cleanup_close_ int fd = object_open(p, KIND_VOLUME, v->id);
	if (fd < 0)
		return fd;
	_cleanup_close_ int data = open_beneath(fd, DATA_FILE, O_RDWR, 0, S_IFREG);
	if (data < 0)
		return data == -ELOOP || data == -EISDIR || data == -EBADFD ? -EUCLEAN : data;
	/* a quota that cannot grow is found before anything changes */
	if (v->directory && quota_project_probe(p->dir_fd) < 0)
		return -EUCLEAN;
	int r = data_grow(p, data, new_size);
	if (r < 0)
		return r;
	if (fsync(data) < 0)
		return negative_errno();
	/* the data file first: a retry finds it grown, and the repair records its size */
	if (v->directory && (r = pool_dirvol_set_size(p, v->project, new_size)) < 0)
		return r;
	uint64_t old = v->size;
	v->size = new_size;
	r = pool_volume_save(p, v);
	if (r < 0) {
		/* The file is larger than recorded: a retry goes on from there, and pool check
		 * --repair records the size; nothing is lost. */
		v->size = old;
		return r;
	}
	return 0;
}

/* A damaged volume as far as it can be known: its ID and its data file's size (and, by the
 * caller, where the nodes' indexes say it is published). */
static PoolVolume *volume_damaged(int dir_fd, const char *id)
{
	PoolVolume *v = xnew0(PoolVolume, 1);
	struct stat st;

	snprintf(v->id, sizeof(v->id), "%s", id);
	v->name = xstrdup("");
	v->source_kind = xstrdup("");
	v->source_id = xstrdup("");
	v->access_mode = xstrdup("");
	if (dir_fd >= 0 && stat_beneath(dir_fd, DATA_FILE, S_IFREG, &st) == 0)
		v->size = (uint64_t)st.st_size;
	return v;
}

/* What is wrong with a volume's meta.json, or NULL (then *ret_v is the volume). */
static char *volume_meta_damage(int dir_fd, const char *id, PoolVolume **ret_v)
{
	_cleanup_free_ char *text = NULL;
	PoolVolume *v = NULL;
	size_t len;

	int r = read_file_at(dir_fd, META_FILE, META_MAX, &text, &len);
	if (r == -ENOENT)
		return xasprintf("volumes/%s/" META_FILE " is missing", id);
	if (r == -ELOOP)
		return xasprintf("volumes/%s/" META_FILE " is a symbolic link, not a file of the "
				 "pool",
				 id);
	if (r == -EBADF)
		return xasprintf("volumes/%s/" META_FILE " is not a regular file", id);
	if (r < 0)
		return xasprintf("volumes/%s/" META_FILE " cannot be read: %s", id, strerror(-r));
	if (pool_volume_from_json(text, len, &v) < 0)
		return xasprintf("volumes/%s/" META_FILE " is damaged: not a volume record of this "
				 "pool",
				 id);
	if (strcmp(v->id, id) != 0) {
		char *damage =
			xasprintf("volumes/%s/" META_FILE " names another volume (%s)", id, v->id);
		pool_volume_free(v);
		return damage;
	}
	*ret_v = v;
	return NULL;
}

/* What is wrong with the files of the volume whose directory is dir_fd beyond its meta.json,
 * or NULL: its data file and its node records must be files of the pool (a missing one is not
 * damage: a missing data file is its condition's concern, the node records come and go). */
static char *volume_files_damage(int dir_fd, const char *id)
{
	static const char *const files[] = {DATA_FILE, USE_FILE, USE_LOCK};
	struct stat st;

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		int r = stat_beneath(dir_fd, files[i], S_IFREG, &st);
		if (r == 0 || r == -ENOENT)
			continue;
		if (r == -ELOOP)
			return xasprintf("volumes/%s/%s is a symbolic link, not a file of the pool",
					 id, files[i]);
		if (r == -EISDIR || r == -EBADFD)
			return xasprintf("volumes/%s/%s is not a regular file", id, files[i]);
		return xasprintf("volumes/%s/%s cannot be read: %s", id, files[i], strerror(-r));
	}
	/* a directory volume's tree/: a directory of the pool, never what a symlink points to */
	int r = stat_beneath(dir_fd, TREE_DIR, S_IFDIR, &st);
	if (r == -ELOOP)
		return xasprintf("volumes/%s/" TREE_DIR " is a symbolic link, not a directory of "
				 "the pool",
				 id);
	if (r == -ENOTDIR)
		return xasprintf("volumes/%s/" TREE_DIR " is not a directory", id);
	return NULL;
}

int pool_volume_inspect(Pool *p, const char *id, PoolVolume **ret, char **ret_damage)
{
	PoolVolume *v = NULL;
	struct stat held, there;

	_cleanup_close_ int fd = object_open(p, KIND_VOLUME, id);
	if (fd == -EUCLEAN) {
		/* Something else at the volume's name: a volume still, damaged beyond use. */
		bool link = fstatat(p->volumes_fd, id, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(there.st_mode);
		*ret = volume_damaged(-EBADF, id);
		*ret_damage = xasprintf("volumes/%s is %s, not a directory of the pool", id,
					link ? "a symbolic link" : "no directory");
		pool_node_devices_attachments(p, *ret);
		return 0;
	}
	if (fd < 0)
		return fd;
	char *damage = volume_meta_damage(fd, id, &v);
	if (!damage && (damage = volume_files_damage(fd, id))) {
		*ret = v;
		*ret_damage = damage;
		return 0;
	}
	if (damage) {
		/* A volume being deleted loses its files after it left volumes/: that is no
		 * damage, it is gone. */
		if (fstat(fd, &held) < 0 ||
		    fstatat(p->volumes_fd, id, &there, AT_SYMLINK_NOFOLLOW) < 0 ||
		    held.st_ino != there.st_ino || held.st_dev != there.st_dev) {
			free(damage);
			return -ENOENT;
		}
		v = volume_damaged(fd, id);
		pool_node_devices_attachments(p, v);
	}
	*ret = v;
	*ret_damage = damage;
	return 0;
}

int pool_volume_damaged(Pool *p, const char *id, const char *shown, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *damage = NULL;

	if (pool_volume_inspect(p, id, &v, &damage) < 0 || !damage)
		return 0;
	return errorf(ret_error, -EUCLEAN, "volume %s is damaged: %s: it can only be deleted",
		      shown ?: id, damage);
}

static int data_open(Pool *p, ObjectKind k, const char *id, int flags)
{
	char path[POOL_ID_MAX + 8];

	if (!id_valid(id, kind_prefix[k]))
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/" DATA_FILE, id);
	int fd = open_beneath(kind_fd(p, k), path, flags, 0, S_IFREG);
	return fd == -ELOOP || fd == -ENOTDIR || fd == -EISDIR || fd == -EBADFD ? -EUCLEAN : fd;
}

int pool_volume_data_open(Pool *p, const char *id, int flags)
{
	return data_open(p, KIND_VOLUME, id, flags);
}

char *pool_volume_data_path(const Pool *p, const char *id)
{
	return xasprintf("%s/volumes/%s/" DATA_FILE, p->path, id);
}

int pool_volume_list(Pool *p, char ***ret_ids, size_t *ret_n)
{
	return pool_list_ids(p->volumes_fd, kind_prefix[KIND_VOLUME], ret_ids, ret_n);
}

/* Snapshots */

int pool_snapshot_load(Pool *p, const char *id, PoolSnapshot **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	int r = meta_load(p, KIND_SNAPSHOT, id, &text, &len);
	if (r < 0)
		return r;
	return pool_snapshot_from_json(text, len, ret);
}

int pool_snapshot_create(Pool *p, const PoolSnapshot *spec, const char *source,
			 CopyMethod *ret_method)
{
	ObjectSpec o = {
		.kind = KIND_SNAPSHOT,
		.id = spec->id,
		.with_data = true,
		.source_kind = "volume",
		.source_id = source,
		.size = spec->size,
		.failpoint = "pool-snapshot-before-commit",
		.copy_tree = spec->directory,
	};
	_cleanup_free_ char *meta = pool_snapshot_to_json(spec, &o.meta_len);
	if (!meta)
		return -EINVAL; /* a string not UTF-8: refused before anything is made */
	o.meta = meta;
	return object_create(p, &o, ret_method);
}

int pool_snapshot_save(Pool *p, const PoolSnapshot *s)
{
	size_t len;
	_cleanup_close_ int fd = object_open(p, KIND_SNAPSHOT, s->id);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *meta = pool_snapshot_to_json(s, &len);
	if (!meta)
		return -EINVAL;
	return write_meta(p, fd, meta, len);
}

int pool_snapshot_data_open(Pool *p, const char *id, int flags)
{
	return data_open(p, KIND_SNAPSHOT, id, flags);
}

int pool_snapshot_delete(Pool *p, const char *id, char **ret_why)
{
	return object_remove(p, KIND_SNAPSHOT, id, NULL, ret_why);
}

int pool_snapshot_list(Pool *p, char ***ret_ids, size_t *ret_n)
{
	return pool_list_ids(p->snapshots_fd, kind_prefix[KIND_SNAPSHOT], ret_ids, ret_n);
}

/* Group snapshots */

bool pool_group_id_valid(const char *id)
{
	return id_valid(id, kind_prefix[KIND_GROUP]);
}

void pool_group_id_for_name(const char *name, char ret_id[POOL_ID_MAX])
{
	id_for_name(KIND_GROUP, name, 0, ret_id);
}

int pool_group_create(Pool *p, const PoolGroup *spec)
{
	ObjectSpec o = {
		.kind = KIND_GROUP,
		.id = spec->id,
		.failpoint = "pool-group-before-commit",
	};
	_cleanup_free_ char *meta = pool_group_to_json(spec, &o.meta_len);
	if (!meta)
		return -EINVAL; /* a string not UTF-8: refused before anything is made */
	o.meta = meta;
	return object_create(p, &o, NULL);
}

int pool_group_load(Pool *p, const char *id, PoolGroup **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	int r = meta_load(p, KIND_GROUP, id, &text, &len);
	if (r < 0)
		return r;
	return pool_group_from_json(text, len, ret);
}

int pool_group_delete(Pool *p, const char *id, char **ret_why)
{
	return object_remove(p, KIND_GROUP, id, NULL, ret_why);
}
