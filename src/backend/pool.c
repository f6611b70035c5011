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
#include "failpoint.h"
#include "fileio.h"
#include "hash-util.h"
#include "log.h"
#include "pool-internal.h"
#include "pool-meta.h"
#include "pool.h"
#include "random-util.h"

#define META_FILE "meta.json"
#define DATA_FILE "data"
#define META_MAX (1024 * 1024)
/* Slots probed for a name, in case two names hash to the same ID. */
#define NAME_SLOTS 4

typedef enum {
	KIND_VOLUME,
	KIND_SNAPSHOT,
	KIND_GROUP,
} ObjectKind;

struct Pool {
	char *path;
	int dir_fd; /* pinned pool directory */
	int volumes_fd, snapshots_fd, groups_fd, nodes_fd, tmp_fd;
	char *zone;
	char *boot_id;
	uint64_t capacity;

	pthread_mutex_t lock; /* guards provisioned */
	uint64_t provisioned; /* bytes of every volume and snapshot */
};

static const char *const kind_prefix[] = {
	[KIND_VOLUME] = "vol-",
	[KIND_SNAPSHOT] = "snap-",
	[KIND_GROUP] = "group-",
};

static int kind_fd(const Pool *p, ObjectKind k)
{
	return k == KIND_VOLUME	    ? p->volumes_fd
	       : k == KIND_SNAPSHOT ? p->snapshots_fd
				    : p->groups_fd;
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

bool pool_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > POOL_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '/')
			return false;
	return true;
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

static int remove_object_dir(int parent_fd, const char *name)
{
	_cleanup_close_ int fd =
		openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return negative_errno();
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT)
			return negative_errno();
	if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}

static int list_ids(int dir_fd, const char *prefix, char ***ret_ids, size_t *ret_n)
{
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(dir_fd, F_DUPFD_CLOEXEC, 3));
	char **ids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d)
		return negative_errno();
	rewinddir(d);
	while ((de = readdir(d)))
		if (id_valid(de->d_name, prefix))
			strv_push(&ids, &n, &cap, xstrdup(de->d_name));
	strv_sort(ids);
	*ret_ids = ids;
	*ret_n = n;
	return 0;
}

static int object_open(const Pool *p, ObjectKind k, const char *id)
{
	if (!id_valid(id, kind_prefix[k]))
		return -ENOENT; /* never a path from an unchecked ID */
	int fd = openat(kind_fd(p, k), id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
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

int pool_tmp_dir(const Pool *p)
{
	return p->tmp_fd;
}

const char *pool_boot_id(const Pool *p)
{
	return p->boot_id;
}

/* Capacity accounting */

static int reserve(Pool *p, uint64_t bytes)
{
	int r = 0;
	pthread_mutex_lock(&p->lock);
	if (p->provisioned + bytes > p->capacity || p->provisioned + bytes < p->provisioned)
		r = -ENOSPC;
	else
		p->provisioned += bytes;
	pthread_mutex_unlock(&p->lock);
	return r;
}

static void unreserve(Pool *p, uint64_t bytes)
{
	pthread_mutex_lock(&p->lock);
	p->provisioned = bytes > p->provisioned ? 0 : p->provisioned - bytes;
	pthread_mutex_unlock(&p->lock);
}

void pool_capacity(Pool *p, uint64_t *ret_total, uint64_t *ret_available)
{
	pthread_mutex_lock(&p->lock);
	*ret_total = p->capacity;
	*ret_available = p->capacity > p->provisioned ? p->capacity - p->provisioned : 0;
	pthread_mutex_unlock(&p->lock);
}

static uint64_t data_size_sum(int dir_fd, const char *prefix)
{
	char **ids;
	size_t n;
	uint64_t sum = 0;

	if (list_ids(dir_fd, prefix, &ids, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char path[POOL_ID_MAX + 8];
		struct stat st;
		snprintf(path, sizeof(path), "%s/" DATA_FILE, ids[i]);
		if (fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
			sum += (uint64_t)st.st_size;
	}
	strv_free(ids);
	return sum;
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

/* Removes what a crash left in tmp/: objects half made or half removed. One another process
 * is still working on holds its flock and is left alone. */
static void pool_recover(Pool *p)
{
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(p->tmp_fd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		_cleanup_close_ int fd =
			openat(p->tmp_fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		int r = remove_object_dir(p->tmp_fd, de->d_name);
		if (r == -ENOTDIR && unlinkat(p->tmp_fd, de->d_name, 0) == 0)
			r = 0;
		if (r < 0)
			log_debug_errno(r, "pool: cannot clean tmp/%s: %m", de->d_name);
		else
			log_debug("pool: cleaned tmp/%s left by an interrupted operation",
				  de->d_name);
	}
}

static char *read_boot_id(void)
{
	char buf[64] = "";

	_cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return xstrdup("unknown");
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return xstrdup(buf);
}

static int open_subdir(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

int pool_open(const PoolConfig *config, Pool **ret)
{
	struct statvfs sv;
	int r;

	if (mkdir(config->path, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	_cleanup_close_ int fd = open(config->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
		return negative_errno();
	r = pool_layout(fd);
	if (r < 0)
		return r;

	Pool *p = xnew0(Pool, 1);
	p->volumes_fd = p->snapshots_fd = p->groups_fd = p->nodes_fd = p->tmp_fd = -EBADF;
	p->path = xstrdup(config->path);
	p->dir_fd = TAKE_FD(fd);
	p->zone = xstrdup(config->zone ?: "local");
	p->boot_id = read_boot_id();
	pthread_mutex_init(&p->lock, NULL);
	if ((r = p->volumes_fd = open_subdir(p->dir_fd, "volumes")) < 0 ||
	    (r = p->snapshots_fd = open_subdir(p->dir_fd, "snapshots")) < 0 ||
	    (r = p->groups_fd = open_subdir(p->dir_fd, "groups")) < 0 ||
	    (r = p->nodes_fd = open_subdir(p->dir_fd, "nodes")) < 0 ||
	    (r = p->tmp_fd = open_subdir(p->dir_fd, "tmp")) < 0) {
		pool_close(p);
		return r;
	}
	pool_recover(p);
	p->provisioned = data_size_sum(p->volumes_fd, kind_prefix[KIND_VOLUME]) +
			 data_size_sum(p->snapshots_fd, kind_prefix[KIND_SNAPSHOT]);
	p->capacity = config->capacity;
	if (p->capacity == 0 && fstatvfs(p->dir_fd, &sv) == 0)
		p->capacity = (uint64_t)sv.f_bavail * sv.f_frsize + p->provisioned;
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
	pthread_mutex_destroy(&p->lock);
	free(p->path);
	free(p->zone);
	free(p->boot_id);
	free(p);
}

int pool_probe(Pool *p)
{
	struct statvfs sv;
	struct stat st;

	if (fstat(p->dir_fd, &st) < 0)
		return negative_errno();
	if (st.st_nlink == 0)
		return -ENOENT; /* the directory was removed under us */
	if (fstatat(p->volumes_fd, ".", &st, 0) < 0 || st.st_nlink == 0)
		return -ENOENT;
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
	char name[POOL_ID_MAX + 24]; /* below tmp/ */
	int fd;			     /* the staging dir, flock'ed */
} Staging;

static int staging_begin(Pool *p, const char *id, Staging *ret)
{
	snprintf(ret->name, sizeof(ret->name), "new-%s.%08" PRIx32, id, (uint32_t)random_u64());
	if (mkdirat(p->tmp_fd, ret->name, 0700) < 0)
		return negative_errno();
	ret->fd = openat(p->tmp_fd, ret->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ret->fd < 0 || flock(ret->fd, LOCK_EX) < 0) {
		int r = negative_errno();
		(void)unlinkat(p->tmp_fd, ret->name, AT_REMOVEDIR);
		closep(&ret->fd);
		return r;
	}
	return 0;
}

static void staging_abort(Pool *p, Staging *s)
{
	(void)remove_object_dir(p->tmp_fd, s->name);
	closep(&s->fd);
}

/* Makes a staged object durable before it can appear: its files, then its directory. Done
 * once, after every write, so that one journal commit covers them all (syncing each file as
 * it was written cost a commit apiece). */
static int staging_sync(Staging *s)
{
	static const char *const files[] = {META_FILE, DATA_FILE};

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_close_ int fd = openat(s->fd, files[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT)
			continue; /* a group has no data file */
		if (fd < 0 || fsync(fd) < 0)
			return negative_errno();
	}
	return fsync_dir(s->fd);
}

/* Moves the finished object into place; -EEXIST when another one got there first. */
static int staging_commit(Pool *p, ObjectKind k, Staging *s, const char *id)
{
	int r = staging_sync(s);
	if (r < 0) {
		staging_abort(p, s);
		return r;
	}
	if (renameat2(p->tmp_fd, s->name, kind_fd(p, k), id, RENAME_NOREPLACE) < 0) {
		r = errno == EEXIST || errno == ENOTEMPTY ? -EEXIST : negative_errno();
		staging_abort(p, s);
		return r;
	}
	closep(&s->fd);
	(void)fsync_dir(p->tmp_fd);
	return fsync_dir(kind_fd(p, k));
}

/* Fills a staged object's data file: blank of size bytes, or a copy of source's data file
 * (opened by the caller) grown to size. staging_commit() syncs it. */
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

/* Removes an object (one rename makes it gone) and gives its data's size back to the pool. */
static int object_remove(Pool *p, ObjectKind k, const char *id)
{
	char trash[POOL_ID_MAX + 24];
	struct stat st;

	_cleanup_close_ int fd = object_open(p, k, id);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	if (fstatat(fd, DATA_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0)
		st.st_size = 0;
	snprintf(trash, sizeof(trash), "del-%s.%08" PRIx32, id, (uint32_t)random_u64());
	/* One rename makes it gone; the files go after. */
	if (renameat2(kind_fd(p, k), id, p->tmp_fd, trash, RENAME_NOREPLACE) < 0)
		return errno == ENOENT ? -ENOENT : negative_errno();
	int r = fsync_dir(kind_fd(p, k));
	if (r < 0)
		return r;
	failpoint("pool-delete-after-rename");
	(void)remove_object_dir(p->tmp_fd, trash);
	unreserve(p, (uint64_t)st.st_size);
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

void pool_volume_free(PoolVolume *v)
{
	if (!v)
		return;
	free(v->name);
	strmap_done(&v->params);
	strmap_done(&v->context);
	free(v->source_kind);
	free(v->source_id);
	free(v->access_mode);
	for (size_t i = 0; i < v->n_attachments; i++) {
		free(v->attachments[i].node);
		free(v->attachments[i].device);
	}
	free(v->attachments);
	free(v);
}

void pool_volume_freep(PoolVolume **v)
{
	pool_volume_free(*v);
}

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
	int data = openat(fd, DATA_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (data < 0)
		return errno == ENOENT ? -ENOENT : negative_errno();
	*ret_lock_fd = TAKE_FD(fd);
	*ret_data_fd = data;
	return 0;
}

static int write_meta(int dir_fd, const char *text, size_t len)
{
	return write_file_atomic_at(dir_fd, META_FILE, text, len, 0600);
}

/* What a new object is made of. */
typedef struct ObjectSpec {
	ObjectKind kind;
	const char *id;
	bool with_data;			     /* a data file of size bytes */
	const char *source_kind, *source_id; /* its content: NULL for blank */
	uint64_t size;
	const char *meta;
	size_t meta_len;
	const char *failpoint; /* crash point just before the object appears */
} ObjectSpec;

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
	r = reserve(p, o->size);
	if (r < 0)
		return r;
	r = staging_begin(p, o->id, &s);
	if (r < 0)
		goto fail_unreserve;
	if (o->with_data && (r = staging_fill(&s, source_data, o->size, ret_method)) < 0)
		goto fail_abort;
	if ((r = staging_write_meta(&s, o->meta, o->meta_len)) < 0)
		goto fail_abort;
	failpoint(o->failpoint);
	r = staging_commit(p, o->kind, &s, o->id);
	if (r < 0)
		goto fail_unreserve;
	return 0;
fail_abort:
	staging_abort(p, &s);
fail_unreserve:
	unreserve(p, o->size);
	return r;
}

int pool_volume_create(Pool *p, const PoolVolume *spec, CopyMethod *ret_method)
{
	ObjectSpec o = {
		.kind = KIND_VOLUME,
		.id = spec->id,
		.with_data = true,
		.source_kind = spec->source_kind,
		.source_id = spec->source_id,
		.size = spec->size,
		.failpoint = "pool-create-before-commit",
	};
	_cleanup_free_ char *meta = pool_volume_to_json(spec, &o.meta_len);
	o.meta = meta;
	return object_create(p, &o, ret_method);
}

int pool_volume_delete(Pool *p, const char *id)
{
	return object_remove(p, KIND_VOLUME, id);
}

int pool_volume_lock(Pool *p, const char *id, int *ret_lock_fd)
{
	int fd = object_open(p, KIND_VOLUME, id);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	/* It may have been removed while we waited for the lock. */
	if (faccessat(fd, META_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0 ||
	    faccessat(p->volumes_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		close(fd);
		return -ENOENT;
	}
	*ret_lock_fd = fd;
	return 0;
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
	return write_meta(fd, meta, len);
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
	int r = reserve(p, new_size - v->size);
	if (r < 0)
		return r;
	_cleanup_close_ int data = openat(fd, DATA_FILE, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (data < 0 || ftruncate(data, (off_t)new_size) < 0 || fsync(data) < 0) {
		r = negative_errno();
		unreserve(p, new_size - v->size);
		return r;
	}
	uint64_t old = v->size;
	v->size = new_size;
	r = pool_volume_save(p, v);
	if (r < 0) {
		v->size = old; /* the file is larger than recorded: pool check notices, no loss */
		return r;
	}
	return 0;
}

char *pool_volume_data_path(const Pool *p, const char *id)
{
	return xasprintf("%s/volumes/%s/" DATA_FILE, p->path, id);
}

int pool_volume_list(Pool *p, char ***ret_ids, size_t *ret_n)
{
	return list_ids(p->volumes_fd, kind_prefix[KIND_VOLUME], ret_ids, ret_n);
}

/* Snapshots */

void pool_snapshot_free(PoolSnapshot *s)
{
	if (!s)
		return;
	free(s->name);
	free(s->source_volume_id);
	strmap_done(&s->params);
	free(s);
}

void pool_snapshot_freep(PoolSnapshot **s)
{
	pool_snapshot_free(*s);
}

int pool_snapshot_load(Pool *p, const char *id, PoolSnapshot **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	int r = meta_load(p, KIND_SNAPSHOT, id, &text, &len);
	if (r < 0)
		return r;
	return pool_snapshot_from_json(text, len, ret);
}

int pool_snapshot_create(Pool *p, const PoolSnapshot *spec, CopyMethod *ret_method)
{
	ObjectSpec o = {
		.kind = KIND_SNAPSHOT,
		.id = spec->id,
		.with_data = true,
		.source_kind = "volume",
		.source_id = spec->source_volume_id,
		.size = spec->size,
		.failpoint = "pool-snapshot-before-commit",
	};
	_cleanup_free_ char *meta = pool_snapshot_to_json(spec, &o.meta_len);
	o.meta = meta;
	return object_create(p, &o, ret_method);
}

int pool_snapshot_delete(Pool *p, const char *id)
{
	return object_remove(p, KIND_SNAPSHOT, id);
}

int pool_snapshot_list(Pool *p, char ***ret_ids, size_t *ret_n)
{
	return list_ids(p->snapshots_fd, kind_prefix[KIND_SNAPSHOT], ret_ids, ret_n);
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

void pool_group_free(PoolGroup *g)
{
	if (!g)
		return;
	free(g->name);
	strv_free(g->snapshot_ids);
	free(g);
}

void pool_group_freep(PoolGroup **g)
{
	pool_group_free(*g);
}

int pool_group_create(Pool *p, const PoolGroup *spec)
{
	ObjectSpec o = {
		.kind = KIND_GROUP,
		.id = spec->id,
		.failpoint = "pool-group-before-commit",
	};
	_cleanup_free_ char *meta = pool_group_to_json(spec, &o.meta_len);
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

int pool_group_delete(Pool *p, const char *id)
{
	return object_remove(p, KIND_GROUP, id);
}

/* Nodes */

static bool node_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
			return false;
	return true;
}

int pool_node_register(Pool *p, const PoolNode *n)
{
	char name[160];
	size_t len;

	if (!node_id_valid(n->id))
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.json", n->id);
	_cleanup_free_ char *text = pool_node_to_json(n, &len);
	return write_file_atomic_at(p->nodes_fd, name, text, len, 0600);
}

int pool_node_load(Pool *p, const char *id, PoolNode **ret)
{
	_cleanup_free_ char *text = NULL;
	char name[160];
	size_t len;

	if (!node_id_valid(id))
		return -ENOENT;
	snprintf(name, sizeof(name), "%s.json", id);
	int r = read_file_at(p->nodes_fd, name, META_MAX, &text, &len);
	if (r < 0)
		return r;
	return pool_node_from_json(text, len, ret);
}

void pool_node_free(PoolNode *n)
{
	if (!n)
		return;
	free(n->id);
	free(n->zone);
	free(n);
}
