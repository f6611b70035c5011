/* SPDX-License-Identifier: Apache-2.0 */
/* What the backends' JSON records (the pool's metadata, use records) share: strict reads of
 * one field, and the one way they are written (indented, keys sorted). */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* The string at key, or NULL when it is absent or not a string. */
const char *meta_json_string(json_t *o, const char *key);

/* The non-negative integer at key: 0, or -EBADMSG when it is absent or anything else. */
int meta_json_u64(json_t *o, const char *key, uint64_t *ret);

/* o as text (malloc'ed, NUL-terminated); drops the reference to o. */
char *meta_json_dump(json_t *o, size_t *ret_len);
