/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hashmap.h"

/* An ordered string -> string map (parameters, tags, contexts). Keys are unique; set()
 * replaces. Small maps are searched in order; from STRMAP_INDEX_MIN entries on, a hash index
 * finds keys, so filling a map of n keys costs O(n), not O(n^2). keys, values and n may be read
 * directly; change them only through these functions. */
typedef struct Strmap {
	char **keys, **values;
	size_t n;
	Hashmap *index; /* key -> position + 1; NULL below STRMAP_INDEX_MIN entries */
} Strmap;

#define STRMAP_INDEX_MIN 16

void strmap_set(Strmap *m, const char *key, const char *value);
const char *strmap_get(const Strmap *m, const char *key);
bool strmap_remove(Strmap *m, const char *key);
bool strmap_equal(const Strmap *a, const Strmap *b);
void strmap_copy(Strmap *dst, const Strmap *src);
void strmap_done(Strmap *m);
