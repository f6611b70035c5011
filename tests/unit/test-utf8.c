/* SPDX-License-Identifier: Apache-2.0 */
#include "alloc.h"
#include "tap.h"
#include "utf8.h"

static size_t decode(const char *s, size_t n, uint32_t *rune)
{
	*rune = 0xdead;
	return utf8_decode(s, n, rune);
}

int main(void)
{
	uint32_t r;

	is_int(decode("A", 1, &r), 1, "ASCII: one byte");
	is_int(r, 'A', "ASCII rune");
	is_int(decode("\xc3\xa9", 2, &r), 2, "U+00E9: two bytes");
	is_int(r, 0xe9, "U+00E9 rune");
	is_int(decode("\xe2\x80\xa8", 3, &r), 3, "U+2028: three bytes");
	is_int(r, 0x2028, "U+2028 rune");
	is_int(decode("\xf0\x9f\x98\x80", 4, &r), 4, "U+1F600: four bytes");
	is_int(r, 0x1f600, "U+1F600 rune");
	is_int(decode("\xf4\x8f\xbf\xbf", 4, &r), 4, "U+10FFFF, the last code point");

	is_int(decode("\xc0\xaf", 2, &r), 0, "overlong '/' refused");
	is_int(decode("\xe0\x80\xaf", 3, &r), 0, "overlong three-byte form refused");
	is_int(decode("\xf0\x80\x80\xaf", 4, &r), 0, "overlong four-byte form refused");
	is_int(decode("\xed\xa0\x80", 3, &r), 0, "surrogate U+D800 refused");
	is_int(decode("\xf4\x90\x80\x80", 4, &r), 0, "past U+10FFFF refused");
	is_int(decode("\xe2\x80", 2, &r), 0, "truncated sequence refused");
	is_int(decode("\xe2\x80\xa8", 2, &r), 0, "a sequence longer than what may be read refused");
	is_int(decode("\x80", 1, &r), 0, "lone continuation byte refused");
	is_int(decode("\xc3(", 2, &r), 0, "bad continuation byte refused");
	is_int(r, 0xdead, "the rune is left alone when invalid");

	size_t len = 0;
	ok(utf8_replace_invalid("caf\xc3\xa9", 5, &len) == NULL, "valid text: NULL, use it as is");
	ok(utf8_replace_invalid(NULL, 0, &len) == NULL, "no text: NULL");
	_cleanup_free_ char *a = utf8_replace_invalid("a\xff"
						      "b\xe2\x80",
						      5, &len);
	is_str(a,
	       "a\xef\xbf\xbd"
	       "b\xef\xbf\xbd\xef\xbf\xbd",
	       "each byte that starts no valid sequence becomes U+FFFD, as Go reads it");
	is_int(len, 11, "its length");
	_cleanup_free_ char *z = utf8_replace_invalid("\xff\0x", 3, &len);
	ok(len == 5 && memcmp(z, "\xef\xbf\xbd\0x", 5) == 0, "NUL bytes kept");

	ok(utf8_valid("", 0), "utf8_valid: empty text is valid");
	ok(utf8_valid("pvc-caf\xc3\xa9 \xf0\x9f\x98\x80", 14), "utf8_valid: ASCII, 2 and 4 bytes");
	ok(!utf8_valid("pvc-\xff", 5), "utf8_valid: a stray byte refused");
	ok(!utf8_valid("\xc0\xaf", 2), "utf8_valid: overlong form refused");
	ok(!utf8_valid("\xed\xa0\x80", 3), "utf8_valid: surrogate refused");
	ok(!utf8_valid("ok\xe2\x80", 4), "utf8_valid: sequence cut at the end refused");
	ok(utf8_valid("a\0b", 3),
	   "utf8_valid: NUL is a valid code point (the wire check refuses it)");
	return tap_done();
}
