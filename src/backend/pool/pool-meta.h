/* SPDX-License-Identifier: Apache-2.0 */
/* Serialisation of the pool's metadata files; internal to the pool. */
#pragma once

#include <jansson.h>

#include "pool.h"

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
