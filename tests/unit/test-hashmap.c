/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>

#include "alloc.h"
#include "hashmap.h"
#include "tap.h"

static int n_freed;

static void count_free(void *v)
{
	n_freed++;
	free(v);
}

int main(void)
{
	Hashmap *m = hashmap_new(count_free);
	char key[32];

	is_int(hashmap_size(m), 0, "new map is empty");
	ok(!hashmap_get(m, "x") && !hashmap_contains(m, "x") && !hashmap_remove(m, "x"),
	   "absent key: get, contains and remove say so");

	snprintf(key, sizeof(key), "node-a");
	is_int(hashmap_put(m, key, xstrdup("A")), 0, "put");
	key[5] = 'z';
	is_str(hashmap_get(m, "node-a"), "A",
	       "the key was copied: changing the caller's buffer "
	       "changes nothing");
	ok(!hashmap_contains(m, "node-z"), "nor adds the changed key");
	char *dup = xstrdup("A2");
	is_int(hashmap_put(m, "node-a", dup), -EEXIST, "a key that is there: -EEXIST");
	free(dup);
	is_str(hashmap_get(m, "node-a"), "A", "and the old value stays");
	is_int(hashmap_put(m, "", xstrdup("empty")), 0, "the empty string is a key");
	is_str(hashmap_get(m, ""), "empty", "found");

	/* Enough keys to grow the table many times over. */
	size_t bad = 0;
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "vol:%d", i);
		if (hashmap_put(m, key, xasprintf("%d", i)) < 0)
			bad++;
	}
	is_int(bad, 0, "20000 distinct keys put");
	is_int(hashmap_size(m), 20002, "size counts them");
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "vol:%d", i);
		const char *v = hashmap_get(m, key);
		if (!v || atoi(v) != i)
			bad++;
	}
	is_int(bad, 0, "each found with its own value after growing");

	for (int i = 0; i < 20000; i += 2) {
		snprintf(key, sizeof(key), "vol:%d", i);
		char *v = hashmap_remove(m, key);
		if (!v || atoi(v) != i)
			bad++;
		free(v);
	}
	is_int(bad, 0, "remove hands back the value");
	is_int(n_freed, 0, "and does not free it");
	is_int(hashmap_size(m), 10002, "removed keys no longer counted");
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "vol:%d", i);
		if (hashmap_contains(m, key) != (i % 2 == 1))
			bad++;
	}
	is_int(bad, 0, "removed keys gone, the others still there");
	is_int(hashmap_put(m, "vol:0", NULL), 0, "a removed key can be put again, with NULL");
	ok(hashmap_contains(m, "vol:0") && !hashmap_get(m, "vol:0"),
	   "contains tells a NULL value from an absent key");

	hashmap_free(m);
	is_int(n_freed, 10002, "free hands every value left (not NULL ones) to free_value");
	hashmap_free(NULL);

	Hashmap *set = hashmap_new(NULL);
	is_int(hashmap_put(set, "k", NULL), 0, "a map without free_value works as a set");
	hashmap_free(set);
	ok(1, "and frees without calling anything");
	return tap_done();
}
