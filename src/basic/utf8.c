/* SPDX-License-Identifier: Apache-2.0 */
#include "strbuf.h"
#include "utf8.h"

size_t utf8_decode(const char *str, size_t n, uint32_t *ret_rune)
{
	const unsigned char *s = (const unsigned char *)str;
	uint32_t r;
	size_t len;

	if (s[0] < 0x80) {
		*ret_rune = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		r = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		r = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		r = s[0] & 0x07;
	} else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		r = (r << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && r < 0x800) || (len == 4 && r < 0x10000) || r > 0x10ffff ||
	    (r >= 0xd800 && r <= 0xdfff))
		return 0;
	*ret_rune = r;
	return len;
}

bool utf8_valid(const char *s, size_t len)
{
	uint32_t rune;

	for (size_t i = 0; i < len;) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		size_t n = utf8_decode(s + i, len - i, &rune);
		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

char *utf8_replace_invalid(const char *s, size_t len, size_t *ret_len)
{
	StrBuf b = {};
	size_t done = 0;

	for (size_t i = 0; s && i < len;) {
		uint32_t rune;
		size_t n = utf8_decode(s + i, len - i, &rune);
		if (n > 0) {
			i += n;
			continue;
		}
		strbuf_add(&b, s + done, i - done);
		strbuf_adds(&b, "\xef\xbf\xbd");
		done = ++i;
	}
	if (!b.s)
		return NULL;
	strbuf_add(&b, s + done, len - done);
	*ret_len = b.len;
	return b.s;
}
