/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

/* Each returns 0 and writes *ret, or -EINVAL (not a number, trailing junk) / -ERANGE. */
int parse_uint64(const char *s, uint64_t *ret);
int parse_uint32(const char *s, uint32_t *ret);
int parse_int64(const char *s, int64_t *ret);

/* "10G", "512Mi", "1.5T", "4096": base-1024 units K M G T P E, an optional "i" or "iB"/"B"
 * suffix. */
int parse_size(const char *s, uint64_t *ret);

/* Octal file mode "0600" / "660", at most 07777. */
int parse_mode(const char *s, uint32_t *ret);
