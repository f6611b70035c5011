/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's objects as its records hold them, and their serialisation; internal to the
 * pool. Nothing here knows a Pool: pool.h builds on it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strmap.h"

#define POOL_ID_MAX 32

typedef struct PoolAttachment {
	char *node;
	char *device;
	bool readonly;
} PoolAttachment;

typedef struct PoolVolume {
	char id[POOL_ID_MAX];
	char *name;
	uint64_t size;
	int64_t created_ns; /* CLOCK_REALTIME */
	Strmap params;	    /* the StorageClass parameters, normalised */
	Strmap context;	    /* volume_context handed to the node */
	char *source_kind;  /* "", "snapshot" or "volume" */
	char *source_id;
	char *access_mode; /* the CSI access mode name it was created for */
	char *node;	   /* what its ID ends with (pool-ids.c); NULL: made before */
	/* volumeKind: directory: its content is the directory tree/ beside its data file (which
	 * then holds no bytes, only the size the ledger counts), bounded by the project quota
	 * of this ID ("kind": "directory", "project": N; absent: a loop device's file). */
	bool directory;
	uint32_t project;
	PoolAttachment *attachments;
	size_t n_attachments;
} PoolVolume;

typedef struct PoolSnapshot {
	char id[POOL_ID_MAX];
	char *name;
	char *source_volume_id;
	uint64_t size;
	int64_t created_ns;
	Strmap params;
	char *node;	/* what its ID ends with; NULL: made before IDs carried their node */
	bool directory; /* of a directory volume: its copy is tree/ ("kind": "directory") */
} PoolSnapshot;

typedef struct PoolGroup {
	char id[POOL_ID_MAX];
	char *name;
	char **snapshot_ids; /* a strv: member snapshots, in the order of their source volumes */
	size_t n_snapshots;
	int64_t created_ns;
	char *node; /* what its ID ends with; NULL: made before IDs carried their node */
} PoolGroup;

typedef struct PoolNode {
	char *id;
	uint32_t max_volumes;
	char *zone;
} PoolNode;

/* A device name a volume holds on a node. */
typedef struct PoolNodeDevice {
	char *device;
	char *volume_id;
} PoolNodeDevice;

void pool_volume_free(PoolVolume *v);
void pool_volume_freep(PoolVolume **v);
void pool_snapshot_free(PoolSnapshot *s);
void pool_snapshot_freep(PoolSnapshot **s);
void pool_group_free(PoolGroup *g);
void pool_group_freep(PoolGroup **g);
void pool_node_free(PoolNode *n);
void pool_node_devices_free(PoolNodeDevice *d, size_t n);

/* Each *_to_json returns a malloc'ed NUL-terminated text; those of volumes, snapshots and
 * groups return NULL when a string in the object (from a request: a name, a parameter) is not
 * UTF-8, which no JSON record can hold. *_from_json returns -EBADMSG for anything that is not a
 * whole, valid object of the current format. */
char *pool_volume_to_json(const PoolVolume *v, size_t *ret_len);
int pool_volume_from_json(const char *text, size_t len, PoolVolume **ret);
char *pool_snapshot_to_json(const PoolSnapshot *s, size_t *ret_len);
int pool_snapshot_from_json(const char *text, size_t len, PoolSnapshot **ret);
char *pool_group_to_json(const PoolGroup *g, size_t *ret_len);
int pool_group_from_json(const char *text, size_t len, PoolGroup **ret);
char *pool_node_to_json(const PoolNode *n, size_t *ret_len);
int pool_node_from_json(const char *text, size_t len, PoolNode **ret);
/* A node's device names (nodes/<node>.devices): {"devices": {"/dev/xvdba": "vol-..."}}. */
char *pool_node_devices_to_json(const char *node, const PoolNodeDevice *d, size_t n,
				size_t *ret_len);
int pool_node_devices_from_json(const char *text, size_t len, PoolNodeDevice **ret, size_t *ret_n);
