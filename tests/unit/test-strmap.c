/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "strmap.h"
#include "tap.h"

#define N 20000

static void test_small(void)
{
	_cleanup_(strmap_done) Strmap m = {};

	strmap_set(&m, "a", "1");
	strmap_set(&m, "b", "2");
	strmap_set(&m, "a", "3");
	is_int(m.n, 2, "small: set() of a key there replaces");
	is_str(strmap_get(&m, "a"), "3", "small: the new value");
	ok(!m.index, "small: searched in order, no index");
	ok(strmap_remove(&m, "a") && !strmap_get(&m, "a") && m.n == 1, "small: remove");
	ok(!strmap_remove(&m, "a"), "small: remove of an absent key");
}

static void test_large(void)
{
	_cleanup_(strmap_done) Strmap m = {}, copy = {};
	char k[32], v[32];
	size_t bad = 0;

	for (size_t i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "key%zu", i);
		snprintf(v, sizeof(v), "v%zu", i);
		strmap_set(&m, k, v);
	}
	is_int(m.n, N, "large: every key once");
	ok(m.index != NULL, "large: found through the index");
	for (size_t i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "key%zu", i);
		snprintf(v, sizeof(v), "v%zu", i);
		const char *got = strmap_get(&m, k);
		bad += !got || strcmp(got, v) != 0 || strcmp(m.keys[i], k) != 0;
	}
	is_int(bad, 0, "large: each key has its value, in the order set");
	strmap_set(&m, "key7", "seven");
	ok(m.n == N && strcmp(strmap_get(&m, "key7"), "seven") == 0 &&
		   strcmp(m.values[7], "seven") == 0,
	   "large: a replaced value stays in its place");
	ok(!strmap_get(&m, "key") && !strmap_get(&m, "key20000"), "large: absent keys");

	ok(strmap_remove(&m, "key0") && strmap_remove(&m, "key10000"), "large: remove two");
	bad = 0;
	for (size_t i = 1; i < N; i++) {
		snprintf(k, sizeof(k), "key%zu", i);
		bad += (i == 10000) != !strmap_get(&m, k);
	}
	is_int(bad, 0, "large: the others are still found after the positions moved");
	is_str(m.keys[0], "key1", "large: order kept");

	strmap_copy(&copy, &m);
	ok(strmap_equal(&copy, &m) && strmap_equal(&m, &copy), "large: a copy is equal");
	strmap_set(&copy, "key1", "other");
	ok(!strmap_equal(&copy, &m), "large: not after a change");

	for (size_t i = N; i-- > 1;) {
		snprintf(k, sizeof(k), "key%zu", i);
		strmap_remove(&m, k);
	}
	ok(m.n == 0 && !m.index, "large: emptied, the index is gone");
	strmap_set(&m, "again", "1");
	is_str(strmap_get(&m, "again"), "1", "large: usable again");
}

int main(void)
{
	test_small();
	test_large();
	return tap_done();
}
