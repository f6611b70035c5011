/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's snapshot store (docs/snapshots.md, "How the pool uses it"): the Store of the
 * --store-* options, one per set of credentials (the default chain, or a class's CSI secrets),
 * the uploads of snapshots taken with location: store, and the periodic collection. Not for
 * other layers. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "pool-backend.h"
#include "store.h"

/* A store snapshot's ID is this and its ID in the store (store_id_valid(): the local ID of its
 * reflinked copy, "snap-<16 hex>"). It names no node: ':' is in no local ID. */
#define POOL_STORE_ID_PREFIX "store:"

/* The snapshot record parameter of a local copy that goes to the store: its store ID. */
#define POOL_STORE_KEY "storeSnapshotId"

/* The snapshot record parameter of a store snapshot's copy kept once its upload is done, as the
 * base of the next upload of its volume (StoreUploadInfo.base_id): "uploaded". A copy without
 * it is an upload in progress (resumed at a start); one with it is uploaded already, kept
 * only on a pool that reflinks (its cost: the blocks the volume has rewritten since), one per
 * volume: the last uploaded. Its deletion, a newer upload's end or its volume's deletion
 * drops it (docs/snapshots.md, "The kept base"). */
#define POOL_STORE_BASE_KEY "storeBase"
#define POOL_STORE_BASE_UPLOADED "uploaded"

/* The manifest parameter that names the volume a store snapshot was taken of (its ID as
 * CreateSnapshot named it). */
#define POOL_STORE_SOURCE_KEY "sourceVolumeId"

/* Uploads running at once; each runs StoreConfig.parallel chunks at once. */
#define POOL_STORE_UPLOADS 2

typedef struct StoreCreds StoreCreds;

/* An upload this process knows of: queued, running, or failed and waiting to be asked again. */
typedef struct UploadJob {
	char id[POOL_ID_MAX]; /* its local copy's ID, and its ID in the store */
	Store *store;	      /* whose credentials it runs with */
	bool queued, running;
	int error; /* the last attempt's (0: none), and what it said */
	char *message;
	unsigned failures; /* attempts failed in a row */
	usec_t not_before; /* CLOCK_MONOTONIC: a retry's backoff */
	atomic_bool cancel;
	struct UploadJob *next;
} UploadJob;

struct PoolStore {
	Pool *pool; /* borrowed */
	char *node_id;
	char *endpoint, *bucket, *prefix, *region;
	bool path_style;
	usec_t gc_interval; /* 0: never */
	size_t chunk_size;  /* 0: the store's default */

	pthread_mutex_t lock; /* guards every field below */
	pthread_cond_t cond;  /* a job changed, or stopping (CLOCK_MONOTONIC) */
	StoreCreds *creds;    /* one Store per credentials, kept for the PoolStore's life */
	size_t n_creds;
	Store *last_used; /* what the collection uses: the last request's store */
	UploadJob *jobs;  /* the uploads this process knows of */
	bool stopping;
	pthread_t threads[POOL_STORE_UPLOADS + 1]; /* the uploaders, then the collector */
	unsigned n_threads;
};

/* A deadline for a request's calls to the store: the call's own, at most a minute. */
usec_t pool_store_deadline(void);

/* Queues the upload of local copy id with store (a job already queued takes the store: the
 * last request's credentials win). Takes the lock. */
void pool_store_enqueue(PoolStore *st, const char *id, Store *store);

/* pool-store-snapshot.c: the snapshot operations of store snapshots (backend.h's
 * contracts). */
int pool_store_create_snapshot(PoolBackend *pb, const BackendCreateSnapshot *r,
			       BackendSnapshot *ret, char **ret_error);
int pool_store_delete_snapshot(PoolBackend *pb, const BackendRef *r, BackendDeleted *ret,
			       char **ret_error);
int pool_store_get_snapshot(PoolBackend *pb, const BackendRef *r, BackendSnapshot *ret,
			    char **ret_error);
/* Before a local snapshot of r->name (local ID id) is taken: -EEXIST with *ret_error naming it
 * when the store holds a snapshot of that name; 0 when not, or when the store cannot say within
 * 5 s (a store out of reach does not stop local snapshots). Blocks. */
int pool_store_name_check(PoolBackend *pb, const BackendCreateSnapshot *r, const char *id,
			  char **ret_error);
/* ListSnapshots' answer for the store's failure e (message *err, taken): a refusal (key,
 * bucket, secrets, damage) as it is; else, the store out of reach, -EAGAIN (UNAVAILABLE)
 * naming it and saying the list cannot be complete without it. */
int pool_store_list_failed(PoolBackend *pb, int e, char **err, char **ret_error);
/* Adds the IDs of the store's snapshots (and of the uploads in progress here) to ids; a store
 * out of reach is pool_store_list_failed()'s answer. */
int pool_store_list_ids(PoolBackend *pb, const Strmap *secrets, char ***ids, size_t *n, size_t *cap,
			char **ret_error);

/* Whether the record s is a store snapshot's copy: uploading (pool_store_record_kept() false)
 * or kept as a base once uploaded. */
bool pool_store_record(const PoolSnapshot *s);
bool pool_store_record_kept(const PoolSnapshot *s);

/* Drops the kept bases of the volume of local ID volume (its deletion). Takes the lock. */
void pool_store_volume_gone(PoolStore *st, const char *volume);

/* Waits until `until` (CLOCK_MONOTONIC), a signal, or stopping. Hold the lock. */
void pool_store_wait(PoolStore *st, usec_t until);

/* The uploaders' thread (pool-store-snapshot.c). */
void *pool_store_uploader(void *userdata);
