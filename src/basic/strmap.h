/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A small ordered string -> string map (parameters, tags, contexts): linear, for tens of
 * entries. Keys are unique; set() replaces. */
typedef struct Strmap {
	char **keys, **values;
	size_t n;
} Strmap;

void strmap_set(Strmap *m, const char *key, const char *value);
const char *strmap_get(const Strmap *m, const char *key);
bool strmap_remove(Strmap *m, const char *key);
bool strmap_equal(const Strmap *a, const Strmap *b);
void strmap_copy(Strmap *dst, const Strmap *src);
void strmap_done(Strmap *m);
