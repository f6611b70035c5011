/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "hash-util.h"

#define FNV1A64_PRIME UINT64_C(0x100000001b3)

uint64_t fnv1a64_update(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * FNV1A64_PRIME;
	return h;
}

uint64_t fnv1a64_string(const char *s, uint64_t seed)
{
	return fnv1a64_update(FNV1A64_OFFSET_BASIS ^ seed, s, strlen(s));
}

uint64_t hash_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}
