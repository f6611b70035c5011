/* SPDX-License-Identifier: Apache-2.0 */
/* What the store's files share. */
#pragma once

#include <stdarg.h>

#include "error-util.h"
#include "store.h"

struct Store {
	/* Set at creation, not changed after. */
	S3Client *s3;
	char *prefix; /* "" or ending in '/' */
	char *node;
	size_t chunk_size;
	unsigned parallel;
	int zstd_level;
	usec_t lease, grace;
	size_t multipart_threshold;
};

/* The keys of a chunk, a manifest, an intent; new strings. */
char *store_chunk_key(const Store *s, const char *hash);
char *store_manifest_key(const Store *s, const char *id);
char *store_intent_key(const Store *s, const char *id);

/* Loads libzstd, once for the process: 0, or -ENOENT/-ENOSYS with *ret_error naming it. */
int store_zstd_load(char **ret_error);

/* Metrics (store-metrics.c). store_metrics_init() makes every series (at 0) once; store_new()
 * calls it. */
void store_metrics_init(void);
/* A chunk of an upload done: bytes read, and what became of it. */
void store_count_chunk(uint64_t read, bool zero, bool sent, uint64_t sent_len);
void store_count_upload_start(void);
void store_count_upload_end(int r, const char *message);
void store_count_collection(int r, uint64_t chunks_deleted, const char *message);
/* Keeps message as the last error of kind (r < 0; NULL message: strerror). */
void store_count_error(StoreErrorKind kind, int r, const char *message);
