/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The pool: volumes as sparse files in one directory, with their metadata beside them. */
typedef struct Pool Pool;

typedef struct PoolConfig {
	const char *path;  /* the pool directory; created if missing */
	uint64_t capacity; /* bytes; 0: the free space of the pool's filesystem */
	const char *zone;  /* topology zone of this pool */
} PoolConfig;

/* Opens (and on first use lays out) a pool. Returns -ENOTDIR, -EACCES, ... when the directory
 * cannot hold a pool. */
int pool_open(const PoolConfig *config, Pool **ret);
void pool_close(Pool *p);

/* 0 when the pool can serve requests now, else a negative errno (directory gone, read-only). */
int pool_probe(Pool *p);

const char *pool_path(const Pool *p);
