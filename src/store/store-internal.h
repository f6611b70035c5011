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

/* The SHA-256 of len bytes at data, lower-case hex. */
void store_sha256_hex(const void *data, size_t len, char out[65]);
