/* SPDX-License-Identifier: Apache-2.0 */
/* The pool backend (backend.h's table over the pool): shared by its files, not for other
 * layers. pool-backend.c holds the table and the node service's operations, pool-controller.c
 * the volumes', pool-attach.c attach and detach, pool-snapshot.c snapshots and groups. */
#pragma once

#include <errno.h>

#include "backend.h"
#include "devnames.h"
#include "pool-node.h"
#include "pool.h"
#include "store.h"

#define MIB (1024ULL * 1024ULL)

typedef struct PoolStore PoolStore;

typedef struct PoolBackend {
	Backend base;
	Pool *pool;
	DevNames *devnames; /* device names per node, reloaded from the pool at each publish */
	char *node_id;	    /* the node whose pool this is */
	char *node_part;    /* what IDs of this pool's objects end with (pool-ids.c) */
	bool serves_node;   /* this process runs the node service (BACKEND_ROLE_NODE) */
	uint32_t max_volumes;
	char *zone;
	BackendTopology segment;       /* where this pool's volumes are reachable: this node */
	PoolTrimmer *trimmer;	       /* NULL: the node does not trim */
	PoolStore *store;	       /* NULL: no snapshot store (no --store-bucket) */
	struct PoolRestores *restores; /* restores of store snapshots running (pool-restore.c) */
} PoolBackend;

/* The pool's own options (pool-options.c): the settings its type makes. */
typedef struct PoolSettings {
	char *path;
	bool init;	      /* a new pool where one was lost (PoolConfig.init) */
	uint64_t capacity;    /* 0: what the filesystem has */
	double overprovision; /* the pool may provision capacity x this */
	usec_t trim_interval; /* how often the node trims its staged volumes; 0: never */
	/* The snapshot store (pool-store.c); no bucket: none. */
	char *store_endpoint, *store_bucket, *store_prefix, *store_region;
	bool store_path_style;
	usec_t store_gc_interval; /* 0: never */
	size_t store_chunk_size;  /* of new uploads: a power of two, 64 KiB - 64 MiB */
} PoolSettings;

/* The defaults, for a BackendConfig without settings. */
extern const PoolSettings pool_settings_default;

static inline PoolBackend *pool_of(Backend *b)
{
	return (PoolBackend *)b;
}

/* IDs (pool-ids.c). */
typedef enum PoolIdKind {
	POOL_ID_VOLUME,
	POOL_ID_SNAPSHOT,
	POOL_ID_GROUP,
} PoolIdKind;

/* What the IDs of a node's objects end with: the node ID, or "~" + 16 hex of its hash when it
 * is longer than 105 bytes or not of [A-Za-z0-9._-]. Caller frees. */
char *pool_backend_node_part(const char *node_id);

/* The ID the CSI layer sees: local "." node_part, or local alone when node_part is NULL or ""
 * (an object made before IDs carried their node). Caller frees. */
char *pool_backend_id(const char *local, const char *node_part);

/* The local ID (its directory's name) of the object of this pool that id names; field is the
 * request's name for it, for the message. -ENOENT when id is no ID of that kind, -EXDEV when
 * it names another node's pool; *ret_error says which, naming both nodes. An ID without a node
 * part is this node's. */
int pool_backend_id_local(const PoolBackend *pb, PoolIdKind kind, const char *field, const char *id,
			  char ret_local[POOL_ID_MAX], char **ret_error);

/* As pool_backend_id_local(), for the calls that answer NOT_FOUND for both: -ENOENT. */
static inline int pool_backend_id_find(const PoolBackend *pb, PoolIdKind kind, const char *field,
				       const char *id, char ret_local[POOL_ID_MAX],
				       char **ret_error)
{
	int e = pool_backend_id_local(pb, kind, field, id, ret_local, ret_error);
	return e == -EXDEV ? -ENOENT : e;
}

/* The volume of local ID local, sound, for a call that needs it (id: as the request named it;
 * field: where): -ENOENT "FIELD: volume ID not found", -EUCLEAN with pool_volume_damaged()'s
 * message for a damaged one, or another errno with a message. Blocks. */
int pool_backend_volume_load(PoolBackend *pb, const char *field, const char *id, const char *local,
			     PoolVolume **ret, char **ret_error);

/* pool_volume_lock() with the answers of pool_backend_volume_load(). Blocks. */
int pool_backend_volume_lock(PoolBackend *pb, const char *field, const char *id, const char *local,
			     int *ret_lock_fd, char **ret_error);

/* What a delete says it left in the pool's tmp/ (why: pool_volume_delete()'s found->why),
 * for BackendDeleted.leftover; NULL when nothing. Caller frees. */
char *pool_leftover(Pool *p, const char *why);

/* 0 while the pool's directory is the one opened, else -ENOMEDIUM with *ret_error saying the
 * pool is gone (what a call that needs the pool answers: FAILED_PRECONDITION). */
int pool_backend_usable(PoolBackend *pb, char **ret_error);

/* The snapshot of record s as the CSI layer sees it (pool-snapshot.c). */
void pool_snapshot_to_backend(const PoolSnapshot *s, BackendSnapshot *ret);
/* Takes the reflinked point in time of r: a local snapshot, or with store_id the copy that goes
 * to the store under that ID (pool-store-snapshot.c). create_snapshot's contract. */
int pool_snapshot_take(PoolBackend *pb, const BackendCreateSnapshot *r, const char *store_id,
		       BackendSnapshot *ret, char **ret_error);

/* The snapshot store (pool-store.c, docs/snapshots.md): the store of the --store-* settings, or
 * *ret NULL without --store-bucket. Checks the settings and makes the default chain's store (no
 * I/O). -EINVAL with *ret_error naming the option at fault. */
int pool_store_new(const PoolSettings *ps, Pool *pool, const char *node_id, PoolStore **ret,
		   char **ret_error);
/* Starts the uploaders, the collector, and resumes the uploads whose local copies are still in
 * the pool (this node's unfinished ones). */
void pool_store_start(PoolStore *st);
/* Stops the threads (an upload running is cancelled, and resumes at the next start). */
void pool_store_free(PoolStore *st);
/* "s3://bucket/prefix at endpoint" for the start line; a new string. */
char *pool_store_describe(const PoolStore *st);

/* The Store for a request's secrets (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional
 * AWS_SESSION_TOKEN; none: the default credential chain), borrowed for the backend's life.
 * -ENOMEDIUM when volplugd has no store (FAILED_PRECONDITION, saying which flags to give),
 * -EINVAL for a bad or partial secret (naming the key, never the value). Blocks briefly. */
int pool_backend_store(PoolBackend *pb, const Strmap *secrets, Store **ret, char **ret_error);

/* The ID in the store of a store snapshot's ID ("store:" + it), or NULL when snapshot_id is
 * no store snapshot's ID. */
const char *pool_store_id_of(const char *snapshot_id);

/* The operations, with backend.h's contracts. */
int pool_backend_create_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			       char **ret_error);
int pool_backend_find_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			     char **ret_error);
int pool_backend_delete_volume(Backend *b, const BackendRef *r, BackendDeleted *ret,
			       char **ret_error);
int pool_backend_get_volume(Backend *b, const BackendRef *r, BackendVolume *ret, char **ret_error);
int pool_backend_list_volumes(Backend *b, const BackendListRequest *r, BackendVolumeList *ret,
			      char **ret_error);
int pool_backend_get_capacity(Backend *b, const BackendCapacityRequest *r, BackendCapacity *ret,
			      char **ret_error);
int pool_backend_change_volume(Backend *b, const BackendChange *r, BackendChanged *ret,
			       char **ret_error);
int pool_backend_attach(Backend *b, const BackendAttach *r, BackendAttachment *ret,
			char **ret_error);
int pool_backend_detach(Backend *b, const BackendDetach *r, BackendDetached *ret, char **ret_error);
int pool_backend_create_snapshot(Backend *b, const BackendCreateSnapshot *r, BackendSnapshot *ret,
				 char **ret_error);
int pool_backend_delete_snapshot(Backend *b, const BackendRef *r, BackendDeleted *ret,
				 char **ret_error);
int pool_backend_get_snapshot(Backend *b, const BackendRef *r, BackendSnapshot *ret,
			      char **ret_error);
int pool_backend_list_snapshots(Backend *b, const BackendListRequest *r, BackendSnapshotList *ret,
				char **ret_error);
int pool_backend_create_group(Backend *b, const BackendCreateGroup *r, BackendGroup *ret,
			      char **ret_error);
int pool_backend_delete_group(Backend *b, const BackendGroupRequest *r, BackendDeleted *ret,
			      char **ret_error);
int pool_backend_get_group(Backend *b, const BackendGroupRequest *r, BackendGroup *ret,
			   char **ret_error);
int pool_backend_snapshot_allocated(Backend *b, const BackendRangesRequest *r,
				    BackendRangesDone *ret, char **ret_error);
int pool_backend_snapshot_delta(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
				char **ret_error);

/* Registers the pool's gauges (pool-metrics.c) with the metrics registry, and takes them out
 * again before the pool closes. */
void pool_metrics_start(PoolBackend *pb);
/* BackendOps.status: what its gauges count too (pool-metrics.c). */
int pool_backend_status(Backend *b, const void *r, BackendStatus *ret, char **ret_error);
void pool_metrics_stop(PoolBackend *pb);

/* Lists: a page starts at its token, the first id of the page, even if that object is gone
 * since, so objects made before it are not listed twice. -EALREADY (ABORTED) with a message
 * naming the list (what: "ListVolumes") for a token that is no id valid() accepts. */
#define POOL_LIST_MAX_DEFAULT 1000
int pool_page_token_check(const char *token, bool (*valid)(const char *), const char *what,
			  char **ret_error);
/* The index in the sorted ids where the page of token starts. */
size_t pool_page_start(char *const *ids, size_t n, const char *token);
