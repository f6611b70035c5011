/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "base64.h"
#include "digest.h"
#include "tap.h"

/* Whether the process maps a file whose name starts with prefix. */
static bool mapped(const char *prefix)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];

	while (f && fgets(line, sizeof(line), f)) {
		const char *slash = strrchr(line, '/');
		if (slash && strncmp(slash + 1, prefix, strlen(prefix)) == 0)
			return true;
	}
	return false;
}

static void sha256(const char *data, const char *want, const char *what)
{
	char hex[2 * DIGEST_SHA256_LEN + 1];

	digest_sha256_hex(data, strlen(data), hex);
	is_str(hex, want, "SHA-256 of %s", what);
}

static void md5(const char *data, const char *want, const char *what)
{
	unsigned char md[DIGEST_MD5_LEN];

	digest_md5(data, strlen(data), md);
	_cleanup_free_ char *b64 = base64_encode(md, sizeof(md));
	is_str(b64, want, "MD5 (base64, as Content-MD5) of %s", what);
}

int main(void)
{
	ok(!mapped("libcrypto."), "libcrypto is not mapped before the first digest");
	/* FIPS 180-2's examples; RFC 1321's. */
	sha256("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "nothing");
	sha256("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
	sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "448 bits");
	ok(mapped("libcrypto."), "libcrypto is mapped after it");
	md5("", "1B2M2Y8AsgTpgAmY7PhCfg==", "nothing");
	md5("abc", "kAFQmDzST7DWlj99KOF/cg==", "abc");
	return tap_done();
}
