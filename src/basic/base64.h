/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/* The n bytes at data in base64 (RFC 4648 section 4: + and /, padded with =), as Go's
 * base64.StdEncoding writes it; a new string. */
char *base64_encode(const void *data, size_t n);
