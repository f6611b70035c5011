/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 and MD5 on libcrypto, loaded at the first digest, not linked: mapped at start it was
 * 1.4 MiB of the resident set of a daemon that never signs a request nor names a chunk. The
 * AWS clients load libcurl, which needs libcrypto, before their first digest, so a missing
 * libcrypto is found when they start. */
#pragma once

#include <stddef.h>

#define DIGEST_SHA256_LEN 32
#define DIGEST_MD5_LEN 16

/* The SHA-256 of the bytes. Loads libcrypto at the first call: aborts when it cannot, as an
 * allocation that fails does (logged at error level with the reason). */
void digest_sha256(const void *data, size_t len, unsigned char ret[static DIGEST_SHA256_LEN]);

/* The SHA-256 in lower-case hex, NUL-terminated; as digest_sha256(). */
void digest_sha256_hex(const void *data, size_t len, char ret[static 2 * DIGEST_SHA256_LEN + 1]);

/* The MD5 of the bytes (S3's Content-MD5); as digest_sha256(). */
void digest_md5(const void *data, size_t len, unsigned char ret[static DIGEST_MD5_LEN]);
