/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-writer.h"
#include "utf8.h"

static void escape_string(StrBuf *b, const char *str)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(str);

	strbuf_add(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)str[i];
		uint32_t rune;
		size_t len = utf8_decode(str + i, n - i, &rune);
		char esc[7] = "\\";

		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			strbuf_add(b, esc, 2);
		} else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
			esc[1] = c == '\b'   ? 'b'
				 : c == '\f' ? 'f'
				 : c == '\n' ? 'n'
				 : c == '\r' ? 'r'
					     : 't';
			strbuf_add(b, esc, 2);
		} else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xf];
			strbuf_add(b, esc, 6);
		} else if (len == 0) {
			strbuf_adds(b, "\\ufffd");
			len = 1;
		} else if (rune == 0x2028 || rune == 0x2029)
			strbuf_adds(b, rune == 0x2028 ? "\\u2028" : "\\u2029");
		else
			strbuf_add(b, str + i, len);
		i += len;
	}
	strbuf_add(b, "\"", 1);
}

/* Before any value: the comma after a previous one (not after a key), and mark it. */
static void value_start(JsonWriter *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth == 0)
		return;
	uint64_t bit = UINT64_C(1) << (w->depth - 1);
	if (w->has_member & bit)
		strbuf_add(&w->out, ",", 1);
	w->has_member |= bit;
}

static void open_container(JsonWriter *w, char c)
{
	value_start(w);
	if (w->depth >= JSON_WRITER_DEPTH_MAX)
		abort(); /* a caller's bug: nothing this deep is ever written */
	w->depth++;
	w->has_member &= ~(UINT64_C(1) << (w->depth - 1));
	strbuf_add(&w->out, &c, 1);
}

static void close_container(JsonWriter *w, char c)
{
	if (w->depth == 0)
		abort(); /* a caller's bug: more ends than begins */
	w->depth--;
	strbuf_add(&w->out, &c, 1);
}

void json_writer_object_begin(JsonWriter *w)
{
	open_container(w, '{');
}

void json_writer_object_end(JsonWriter *w)
{
	close_container(w, '}');
}

void json_writer_array_begin(JsonWriter *w)
{
	open_container(w, '[');
}

void json_writer_array_end(JsonWriter *w)
{
	close_container(w, ']');
}

void json_writer_key(JsonWriter *w, const char *key)
{
	value_start(w);
	escape_string(&w->out, key);
	strbuf_add(&w->out, ":", 1);
	w->after_key = true;
}

void json_writer_string(JsonWriter *w, const char *s)
{
	if (!s) {
		json_writer_null(w);
		return;
	}
	value_start(w);
	escape_string(&w->out, s);
}

/* A value written as it is: a number or a literal. */
static void add_raw(JsonWriter *w, const char *text)
{
	value_start(w);
	strbuf_adds(&w->out, text);
}

void json_writer_int(JsonWriter *w, int64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRId64, v);
	add_raw(w, s);
}

void json_writer_uint(JsonWriter *w, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, v);
	add_raw(w, s);
}

void json_writer_bool(JsonWriter *w, bool v)
{
	add_raw(w, v ? "true" : "false");
}

void json_writer_null(JsonWriter *w)
{
	add_raw(w, "null");
}

char *json_writer_finish(JsonWriter *w)
{
	char *s = strbuf_steal(&w->out);
	*w = (JsonWriter){};
	return s;
}
