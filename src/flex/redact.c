/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "base64.h"
#include "redact.h"
#include "strbuf.h"
#include "strv.h"
#include "utf8.h"

#define REDACTED "(redacted)"

/* How a JSON encoder may escape a string beyond the minimum (" \ and control characters). */
enum {
	ESC_HTML = 1u << 0,  /* Go: <, >, & and U+2028, U+2029 as \u escapes */
	ESC_ASCII = 1u << 1, /* Python's default: every non-ASCII rune as \u (surrogate pairs) */
	ESC_SLASH = 1u << 2, /* PHP, jansson's option: / as \/ */
	ESC_UPPER = 1u << 3, /* jansson: upper-case hex digits in \u escapes */
};

static void add_u(StrBuf *b, uint32_t cp, unsigned flags)
{
	char esc[8];
	snprintf(esc, sizeof(esc), flags & ESC_UPPER ? "\\u%04X" : "\\u%04x", (unsigned)cp);
	strbuf_adds(b, esc);
}

/* The escape of the one character c, when it has one of its own. */
static const char *named_escape(char c, unsigned flags)
{
	switch (c) {
	case '"':
		return "\\\"";
	case '\\':
		return "\\\\";
	case '\b':
		return "\\b";
	case '\f':
		return "\\f";
	case '\n':
		return "\\n";
	case '\r':
		return "\\r";
	case '\t':
		return "\\t";
	case '/':
		return flags & ESC_SLASH ? "\\/" : NULL;
	default:
		return NULL;
	}
}

static bool needs_u(uint32_t cp, unsigned flags)
{
	if (cp < 0x20 || ((flags & ESC_ASCII) && cp >= 0x80))
		return true;
	return (flags & ESC_HTML) &&
	       (cp == '<' || cp == '>' || cp == '&' || cp == 0x2028 || cp == 0x2029);
}

/* The inside of the JSON string an encoder writes for s (no quotes). */
static char *json_escaped(const char *s, unsigned flags)
{
	size_t n = strlen(s);
	StrBuf b = {};

	for (size_t i = 0; i < n;) {
		uint32_t cp = (unsigned char)s[i];
		size_t len = cp < 0x80 ? 1 : utf8_decode(s + i, n - i, &cp);
		const char *named = named_escape(s[i], flags);
		bool invalid = len == 0;

		if (invalid) { /* not UTF-8: encoders write U+FFFD */
			cp = 0xfffd;
			len = 1;
		}
		if (named)
			strbuf_adds(&b, named);
		else if (needs_u(cp, flags) && cp > 0xffff) {
			add_u(&b, 0xd800 + ((cp - 0x10000) >> 10), flags);
			add_u(&b, 0xdc00 + ((cp - 0x10000) & 0x3ff), flags);
		} else if (needs_u(cp, flags))
			add_u(&b, cp, flags);
		else if (invalid)
			strbuf_adds(&b, "\xef\xbf\xbd");
		else
			strbuf_add(&b, s + i, len);
		i += len;
	}
	return strbuf_steal(&b);
}

static char *hex(const char *s, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t n = strlen(s);
	char *h = xnew0(char, 2 * n + 1);

	for (size_t i = 0; i < n; i++) {
		h[2 * i] = digits[(unsigned char)s[i] >> 4];
		h[2 * i + 1] = digits[(unsigned char)s[i] & 0xf];
	}
	return h;
}

/* Adds form (taking it) unless empty or there already. */
static void add_form(char ***forms, char *form)
{
	bool have = !*form;
	for (char **f = *forms; f && *f && !have; f++)
		have = strcmp(*f, form) == 0;
	if (have)
		free(form);
	else
		strv_append(forms, form);
}

/* The base64 of value in the standard and URL alphabets, padded and not. */
static void add_base64_forms(char ***forms, const char *b64)
{
	char *url = xstrdup(b64);
	for (char *p = url; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	add_form(forms, xstrdup(b64));
	add_form(forms, xstrndup(b64, strcspn(b64, "=")));
	add_form(forms, xstrndup(url, strcspn(url, "=")));
	add_form(forms, url);
	add_form(forms, json_escaped(b64, ESC_SLASH));
}

void flex_secret_forms(const char *value, char ***forms)
{
	static const unsigned escapes[] = {
		0, ESC_HTML, ESC_ASCII, ESC_SLASH, ESC_ASCII | ESC_UPPER, ESC_UPPER};

	if (!value || !*value)
		return;
	add_form(forms, xstrdup(value));
	_cleanup_free_ char *b64 = base64_encode(value, strlen(value));
	add_base64_forms(forms, b64);
	for (size_t i = 0; i < ELEMENTSOF(escapes); i++)
		add_form(forms, json_escaped(value, escapes[i]));
	_cleanup_free_ char *once = json_escaped(value, 0);
	add_form(forms, json_escaped(once, 0));
	add_form(forms, hex(value, false));
	add_form(forms, hex(value, true));
}

/* Marks in mask the bytes of text that the forms cover. */
static void mark_forms(const char *text, size_t len, bool truncated, char *const *forms, bool *mask)
{
	for (size_t k = 0; forms && forms[k]; k++) {
		const char *f = forms[k];
		size_t fl = strlen(f), off = 0;
		const char *hit;

		if (fl == 0)
			continue;
		while (off + fl <= len && (hit = memmem(text + off, len - off, f, fl))) {
			off = (size_t)(hit - text);
			memset(mask + off, true, fl);
			off++;
		}
		/* The head of a form where the capture ended: the rest of it was cut off. */
		for (size_t part = MIN(fl - 1, len); truncated && part > 0; part--)
			if (memcmp(text + len - part, f, part) == 0) {
				memset(mask + len - part, true, part);
				break;
			}
	}
}

char *flex_redact(const char *text, size_t len, bool truncated, char *const *forms)
{
	_cleanup_free_ bool *mask = xnew0(bool, len + 1);
	StrBuf b = {};

	if (!text)
		len = 0;
	mark_forms(text, len, truncated, forms, mask);
	for (size_t i = 0; i < len;) {
		if (!mask[i]) {
			size_t j = i;
			while (j < len && !mask[j])
				j++;
			strbuf_add(&b, text + i, j - i);
			i = j;
			continue;
		}
		while (i < len && mask[i])
			i++;
		strbuf_adds(&b, REDACTED);
	}
	return strbuf_steal(&b);
}
