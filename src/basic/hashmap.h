/* SPDX-License-Identifier: Apache-2.0 */
/* String keys -> pointers: a chained hash table, grown when 3/4 full so chains stay short;
 * O(1) on average. Keys are copied; values belong to the caller until hashmap_free(). Not
 * locked: the owner's lock guards it. Hashed with FNV-1a, which is no defence against chosen
 * keys: a long chain costs CPU, never correctness. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef struct Hashmap Hashmap;

/* A new, empty map; free_value (NULL: none) is called on each value hashmap_free() finds. */
Hashmap *hashmap_new(void (*free_value)(void *value));
/* Frees the keys, hands each non-NULL value to free_value, frees the map; NULL is a no-op. */
void hashmap_free(Hashmap *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Hashmap *, hashmap_free);

/* Adds key -> value. Returns 0, or -EEXIST (the map unchanged) when key is there already. */
int hashmap_put(Hashmap *m, const char *key, void *value);
/* The value of key, NULL when absent (or when NULL was put). */
void *hashmap_get(const Hashmap *m, const char *key);
bool hashmap_contains(const Hashmap *m, const char *key);
/* Takes key out and returns its value, which free_value is not called on; NULL when absent. */
void *hashmap_remove(Hashmap *m, const char *key);
/* Number of keys. */
size_t hashmap_size(const Hashmap *m);
