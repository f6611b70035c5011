/* SPDX-License-Identifier: Apache-2.0 */
/* The pool backend (backend.h's table over the pool): shared by its files, not for other
 * layers. pool-backend.c holds the table and the node service's operations, pool-controller.c
 * the volumes', pool-attach.c attach and detach, pool-snapshot.c snapshots and groups. */
#pragma once

#include "backend.h"
#include "devnames.h"
#include "pool-node.h"
#include "pool.h"

typedef struct PoolBackend {
	Backend base;
	Pool *pool;
	DevNames *devnames; /* device names per node, reloaded from the pool at each publish */
	char *node_id;	    /* this process's node ("" when it serves no node) */
	uint32_t max_volumes;
	char *zone;
	PoolTrimmer *trimmer; /* NULL: the node does not trim */
} PoolBackend;

static inline PoolBackend *pool_of(Backend *b)
{
	return (PoolBackend *)b;
}

/* The operations, with backend.h's contracts. */
int pool_backend_create_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
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

/* Lists: a page starts at its token, the first id of the page, even if that object is gone
 * since, so objects made before it are not listed twice. -EALREADY (ABORTED) with a message
 * naming the list (what: "ListVolumes") for a token that is no id valid() accepts. */
#define POOL_LIST_MAX_DEFAULT 1000
int pool_page_token_check(const char *token, bool (*valid)(const char *), const char *what,
			  char **ret_error);
/* The index in the sorted ids where the page of token starts. */
size_t pool_page_start(char *const *ids, size_t n, const char *token);
