/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots in the store (location: store): the point in time is a reflinked copy in the pool,
 * as for a local snapshot, marked with POOL_STORE_KEY; a few uploader threads send it to the
 * store, and once its manifest is there the copy goes, or on a pool that reflinks stays as the
 * base of the volume's next upload (POOL_STORE_BASE_KEY). A copy without that mark is the
 * record of an unfinished upload: a restarted volplugd resumes every one it finds
 * (pool-store.c). */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "alloc.h"
#include "blocknode.h"
#include "error-util.h"
#include "failpoint.h"
#include "log.h"
#include "params.h"
#include "pool-store.h"

bool pool_store_record(const PoolSnapshot *s)
{
	return strmap_get(&s->params, POOL_STORE_KEY) != NULL;
}

bool pool_store_record_kept(const PoolSnapshot *s)
{
	return pool_store_record(s) && strmap_get(&s->params, POOL_STORE_BASE_KEY) != NULL;
}

/* Whether two records' volumes are one: their source's local ID (the part before '.'). */
static bool same_volume(const PoolSnapshot *s, const char *volume)
{
	size_t n = strcspn(s->source_volume_id, ".");
	return strlen(volume) == n && strncmp(s->source_volume_id, volume, n) == 0;
}

/* The newest kept base of volume (local ID), other than except: 0, its ID and when it was
 * taken (ret_created may be NULL), or -ENOENT. */
static int base_find(Pool *pool, const char *volume, const char *except, char ret_id[POOL_ID_MAX],
		     int64_t *ret_created)
{
	_cleanup_strv_free_ char **ids = NULL;
	int64_t newest = INT64_MIN;
	size_t n = 0;
	int r = -ENOENT;

	if (pool_snapshot_list(pool, &ids, &n) < 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if ((except && strcmp(ids[i], except) == 0) ||
		    pool_snapshot_load(pool, ids[i], &s) < 0 || !pool_store_record_kept(s) ||
		    !same_volume(s, volume) || s->created_ns < newest)
			continue;
		newest = s->created_ns;
		snprintf(ret_id, POOL_ID_MAX, "%s", ids[i]);
		r = 0;
	}
	if (r == 0 && ret_created)
		*ret_created = newest;
	return r;
}

/* Drops the kept bases of volume (local ID) but keep (NULL: all). Hold the lock. */
static void bases_drop(PoolStore *st, const char *volume, const char *keep)
{
	_cleanup_strv_free_ char **ids = NULL;
	size_t n = 0;

	if (pool_snapshot_list(st->pool, &ids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		_cleanup_free_ char *why = NULL;
		if ((keep && strcmp(ids[i], keep) == 0) ||
		    pool_snapshot_load(st->pool, ids[i], &s) < 0 || !pool_store_record_kept(s) ||
		    !same_volume(s, volume))
			continue;
		if (pool_snapshot_delete(st->pool, ids[i], &why) < 0)
			log_warning("snapshot %s%s: its copy kept as a base in pool %s stays: %s",
				    POOL_STORE_ID_PREFIX, ids[i], pool_path(st->pool),
				    why ?: "cannot remove it");
		else
			log_debug("snapshot %s%s: its kept copy dropped", POOL_STORE_ID_PREFIX,
				  ids[i]);
	}
}

void pool_store_volume_gone(PoolStore *st, const char *volume)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	bases_drop(st, volume, NULL);
	pthread_mutex_unlock(&st->lock);
}

/* Whether a copy is worth keeping as a base: a reflink that still shares an extent with its
 * volume (FIEMAP_EXTENT_SHARED), or holds no data at all. A sparse copy (a pool without
 * reflinks) shares nothing: FIEMAP would never find a chunk unchanged against it, and it
 * would cost the whole volume's data. */
static bool copy_shares(int fd)
{
	enum {
		N = 64
	};
	union {
		struct fiemap fm;
		char buf[sizeof(struct fiemap) + N * sizeof(struct fiemap_extent)];
	} u;
	uint64_t start = 0;
	bool any = false;

	for (;;) {
		memset(&u, 0, sizeof(u));
		u.fm.fm_start = start;
		u.fm.fm_length = FIEMAP_MAX_OFFSET - start;
		u.fm.fm_extent_count = N;
		if (ioctl(fd, FS_IOC_FIEMAP, &u.fm) < 0)
			return false;
		if (u.fm.fm_mapped_extents == 0)
			return !any;
		for (unsigned i = 0; i < u.fm.fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &u.fm.fm_extents[i];
			if (e->fe_flags & FIEMAP_EXTENT_SHARED)
				return true;
			any = true;
			if (e->fe_flags & FIEMAP_EXTENT_LAST)
				return false;
			start = e->fe_logical + e->fe_length;
		}
	}
}

/* A finished upload's copy: kept as its volume's base, its predecessor dropped, where the
 * pool reflinks; else removed. Hold the lock. */
static void upload_done(PoolStore *st, const char *id)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	_cleanup_free_ char *why = NULL;

	if (pool_snapshot_load(st->pool, id, &s) == 0) {
		_cleanup_close_ int fd =
			pool_snapshot_data_open(st->pool, id, O_RDONLY | O_CLOEXEC);
		char volume[POOL_ID_MAX], newer[POOL_ID_MAX];
		int64_t created;
		snprintf(volume, sizeof(volume), "%.*s", (int)strcspn(s->source_volume_id, "."),
			 s->source_volume_id);
		/* Two uploads of a volume may end out of order: the later point in time stays. */
		bool superseded = base_find(st->pool, volume, id, newer, &created) == 0 &&
				  created > s->created_ns;
		if (fd >= 0 && !superseded && copy_shares(fd)) {
			strmap_set(&s->params, POOL_STORE_BASE_KEY, POOL_STORE_BASE_UPLOADED);
			/* Marked first: a crash between leaves two bases, the older dropped at
			 * the next upload's end, never an upload run again. */
			if (pool_snapshot_save(st->pool, s) == 0) {
				bases_drop(st, volume, id);
				return;
			}
		}
	}
	if (pool_snapshot_delete(st->pool, id, &why) < 0)
		log_warning("snapshot %s%s is in the store; its copy in pool %s stays: %s",
			    POOL_STORE_ID_PREFIX, id, pool_path(st->pool),
			    why ?: "cannot remove it");
}

/* What a manifest's parameters say of the snapshot besides its tags. */
#define MANIFEST_NAME "snapshotName"
#define MANIFEST_CREATED "creationTimeNs"

/* An upload's own deadline: its requests retry (500, 503, dropped connections) until then. */
#define UPLOAD_DEADLINE (6 * 3600 * USEC_PER_SEC)

static UploadJob *job_find(PoolStore *st, const char *id)
{
	for (UploadJob *j = st->jobs; j; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

static void job_remove(PoolStore *st, UploadJob *job)
{
	for (UploadJob **p = &st->jobs; *p; p = &(*p)->next)
		if (*p == job) {
			*p = job->next;
			break;
		}
	free(job->message);
	free(job);
}

void pool_store_enqueue(PoolStore *st, const char *id, Store *store)
{
	pthread_mutex_lock(&st->lock);
	UploadJob *j = job_find(st, id);
	if (!j) {
		j = xnew0(UploadJob, 1);
		snprintf(j->id, sizeof(j->id), "%s", id);
		j->next = st->jobs;
		st->jobs = j;
	}
	j->store = store;
	if (!j->running) {
		j->queued = true;
		j->not_before = 0;
	}
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
}

/* The next job due, or NULL and *ret_next when the next one is. Hold the lock. */
static UploadJob *job_next(PoolStore *st, usec_t *ret_next)
{
	usec_t now = now_usec(CLOCK_MONOTONIC), next = now + 60 * USEC_PER_SEC;

	for (UploadJob *j = st->jobs; j; j = j->next) {
		if (!j->queued)
			continue;
		if (j->not_before <= now)
			return j;
		next = MIN(next, j->not_before);
	}
	*ret_next = next;
	return NULL;
}

/* The manifest's parameters: the snapshot's tags, its source and name, its point in time. */
static void manifest_params(const PoolSnapshot *s, Strmap *ret)
{
	char created[32];

	strmap_copy(ret, &s->params);
	strmap_remove(ret, POOL_STORE_KEY);
	strmap_remove(ret, POOL_STORE_BASE_KEY);
	strmap_set(ret, POOL_STORE_SOURCE_KEY, s->source_volume_id);
	strmap_set(ret, MANIFEST_NAME, s->name ?: "");
	snprintf(created, sizeof(created), "%" PRId64, s->created_ns);
	strmap_set(ret, MANIFEST_CREATED, created);
}

/* What the snapshot's volume holds, for a restore to check its request against: the filesystem
 * its node made (its context's fstype; "" for a block volume) and the filesystem's own
 * parameters (mkfs options, VOLUME_PARAMS_NODE), added to params. Nothing when the volume is
 * gone already. Caller frees *ret_filesystem. */
static void manifest_volume(PoolStore *st, const PoolSnapshot *s, Strmap *params,
			    char **ret_filesystem)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	VolumeParams vp = {};
	char local[POOL_ID_MAX];

	*ret_filesystem = NULL;
	snprintf(local, sizeof(local), "%.*s", (int)strcspn(s->source_volume_id, "."),
		 s->source_volume_id);
	if (pool_volume_load(st->pool, local, &v) < 0)
		return;
	*ret_filesystem = xstrdup(strmap_get(&v->context, BLOCKNODE_CONTEXT_FSTYPE) ?: "");
	if (volume_params_load_strmap(&v->params, &vp, NULL) == 0)
		volume_params_to_strmap(&vp, VOLUME_PARAMS_NODE, params);
	volume_params_done(&vp);
}

/* Uploads job's local copy: 0, 1 when the copy is gone (nothing to upload), or the store's
 * errno with *ret_error. */
static int upload_one(PoolStore *st, UploadJob *job, char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	_cleanup_(strmap_done) Strmap params = {};
	StoreUploadStats stats = {};
	usec_t start = now_usec(CLOCK_MONOTONIC);

	if (pool_snapshot_load(st->pool, job->id, &s) < 0 || pool_store_record_kept(s))
		return 1;
	_cleanup_close_ int fd = pool_snapshot_data_open(st->pool, job->id, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errorf(ret_error, fd, "snapshot %s%s: its copy in pool %s: %s",
			      POOL_STORE_ID_PREFIX, job->id, pool_path(st->pool), strerror(-fd));
	manifest_params(s, &params);
	_cleanup_free_ char *filesystem = NULL;
	manifest_volume(st, s, &params, &filesystem);
	/* The last uploaded snapshot of the volume, kept: its chunks the volume has not
	 * rewritten since are neither read nor hashed. */
	char volume[POOL_ID_MAX], base[POOL_ID_MAX];
	_cleanup_close_ int base_fd = -EBADF;
	snprintf(volume, sizeof(volume), "%.*s", (int)strcspn(s->source_volume_id, "."),
		 s->source_volume_id);
	if (base_find(st->pool, volume, job->id, base, NULL) == 0)
		base_fd = pool_snapshot_data_open(st->pool, base, O_RDONLY | O_CLOEXEC);
	StoreUploadInfo info = {
		.id = job->id,
		.volume_size = s->size,
		.filesystem = filesystem,
		.parameters = &params,
		.cancel = &job->cancel,
		.base_id = base_fd >= 0 ? base : NULL,
		.base_fd = base_fd,
	};
	int r = store_upload(job->store, fd, &info, start + UPLOAD_DEADLINE, &stats, ret_error);
	if (r == 0)
		log_info("snapshot %s%s: in s3://%s: %" PRIu64 " chunks, %" PRIu64 " sent (%" PRIu64
			 " bytes), %" PRIu64 " there already, %" PRIu64 " zero, %" PRIu64
			 " unchanged since %s; %" PRIu64 " bytes read in %llu ms",
			 POOL_STORE_ID_PREFIX, job->id, st->bucket, stats.chunks, stats.chunks_sent,
			 stats.bytes_sent, stats.chunks_skipped, stats.zero_chunks,
			 stats.chunks_unchanged, info.base_id ?: "no base", stats.bytes_read,
			 (unsigned long long)((now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_MSEC));
	return r;
}

/* Whether an upload that failed so may succeed alone if run again. */
static bool transient(int r)
{
	return r != -EACCES && r != -EPERM && r != -ENXIO && r != -ENOKEY && r != -EEXIST &&
	       r != -EINVAL && r != -EUCLEAN && r != -ECANCELED;
}

/* Records how job ended (message taken). Hold the lock. */
static void job_finish(PoolStore *st, UploadJob *job, int r, char *message)
{
	job->running = false;
	pthread_cond_broadcast(&st->cond);
	if (atomic_load(&job->cancel)) { /* a delete, or the stop, takes it */
		free(message);
		return;
	}
	if (r >= 0) {
		if (r == 0)
			upload_done(st, job->id);
		job_remove(st, job);
		free(message);
		return;
	}
	free(job->message);
	job->error = r;
	job->message = message;
	job->failures++;
	unsigned wait_s = MIN(5u << MIN(job->failures - 1, 6u), 300u);
	if (transient(r)) {
		job->queued = true;
		job->not_before = now_usec(CLOCK_MONOTONIC) + wait_s * USEC_PER_SEC;
	}
	log_warning("snapshot %s%s: upload failed: %s%s", POOL_STORE_ID_PREFIX, job->id,
		    job->message, transient(r) ? "; trying again" : "; waiting for CreateSnapshot");
}

void *pool_store_uploader(void *userdata)
{
	PoolStore *st = userdata;

	pthread_mutex_lock(&st->lock);
	while (!st->stopping) {
		usec_t next;
		UploadJob *job = job_next(st, &next);
		if (!job) {
			pool_store_wait(st, next);
			continue;
		}
		job->queued = false;
		job->running = true;
		pthread_mutex_unlock(&st->lock);
		char *message = NULL;
		int r = upload_one(st, job, &message);
		pthread_mutex_lock(&st->lock);
		job_finish(st, job, r, message);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* A store snapshot from its local copy, while it uploads. */
static void from_copy(const PoolSnapshot *s, BackendSnapshot *ret)
{
	pool_snapshot_to_backend(s, ret);
	free(ret->id);
	ret->id = xasprintf(POOL_STORE_ID_PREFIX "%s", s->id);
	ret->ready = false;
	strmap_remove(&ret->params, POOL_STORE_KEY);
	strmap_remove(&ret->params, POOL_STORE_BASE_KEY);
}

static void from_manifest(const StoreManifest *m, BackendSnapshot *ret)
{
	const char *created = strmap_get(&m->parameters, MANIFEST_CREATED);

	*ret = (BackendSnapshot){
		.id = xasprintf(POOL_STORE_ID_PREFIX "%s", m->id),
		.name = xstrdup(strmap_get(&m->parameters, MANIFEST_NAME) ?: ""),
		.source_volume_id =
			xstrdup(strmap_get(&m->parameters, POOL_STORE_SOURCE_KEY) ?: ""),
		.size = m->volume_size,
		.created_ns = created ? strtoll(created, NULL, 10) : (int64_t)m->created * 1000,
		.ready = true,
		.group_id = xstrdup(""),
	};
	strmap_copy(&ret->params, &m->parameters);
	strmap_remove(&ret->params, MANIFEST_CREATED);
	strmap_remove(&ret->params, MANIFEST_NAME);
	strmap_remove(&ret->params, POOL_STORE_SOURCE_KEY);
}

/* The store snapshot of store ID id: from its local copy while it uploads, else from its
 * manifest. 0, -ENOENT (with *ret_error naming it and the store), or the store's errno. */
static int snapshot_find(PoolBackend *pb, Store *store, const char *id, BackendSnapshot *ret,
			 char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	StoreManifest m = {};

	if (pool_snapshot_load(pb->pool, id, &s) == 0 && pool_store_record(s) &&
	    !pool_store_record_kept(s)) {
		from_copy(s, ret);
		return 0;
	}
	int r = store_manifest_get(store, id, pool_store_deadline(), &m, ret_error);
	if (r < 0)
		return r;
	from_manifest(&m, ret);
	store_manifest_done(&m);
	return 0;
}

/* The last upload attempt's failure, if the upload of id failed and waits: that error, and
 * the upload queued again with store. 0 when it did not fail. */
static int upload_failure(PoolStore *st, const char *id, Store *store, char **ret_error)
{
	int r = 0;

	pthread_mutex_lock(&st->lock);
	UploadJob *j = job_find(st, id);
	if (j && j->error < 0 && !j->running)
		r = errorf(ret_error, j->error, "snapshot %s%s: uploading it failed: %s",
			   POOL_STORE_ID_PREFIX, id, j->message);
	pthread_mutex_unlock(&st->lock);
	pool_store_enqueue(st, id, store);
	return r;
}

int pool_store_create_snapshot(PoolBackend *pb, const BackendCreateSnapshot *r,
			       BackendSnapshot *ret, char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *local = NULL;
	_cleanup_free_ char *err = NULL;
	char id[POOL_ID_MAX];
	Store *store;

	int e = pool_backend_store(pb, r->secrets, &store, ret_error);
	if (e < 0)
		return e;
	pool_snapshot_id_for_name(r->name, id);
	if (pool_snapshot_load(pb->pool, id, &local) == 0 && !pool_store_record_kept(local)) {
		if (!pool_store_record(local)) {
			/* A local snapshot of that name: not the one asked for. */
			_cleanup_free_ char *local_id = pool_backend_id(local->id, local->node);
			return errorf(ret_error, -EEXIST,
				      "snapshot '%s' exists as %s, a local snapshot in the pool of "
				      "node %s (location: local): its location differs from this "
				      "request's (location: store)",
				      r->name, local_id, pb->node_id);
		}
		if ((e = upload_failure(pb->store, id, store, ret_error)) < 0)
			return e;
		from_copy(local, ret);
		return -EEXIST;
	}
	e = snapshot_find(pb, store, id, ret, &err);
	if (e == 0)
		return -EEXIST;
	if (e != -ENOENT)
		return error_pass(e, &err, ret_error);
	if ((e = pool_snapshot_take(pb, r, id, ret, ret_error)) < 0)
		return e;
	free(ret->id);
	ret->id = xasprintf(POOL_STORE_ID_PREFIX "%s", id);
	ret->ready = false;
	strmap_remove(&ret->params, POOL_STORE_KEY);
	pool_store_enqueue(pb->store, id, store);
	return 0;
}

int pool_store_name_check(PoolBackend *pb, const BackendCreateSnapshot *r, const char *id,
			  char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	usec_t deadline = MIN(pool_store_deadline(), now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC);
	StoreManifest m = {};
	Store *store;

	/* The store out of reach leaves the local snapshot possible: it is only a check. */
	int e = pool_backend_store(pb, r->secrets, &store, &err);
	if (e == 0)
		e = store_manifest_get(store, id, deadline, &m, &err);
	if (e < 0) {
		if (e != -ENOENT)
			log_debug("snapshot '%s': could not look for it in the store: %s", r->name,
				  err);
		return 0;
	}
	store_manifest_done(&m);
	return errorf(ret_error, -EEXIST,
		      "snapshot '%s' exists as %s%s in the snapshot store (location: store): its "
		      "location differs from this request's (location: local)",
		      r->name, POOL_STORE_ID_PREFIX, id);
}

/* Stops the upload of id (waits for a running one to see its cancel) and forgets it. */
static void upload_stop(PoolStore *st, const char *id)
{
	pthread_mutex_lock(&st->lock);
	UploadJob *j = job_find(st, id);
	if (j) {
		atomic_store(&j->cancel, true);
		while (j->running)
			pthread_cond_wait(&st->cond, &st->lock);
		job_remove(st, j);
	}
	pthread_mutex_unlock(&st->lock);
}

int pool_store_delete_snapshot(PoolBackend *pb, const BackendRef *r, BackendDeleted *ret,
			       char **ret_error)
{
	const char *id = pool_store_id_of(r->id);
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	_cleanup_free_ char *why = NULL;
	Store *store;

	int e = pool_backend_store(pb, r->secrets, &store, ret_error);
	if (e < 0)
		return e;
	upload_stop(pb->store, id);
	/* The copy first: once it is gone nothing uploads the snapshot again. */
	bool copy =
		pool_snapshot_load(pb->pool, id, &s) == 0 && strmap_get(&s->params, POOL_STORE_KEY);
	if (copy && (e = pool_snapshot_delete(pb->pool, id, &why)) < 0)
		return errorf(ret_error, e == -EPERM ? -ENOTEMPTY : e,
			      "deleting snapshot %s failed: its copy in pool %s: %s", r->id,
			      pool_path(pb->pool), why ?: strerror(-e));
	failpoint("store-delete-after-copy");
	if ((e = store_delete(store, id, pool_store_deadline(), ret_error)) < 0)
		return e;
	failpoint("store-delete-after-manifest");
	*ret = (BackendDeleted){.found = true, .leftover = pool_leftover(pb->pool, why)};
	return 0;
}

int pool_store_get_snapshot(PoolBackend *pb, const BackendRef *r, BackendSnapshot *ret,
			    char **ret_error)
{
	Store *store;

	int e = pool_backend_store(pb, r->secrets, &store, ret_error);
	if (e < 0)
		return e;
	return snapshot_find(pb, store, pool_store_id_of(r->id), ret, ret_error);
}

typedef struct ListIds {
	char ***ids;
	size_t *n, *cap;
} ListIds;

static int list_one(const char *id, void *userdata)
{
	ListIds *l = userdata;

	if (pool_snapshot_id_valid(id)) /* another tool's object in the prefix: not ours */
		strv_push(l->ids, l->n, l->cap, xasprintf(POOL_STORE_ID_PREFIX "%s", id));
	return 0;
}

int pool_store_list_failed(PoolBackend *pb, int e, char **err, char **ret_error)
{
	/* A refusal (a key, a bucket, a secret, a damaged manifest) keeps its code. */
	if (e == -EPERM || e == -EACCES || e == -ENXIO || e == -ENOKEY || e == -EINVAL ||
	    e == -ENOMEDIUM || e == -EUCLEAN || e == -ENOENT)
		return error_pass(e, err, ret_error);
	_cleanup_free_ char *where = pool_store_describe(pb->store);
	return errorf(ret_error, -EAGAIN,
		      "ListSnapshots: the snapshot store %s could not be read, and a list without "
		      "its snapshots would be incomplete: %s",
		      where, *err ?: strerror(-e));
}

int pool_store_list_ids(PoolBackend *pb, const Strmap *secrets, char ***ids, size_t *n, size_t *cap,
			char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	ListIds l = {ids, n, cap};
	Store *store;

	int e = pool_backend_store(pb, secrets, &store, ret_error);
	if (e < 0)
		return e;
	pthread_mutex_lock(&pb->store->lock);
	for (UploadJob *j = pb->store->jobs; j; j = j->next)
		list_one(j->id, &l);
	pthread_mutex_unlock(&pb->store->lock);
	e = store_list(store, list_one, &l, pool_store_deadline(), &err);
	return e < 0 ? pool_store_list_failed(pb, e, &err, ret_error) : e;
}
