/* SPDX-License-Identifier: Apache-2.0 */
/* Restores of store snapshots into new volumes, detached from the call that asked: a restore
 * may take longer than the provisioner waits. Each runs in a thread of its own (at most
 * POOL_RESTORES_MAX at once, the others wait for a slot), keyed by the volume's local ID; the
 * call waits for it until its deadline, a call for the same volume meanwhile is told it runs
 * (ABORTED, with its progress or its place in the queue), and once it is done the volume is
 * there (or nothing is). A restore that failed after its call gave up is remembered
 * (POOL_RESTORE_FAILURE_KEEP): the next call for that volume and snapshot is told its error
 * once, and the one after starts again. Stopping cancels the restores and waits for them. The
 * volume is made in the pool's tmp/ and renamed into place only when whole
 * (pool_volume_create_filled()): a crash leaves nothing the next open does not remove. */
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "log.h"
#include "pool-restore.h"
#include "store.h"

typedef struct RestoreJob {
	char local[POOL_ID_MAX];
	char *shown;	/* the volume's ID as the CSI layer sees it */
	char *snapshot; /* the request's snapshot ID, for messages */
	char *store_id; /* the snapshot's ID in the store */
	PoolVolume *spec;
	PoolRestores *rs;
	Pool *pool;
	char *node_id; /* for messages */
	Store *store;
	usec_t started; /* CLOCK_MONOTONIC */
	usec_t deadline;
	/* guarded by PoolRestores.lock: */
	unsigned refs; /* the thread, and each caller waiting */
	bool done;
	int error;
	char *message;
	bool running; /* has its slot */
	StoreRestoreStats stats;
	StoreRestoreProgress progress; /* atomics: read without the lock */
} RestoreJob;

/* A restore that failed with nobody waiting for it. */
typedef struct RestoreFailure {
	char local[POOL_ID_MAX];
	char *snapshot;
	int error;
	char *message;
	usec_t when; /* CLOCK_MONOTONIC */
	struct RestoreFailure *next;
} RestoreFailure;

struct PoolRestores {
	pthread_mutex_t lock; /* guards the fields below and the jobs' shared fields */
	pthread_cond_t cond;  /* a job done, a slot free */
	RestoreJob **jobs;    /* running or waiting for a slot */
	size_t n_jobs;
	unsigned running;
	bool stopping;
	RestoreFailure *failures;
};

static void failure_free(RestoreFailure *f)
{
	free(f->snapshot);
	free(f->message);
	free(f);
}

PoolRestores *pool_restores_new(void)
{
	PoolRestores *rs = xnew0(PoolRestores, 1);
	pthread_condattr_t attr;

	pthread_mutex_init(&rs->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&rs->cond, &attr);
	pthread_condattr_destroy(&attr);
	return rs;
}

bool pool_restores_free(PoolRestores *rs)
{
	if (!rs)
		return true;
	pthread_mutex_lock(&rs->lock);
	rs->stopping = true;
	if (rs->n_jobs > 0)
		log_info("cancelling %zu restore(s)", rs->n_jobs);
	for (size_t i = 0; i < rs->n_jobs; i++)
		atomic_store(&rs->jobs[i]->progress.cancel, true);
	pthread_cond_broadcast(&rs->cond); /* the ones waiting for a slot */
	/* A chunk in flight finishes (or fails) first. */
	usec_t until = now_usec(CLOCK_MONOTONIC) + POOL_RESTORE_STOP_WAIT;
	while (rs->n_jobs > 0) {
		struct timespec ts = {.tv_sec = (time_t)(until / USEC_PER_SEC),
				      .tv_nsec = (long)(until % USEC_PER_SEC) * 1000};
		if (pthread_cond_timedwait(&rs->cond, &rs->lock, &ts) == ETIMEDOUT)
			break;
	}
	size_t n = rs->n_jobs;
	pthread_mutex_unlock(&rs->lock);
	if (n > 0)
		return false; /* their threads still use the pool: the process ends with them */
	while (rs->failures) {
		RestoreFailure *f = rs->failures;
		rs->failures = f->next;
		failure_free(f);
	}
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs->jobs);
	free(rs);
	return true;
}

static void job_unref_locked(RestoreJob *j)
{
	if (--j->refs > 0)
		return;
	free(j->shown);
	free(j->node_id);
	free(j->snapshot);
	free(j->store_id);
	pool_volume_free(j->spec);
	free(j->message);
	free(j);
}

static RestoreJob *job_find_locked(PoolRestores *rs, const char *local)
{
	for (size_t i = 0; i < rs->n_jobs; i++)
		if (strcmp(rs->jobs[i]->local, local) == 0)
			return rs->jobs[i];
	return NULL;
}

static void job_remove_locked(PoolRestores *rs, RestoreJob *j)
{
	for (size_t i = 0; i < rs->n_jobs; i++)
		if (rs->jobs[i] == j) {
			rs->jobs[i] = rs->jobs[--rs->n_jobs];
			return;
		}
}

static int busy_error(PoolRestores *rs, RestoreJob *j, char **ret_error)
{
	unsigned long long secs = (now_usec(CLOCK_MONOTONIC) - j->started) / USEC_PER_SEC;
	_cleanup_free_ char *where = NULL;

	if (!j->running) {
		size_t ahead = 0;
		for (size_t i = 0; i < rs->n_jobs && rs->jobs[i] != j; i++)
			ahead += !rs->jobs[i]->running;
		where = xasprintf("queued: %d restores run at once, %zu other(s) queued before it",
				  POOL_RESTORES_MAX, ahead);
	} else {
		StoreRestoreProgress *p = &j->progress;
		uint64_t total = atomic_load_explicit(&p->chunks_total, memory_order_relaxed);
		if (total == 0)
			where = xstrdup("reading the snapshot's manifest");
		else
			where = xasprintf(
				"%llu of %llu chunks, %.1f of %.1f MiB",
				(unsigned long long)atomic_load_explicit(&p->chunks_done,
									 memory_order_relaxed),
				(unsigned long long)total,
				(double)atomic_load_explicit(&p->bytes_done, memory_order_relaxed) /
					(1 << 20),
				(double)atomic_load_explicit(&p->bytes_total,
							     memory_order_relaxed) /
					(1 << 20));
	}
	return errorf(ret_error, -EBUSY,
		      "volume %s is being restored from snapshot %s (for %llu s, %s): CreateVolume "
		      "answers with it once the restore is done",
		      j->shown, j->snapshot, secs, where);
}

int pool_restore_busy(PoolRestores *rs, const char *local, char **ret_error)
{
	int e = 0;

	pthread_mutex_lock(&rs->lock);
	RestoreJob *j = job_find_locked(rs, local);
	if (j)
		e = busy_error(rs, j, ret_error);
	pthread_mutex_unlock(&rs->lock);
	return e;
}

int pool_restore_failed(PoolRestores *rs, const char *local, const char *snapshot, char **ret_error)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	int e = 0;

	pthread_mutex_lock(&rs->lock);
	for (RestoreFailure **p = &rs->failures; *p;) {
		RestoreFailure *f = *p;
		bool ours = strcmp(f->local, local) == 0;
		if (ours && strcmp(f->snapshot, snapshot) == 0 &&
		    now - f->when < POOL_RESTORE_FAILURE_KEEP)
			e = errorf(ret_error, f->error,
				   "%s (the restore failed %llu s ago, after its call had ended; "
				   "CreateVolume again starts a new one)",
				   f->message,
				   (unsigned long long)((now - f->when) / USEC_PER_SEC));
		if (ours || now - f->when >= POOL_RESTORE_FAILURE_KEEP) {
			*p = f->next;
			failure_free(f);
		} else
			p = &f->next;
	}
	pthread_mutex_unlock(&rs->lock);
	return e;
}

static int restore_fill(int dir_fd, const char *name, void *userdata, char **ret_error)
{
	RestoreJob *j = userdata;

	return store_restore_progress(j->store, j->store_id, dir_fd, name, j->deadline,
				      &j->progress, &j->stats, ret_error);
}

/* The message of a failed restore, as CreateVolume says it. */
static char *job_message(RestoreJob *j, int e, const char *err)
{
	/* The store names the snapshot by its ID there: the request's names it once. */
	_cleanup_free_ char *prefix = xasprintf("snapshot %s: ", j->store_id);
	if (err && strncmp(err, prefix, strlen(prefix)) == 0)
		err += strlen(prefix);
	if (e == -ENOSPC) {
		_cleanup_free_ char *why = pool_space_refusal(j->pool, j->spec->size, j->node_id);
		return xasprintf("capacity_range: %s", why);
	}
	if (e == -EUCLEAN || e == -ENOENT)
		return xasprintf("volume_content_source: snapshot %s: %s", j->snapshot,
				 err ?: strerror(-e));
	if (e == -ERANGE)
		return xasprintf("capacity_range: %llu bytes is smaller than the source snapshot "
				 "%s",
				 (unsigned long long)j->spec->size, j->snapshot);
	return xasprintf("restoring volume %s from snapshot %s failed: %s", j->shown, j->snapshot,
			 err ?: strerror(-e));
}

static void *job_run(void *userdata)
{
	RestoreJob *j = userdata;
	PoolRestores *rs = j->rs;
	_cleanup_free_ char *err = NULL;

	int e = -ECANCELED;

	pthread_mutex_lock(&rs->lock);
	while (rs->running >= POOL_RESTORES_MAX && !rs->stopping)
		pthread_cond_wait(&rs->cond, &rs->lock);
	if (!rs->stopping) {
		rs->running++;
		j->running = true;
	}
	pthread_mutex_unlock(&rs->lock);

	if (j->running)
		e = pool_volume_create_filled(j->pool, j->spec, restore_fill, j, &err);
	usec_t took = now_usec(CLOCK_MONOTONIC) - j->started;
	if (e == 0)
		log_info("volume %s restored from snapshot %s: %llu chunks, %llu bytes received, "
			 "%llu written in %.1f s",
			 j->shown, j->snapshot, (unsigned long long)j->stats.chunks,
			 (unsigned long long)j->stats.bytes_received,
			 (unsigned long long)j->stats.bytes_written, (double)took / USEC_PER_SEC);
	char *message = NULL;
	if (e == -ECANCELED)
		log_info("volume %s: the restore from snapshot %s was cancelled (stopping) after "
			 "%llu chunks; nothing is left of it",
			 j->shown, j->snapshot,
			 (unsigned long long)atomic_load(&j->progress.chunks_done));
	else if (e < 0 && e != -EEXIST)
		message = job_message(j, e, err);
	if (message)
		log_warning("%s", message);

	pthread_mutex_lock(&rs->lock);
	if (j->running)
		rs->running--;
	j->done = true;
	j->error = e;
	j->message = message;
	job_remove_locked(rs, j);
	if (message && j->refs == 1) {
		/* Its call gave up: the next one for it is told, once. */
		RestoreFailure *f = xnew0(RestoreFailure, 1);
		memcpy(f->local, j->local, sizeof(f->local));
		f->snapshot = xstrdup(j->snapshot);
		f->error = e;
		f->message = xstrdup(message);
		f->when = now_usec(CLOCK_MONOTONIC);
		f->next = rs->failures;
		rs->failures = f;
	}
	pthread_cond_broadcast(&rs->cond);
	job_unref_locked(j);
	pthread_mutex_unlock(&rs->lock);
	return NULL;
}

int pool_restore_run(PoolRestores *rs, Pool *pool, const char *node_id, Store *store,
		     const char *store_id, const char *snapshot, PoolVolume *spec, usec_t deadline,
		     char **ret_error)
{
	pthread_attr_t attr;
	pthread_t thread;
	int e;

	RestoreJob *j = xnew0(RestoreJob, 1);
	snprintf(j->local, sizeof(j->local), "%s", spec->id);
	/* The ID the CSI layer sees, as pool_backend_id() makes it. */
	j->shown = spec->node && *spec->node ? xasprintf("%s.%s", spec->id, spec->node)
					     : xstrdup(spec->id);
	j->snapshot = xstrdup(snapshot);
	j->store_id = xstrdup(store_id);
	j->spec = spec;
	j->rs = rs;
	j->pool = pool;
	j->node_id = xstrdup(node_id);
	j->store = store;
	j->started = now_usec(CLOCK_MONOTONIC);
	j->deadline = j->started + POOL_RESTORE_TIMEOUT;
	j->refs = 2;

	pthread_mutex_lock(&rs->lock);
	RestoreJob *other = job_find_locked(rs, j->local);
	if (other) {
		e = busy_error(rs, other, ret_error);
		pthread_mutex_unlock(&rs->lock);
		j->refs = 1;
		job_unref_locked(j);
		return e;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, job_run, j) != 0)
		abort();
	pthread_attr_destroy(&attr);
	rs->jobs = xrealloc(rs->jobs, (rs->n_jobs + 1) * sizeof(*rs->jobs));
	rs->jobs[rs->n_jobs++] = j;

	while (!j->done) {
		if (deadline == USEC_INFINITY) {
			pthread_cond_wait(&rs->cond, &rs->lock);
			continue;
		}
		struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
				      .tv_nsec = (long)(deadline % USEC_PER_SEC) * 1000};
		if (pthread_cond_timedwait(&rs->cond, &rs->lock, &ts) == ETIMEDOUT && !j->done)
			break;
	}
	if (!j->done)
		e = errorf(ret_error, -ETIMEDOUT,
			   "volume %s: the restore from snapshot %s goes on after the call's "
			   "deadline; CreateVolume again answers ABORTED until it is done, then "
			   "with the volume",
			   j->shown, snapshot);
	else if (j->error == -ECANCELED)
		e = errorf(ret_error, -ECANCELED,
			   "volume %s: the restore from snapshot %s was cancelled: volplugd is "
			   "stopping; CreateVolume again after its restart starts it again",
			   j->shown, snapshot);
	else if (j->error < 0 && j->message)
		e = errorf(ret_error, j->error, "%s", j->message);
	else
		e = j->error;
	job_unref_locked(j);
	pthread_mutex_unlock(&rs->lock);
	return e;
}
