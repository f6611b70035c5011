/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "digest.h"
#include "dlopen-util.h"
#include "log.h"

#define LIBCRYPTO "libcrypto.so.3"

static struct {
	__typeof__(EVP_Digest) *Digest;
	__typeof__(EVP_sha256) *sha256;
	__typeof__(EVP_md5) *md5;
} evp;

static const DlSym evp_syms[] = {
	DL_SYM(evp, Digest, "EVP_"),
	DL_SYM(evp, sha256, "EVP_"),
	DL_SYM(evp, md5, "EVP_"),
};

static DlLibrary crypto_library = DL_LIBRARY(LIBCRYPTO, evp_syms);

static void digest(const void *data, size_t len, bool md5, unsigned char *ret)
{
	_cleanup_free_ char *error = NULL;
	unsigned n = 0, want = md5 ? DIGEST_MD5_LEN : DIGEST_SHA256_LEN;

	if (dl_library_load(&crypto_library, &error) < 0) {
		log_error("%s", error);
		abort();
	}
	/* Only an allocation inside libcrypto fails here. */
	if (!evp.Digest(data, len, ret, &n, md5 ? evp.md5() : evp.sha256(), NULL) || n != want) {
		log_error("libcrypto: the %s of %zu bytes failed", md5 ? "MD5" : "SHA-256", len);
		abort();
	}
}

void digest_sha256(const void *data, size_t len, unsigned char ret[static DIGEST_SHA256_LEN])
{
	digest(data, len, false, ret);
}

void digest_sha256_hex(const void *data, size_t len, char ret[static 2 * DIGEST_SHA256_LEN + 1])
{
	unsigned char md[DIGEST_SHA256_LEN];

	digest_sha256(data, len, md);
	for (unsigned i = 0; i < DIGEST_SHA256_LEN; i++)
		snprintf(ret + 2 * i, 3, "%02x", md[i]);
}

void digest_md5(const void *data, size_t len, unsigned char ret[static DIGEST_MD5_LEN])
{
	digest(data, len, true, ret);
}
