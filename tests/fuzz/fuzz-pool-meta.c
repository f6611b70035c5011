/* SPDX-License-Identifier: Apache-2.0 */
/* The pool metadata parser: any bytes in a meta.json must parse or be refused, never crash;
 * what parses must survive a write and a re-read unchanged. */
#include <string.h>

#include "fuzz.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	PoolVolume *v = NULL;
	PoolSnapshot *s = NULL;
	PoolGroup *g = NULL;
	PoolNode *n = NULL;

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
	return 0;
}
