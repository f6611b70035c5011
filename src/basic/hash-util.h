/* SPDX-License-Identifier: Apache-2.0 */
/* Fast non-cryptographic hashes: no defence against chosen collisions. Their values name
 * things on disk (pool IDs, Flexvolume records), so they never change. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)

/* FNV-1a 64 continued from h over n bytes of data; start from FNV1A64_OFFSET_BASIS. */
uint64_t fnv1a64_update(uint64_t h, const void *data, size_t n);

/* FNV-1a 64 of the string s (its NUL not included), the offset basis XORed with seed first
 * (seed 0: plain FNV-1a). */
uint64_t fnv1a64_string(const char *s, uint64_t seed);

/* murmur3's 64-bit finaliser (fmix64): each input bit flips about half of the output bits, so
 * any bits of the result, the low ones too, spread evenly. */
uint64_t hash_mix64(uint64_t h);
