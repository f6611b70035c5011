/* SPDX-License-Identifier: Apache-2.0 */
/* IDs carry their node. Every node has a pool of its own, and a call may reach the driver of
 * another node (a wrong volume handle, a snapshot restored where the scheduler put the pod):
 * the ID must say whose object it is before anything is looked up, so that a same-named object
 * of this pool is never touched. An object's ID is its local ID (the name of its directory,
 * "vol-<16 hex>", derived from the CSI name), ".", and its node's part: the node ID itself when
 * it is short and plain enough, else "~" and 16 hex digits of its hash. Objects made before IDs
 * carried their node keep their local ID as their ID, and an ID without a node part is taken
 * as this node's. See docs/pool.md. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "hash-util.h"
#include "pool-backend.h"
#include "pool-internal.h"

/* The longest node ID that appears as it is: "group-" + 16 hex + "." + it fits CSI's 128
 * bytes. */
#define NODE_PART_MAX 105
#define NODE_HASH_MARK '~'

char *pool_backend_node_part(const char *node_id)
{
	if (pool_node_id_valid(node_id) && strlen(node_id) <= NODE_PART_MAX)
		return xstrdup(node_id);
	return xasprintf("%c%016llx", NODE_HASH_MARK,
			 (unsigned long long)hash_mix64(fnv1a64_string(node_id, 0)));
}

char *pool_backend_id(const char *local, const char *node_part)
{
	if (!node_part || !*node_part)
		return xstrdup(local);
	return xasprintf("%s.%s", local, node_part);
}

static const struct {
	const char *what;
	bool (*valid)(const char *local);
} kinds[] = {
	[POOL_ID_VOLUME] = {"volume", pool_volume_id_valid},
	[POOL_ID_SNAPSHOT] = {"snapshot", pool_snapshot_id_valid},
	[POOL_ID_GROUP] = {"group snapshot", pool_group_id_valid},
};

/* Whether part (what follows the local ID) is a node part at all: a node ID, or the mark and
 * 16 hex digits. */
static bool node_part_valid(const char *part)
{
	if (part[0] != NODE_HASH_MARK)
		return pool_node_id_valid(part);
	if (strlen(part) != 17)
		return false;
	for (const char *c = part + 1; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

int pool_backend_id_local(const PoolBackend *pb, PoolIdKind kind, const char *field, const char *id,
			  char ret_local[POOL_ID_MAX], char **ret_error)
{
	const char *dot = strchr(id, '.');
	size_t n = dot ? (size_t)(dot - id) : strlen(id);
	char local[POOL_ID_MAX];

	if (n >= POOL_ID_MAX || (dot && !node_part_valid(dot + 1)))
		goto not_ours;
	memcpy(local, id, n);
	local[n] = 0;
	if (!kinds[kind].valid(local))
		goto not_ours;
	if (dot && strcmp(dot + 1, pb->node_part) != 0) {
		if (dot[1] == NODE_HASH_MARK)
			return errorf(ret_error, -EXDEV,
				      "%s: %s %s is on another node (%s), not on this node (%s)",
				      field, kinds[kind].what, id, dot + 1, pb->node_id);
		return errorf(ret_error, -EXDEV, "%s: %s %s is on node %s, not on this node (%s)",
			      field, kinds[kind].what, id, dot + 1, pb->node_id);
	}
	memcpy(ret_local, local, n + 1);
	return 0;
not_ours:
	return errorf(ret_error, -ENOENT, "%s: '%s' is not a %s ID of this pool", field, id,
		      kinds[kind].what);
}
