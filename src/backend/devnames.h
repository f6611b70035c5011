/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "macro.h"
#include "time-util.h"

/* Device names for ControllerPublishVolume, picked per node from one fixed, ordered list under
 * one lock, as the AWS EBS driver does. The table is a working copy: the pool's records decide
 * which names a node's volumes hold, and the controller loads them into it (forget, then
 * restore) under the node's lock before each allocation, so that names published by other
 * processes count. Failure marks are this process's own and survive a reload. As EBS does: a volume
 * keeps its name on a node until released, so a retried publish gets the same name; a name is
 * reserved from the moment it is handed out (while the attach is still in flight), so two
 * concurrent publishes to one node never get the same name; a name whose attach failed is avoided
 * for a while, and used again only when no other name is free.
 *
 * The list: "/dev/xvd" + two letters, xvdba..xvdbz, xvdca..xvdcz, xvdda..xvddx (76 names).
 * The EBS driver's Linux names in the same order; xvddx is the last name EC2 accepts in the
 * two-letter series. */
typedef struct DevNames DevNames;

#define DEVNAMES_MAX 76
#define DEVNAMES_FAILED_AVOID_DEFAULT (60 * USEC_PER_SEC)

typedef struct DevNamesConfig {
	usec_t failed_avoid; /* how long a failed name is avoided; 0: the default (60 s) */
	size_t max_per_node; /* names one node may hold at once; 0 or > DEVNAMES_MAX: all */
} DevNamesConfig;

/* A new, empty allocator; config may be NULL for the defaults. Never fails. */
DevNames *devnames_new(const DevNamesConfig *config);
/* Frees the allocator. No other thread may be using it. */
void devnames_free(DevNames *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(DevNames *, devnames_free);

/* The i-th name of the fixed list (i < DEVNAMES_MAX), in allocation order; static storage. */
const char *devnames_name(size_t i);

/* The name volume holds on node, allocating the first free one when it holds none: not held by
 * another volume, not marked failed within the avoid window (unless all free names are).
 * Idempotent. Returns 0 and a copy in *ret_name; -ENOSPC when every name of the list is taken;
 * else -EMLINK when the node already holds max_per_node names. */
int devnames_allocate(DevNames *d, const char *node, const char *volume, char **ret_name);

/* As devnames_allocate() with a limit for this node (its attach limit; 0: max_per_node), checked
 * under the same lock as the allocation, so concurrent publishes of different volumes cannot
 * both take the last place. */
int devnames_allocate_max(DevNames *d, const char *node, const char *volume, size_t max,
			  char **ret_name);

/* Frees the name volume holds on node. Returns 0, or -ENOENT when it holds none. */
int devnames_release(DevNames *d, const char *node, const char *volume);

/* Records that attaching with name on node failed: allocate avoids it for failed_avoid. Does not
 * release it; a publish that failed calls devnames_release() as well. Returns 0, or -EINVAL when
 * name is not one of the list. */
int devnames_mark_failed(DevNames *d, const char *node, const char *name);

/* Rebuilds one assignment found in the backend after a restart; ignores max_per_node. Returns 0
 * (also when already recorded), -EINVAL for a name not in the list, -EEXIST when the name is
 * held by another volume on node or volume holds another name there. */
int devnames_restore(DevNames *d, const char *node, const char *volume, const char *name);

/* Forgets every name node holds, keeping its failure marks: before its assignments are
 * restored from where they are recorded. */
void devnames_forget_node(DevNames *d, const char *node);

/* The name volume holds on node: 0 and a copy in *ret_name, or -ENOENT. */
int devnames_lookup(DevNames *d, const char *node, const char *volume, char **ret_name);

/* How many names node holds. */
size_t devnames_count(DevNames *d, const char *node);
