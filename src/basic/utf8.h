/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid UTF-8 sequence at s, of which n > 0 bytes may be read, storing its
 * code point in *ret_rune; 0 when invalid. The rules of Go's utf8.DecodeRune: no overlong
 * forms, no surrogates, nothing past U+10FFFF. */
size_t utf8_decode(const char *s, size_t n, uint32_t *ret_rune);

/* Whether the len bytes at s are valid UTF-8 (utf8_decode()'s rules): what a protobuf string
 * field must hold. O(len). */
bool utf8_valid(const char *s, size_t len);

/* A copy of the len bytes at s with each byte that starts no valid sequence replaced by U+FFFD
 * (as Go's decoder reads it), its length in *ret_len; NULL when s is valid UTF-8 already. */
char *utf8_replace_invalid(const char *s, size_t len, size_t *ret_len);
