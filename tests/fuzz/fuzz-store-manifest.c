/* SPDX-License-Identifier: Apache-2.0 */
/* A snapshot manifest read from the store (what a bucket anyone may write holds): read or
 * refused with a message, never a crash; one that is read holds its promises (aligned, in
 * order, inside the volume, hashes of 64 hex digits) and reads back the same once written. */
#include <string.h>

#include "fuzz.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	StoreManifest m = {}, again = {};
	char *error = NULL;

	if (store_manifest_parse((const char *)data, size, &m, &error) < 0) {
		FUZZ_ASSERT(error && *error);
		free(error);
		return 0;
	}
	FUZZ_ASSERT(store_id_valid(m.id) && m.volume_size > 0 && m.chunk_size > 0);
	for (size_t i = 0; i < m.n_chunks; i++) {
		const StoreChunkRef *c = &m.chunks[i];
		FUZZ_ASSERT(c->offset % m.chunk_size == 0 && c->offset < m.volume_size);
		FUZZ_ASSERT(c->length > 0 && c->offset + c->length <= m.volume_size);
		FUZZ_ASSERT(i == 0 || c->offset > m.chunks[i - 1].offset);
		FUZZ_ASSERT(strlen(c->hash) == 64);
	}
	char *text = store_manifest_format(&m);
	FUZZ_ASSERT(store_manifest_parse(text, strlen(text), &again, NULL) == 0);
	FUZZ_ASSERT(again.n_chunks == m.n_chunks && again.volume_size == m.volume_size);
	for (size_t i = 0; i < m.n_chunks; i++)
		FUZZ_ASSERT(strcmp(again.chunks[i].hash, m.chunks[i].hash) == 0);
	free(text);
	store_manifest_done(&again);
	store_manifest_done(&m);
	return 0;
}
