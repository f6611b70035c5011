/* SPDX-License-Identifier: Apache-2.0 */
/* The hashes name things on disk: every value here must stay what it is. */
#include <string.h>

#include "hash-util.h"
#include "tap.h"

/* How a Flexvolume record is named: its volume ID, then 0xff and the target path. */
static uint64_t record_hash(const char *volume_id, const char *path)
{
	uint64_t h = fnv1a64_string(volume_id, 0);
	if (path) {
		h = fnv1a64_update(h, "\xff", 1);
		h = fnv1a64_update(h, path, strlen(path));
	}
	return h;
}

int main(void)
{
	/* The published FNV-1a 64 test vectors. */
	is_int(fnv1a64_string("", 0), 0xcbf29ce484222325ULL, "FNV-1a of \"\" is the offset basis");
	is_int(fnv1a64_string("a", 0), 0xaf63dc4c8601ec8cULL, "FNV-1a of \"a\"");
	is_int(fnv1a64_string("foobar", 0), 0x85944171f73967e8ULL, "FNV-1a of \"foobar\"");
	is_int(fnv1a64_update(fnv1a64_update(FNV1A64_OFFSET_BASIS, "foo", 3), "bar", 3),
	       0x85944171f73967e8ULL, "updates in pieces hash as the whole");
	ok(fnv1a64_update(FNV1A64_OFFSET_BASIS, "a\0b", 3) != fnv1a64_string("a", 0),
	   "update hashes NUL bytes too");

	is_int(fnv1a64_string("data", 0), 0x855b556730a34a05ULL, "seed 0: plain FNV-1a");
	is_int(fnv1a64_string("data", 1), 0x212d8d601e544b6cULL, "seed 1: the basis XORed with 1");

	/* The pool's IDs are hash_mix64(fnv1a64_string(name, slot)): vol-a82daff2fec651b7 is
	 * "data"'s volume ID. */
	is_int(hash_mix64(fnv1a64_string("data", 0)), 0xa82daff2fec651b7ULL, "pool ID of \"data\"");
	is_int(hash_mix64(fnv1a64_string("data", 1)), 0xf6caf8e6b6c55012ULL, "slot 1 of \"data\"");
	is_int(hash_mix64(fnv1a64_string("data", 3)), 0x7f3d0f82597796d7ULL, "slot 3 of \"data\"");
	is_int(hash_mix64(0), 0, "the finaliser keeps 0");

	/* Record file names of the Flexvolume host. */
	is_int(record_hash("vol-a82daff2fec651b7", NULL), 0xcc013ed4689eaa84ULL,
	       "record of a volume");
	is_int(record_hash("vol-a82daff2fec651b7", "/var/lib/kubelet/pods/p/volumes/x"),
	       0x0842d3f100fee5f3ULL, "record of a publication");
	is_int(record_hash("node/with slash", NULL), 0x7d87ef848930fd4bULL,
	       "folder of a node whose ID is no plain name");
	return tap_done();
}
