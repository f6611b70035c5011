/* SPDX-License-Identifier: Apache-2.0 */
/* The pool metadata parser: any bytes in a meta.json must parse or be refused, never crash;
 * what parses must survive a write and a re-read unchanged. Covers meta.json of volumes,
 * snapshots, groups and nodes, the node service's use records (node.json) and the nodes'
 * device indexes. */
#include <string.h>

#include "fuzz.h"
#include "node-use.h"
#include "pool-meta.h"

static void volume_round_trip(const PoolVolume *v)
{
	size_t len, len2;
	char *text = pool_volume_to_json(v, &len);
	PoolVolume *again = NULL;
	FUZZ_ASSERT(pool_volume_from_json(text, len, &again) == 0);
	char *text2 = pool_volume_to_json(again, &len2);
	FUZZ_ASSERT(len == len2 && memcmp(text, text2, len) == 0);
	free(text);
	free(text2);
	pool_volume_free(again);
}

static void use_round_trip(const NodeUse *u, const char *boot)
{
	size_t len, len2;
	char *text = node_use_to_json(u, boot, &len), *boot2 = NULL;
	NodeUse again = {};
	FUZZ_ASSERT(node_use_from_json(text, len, &again, &boot2) == 0);
	char *text2 = node_use_to_json(&again, boot2, &len2);
	FUZZ_ASSERT(len == len2 && memcmp(text, text2, len) == 0);
	free(text);
	free(text2);
	free(boot2);
	node_use_done(&again);
}

static void devices_round_trip(PoolNodeDevice *d, size_t n)
{
	size_t len, n_again;
	char *text = pool_node_devices_to_json("node", d, n, &len);
	PoolNodeDevice *again = NULL;
	FUZZ_ASSERT(pool_node_devices_from_json(text, len, &again, &n_again) == 0 && n_again == n);
	free(text);
	pool_node_devices_free(again, n_again);
	pool_node_devices_free(d, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	PoolVolume *v = NULL;
	PoolSnapshot *s = NULL;
	PoolGroup *g = NULL;
	PoolNode *n = NULL;
	NodeUse u = {};
	char *boot = NULL;
	PoolNodeDevice *devices = NULL;
	size_t n_devices;

	if (pool_volume_from_json(text, size, &v) == 0) {
		volume_round_trip(v);
		pool_volume_free(v);
	}
	if (pool_snapshot_from_json(text, size, &s) == 0)
		pool_snapshot_free(s);
	if (pool_group_from_json(text, size, &g) == 0)
		pool_group_free(g);
	if (pool_node_from_json(text, size, &n) == 0)
		pool_node_free(n);
	if (node_use_from_json(text, size, &u, &boot) == 0) {
		use_round_trip(&u, boot);
		node_use_done(&u);
		free(boot);
	}
	if (pool_node_devices_from_json(text, size, &devices, &n_devices) == 0)
		devices_round_trip(devices, n_devices);
	return 0;
}
