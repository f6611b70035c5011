/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>

#include "alloc.h"
#include "json-writer.h"
#include "tap.h"

/* s as one JSON string value. */
static char *string_json(const char *s)
{
	JsonWriter w = {};
	json_writer_string(&w, s);
	return json_writer_finish(&w);
}

static void test_escaping(void)
{
	static const struct {
		const char *in, *out, *what;
	} cases[] = {
		{"", "\"\"", "empty"},
		{"plain text/1.0", "\"plain text/1.0\"", "printable ASCII as is, '/' too"},
		{"a\"b\\c", "\"a\\\"b\\\\c\"", "quote and backslash"},
		{"\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"", "the short escapes"},
		{"\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"",
		 "other control characters as \\u00XX; DEL as is"},
		{"<a href=x&y>", "\"\\u003ca href=x\\u0026y\\u003e\"",
		 "HTML-safe like Go: <, >, &"},
		{"caf\xc3\xa9 \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", "UTF-8 as is"},
		{"\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\"", "line and paragraph separators"},
		{"a\xff"
		 "b",
		 "\"a\\ufffdb\"", "an invalid byte as \\ufffd"},
		{"\xc0\xaf", "\"\\ufffd\\ufffd\"", "an overlong form: one \\ufffd per byte"},
		{"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "a surrogate: one \\ufffd per byte"},
		{"\xe2\x80", "\"\\ufffd\\ufffd\"", "a truncated sequence at the end"},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ char *got = string_json(cases[i].in);
		is_str(got, cases[i].out, "string: %s", cases[i].what);
	}
}

static void test_shapes(void)
{
	JsonWriter w = {};

	json_writer_object_begin(&w);
	json_writer_object_end(&w);
	_cleanup_free_ char *empty = json_writer_finish(&w);
	is_str(empty, "{}", "empty object");

	json_writer_object_begin(&w);
	json_writer_key(&w, "name");
	json_writer_string(&w, "pv-1");
	json_writer_key(&w, "size");
	json_writer_uint(&w, UINT64_MAX);
	json_writer_key(&w, "delta");
	json_writer_int(&w, INT64_MIN);
	json_writer_key(&w, "ro");
	json_writer_bool(&w, true);
	json_writer_key(&w, "rw");
	json_writer_bool(&w, false);
	json_writer_key(&w, "none");
	json_writer_null(&w);
	json_writer_key(&w, "also none");
	json_writer_string(&w, NULL);
	json_writer_key(&w, "list");
	json_writer_array_begin(&w);
	json_writer_int(&w, 0);
	json_writer_array_begin(&w);
	json_writer_array_end(&w);
	json_writer_object_begin(&w);
	json_writer_key(&w, "<k>");
	json_writer_array_begin(&w);
	json_writer_string(&w, "x");
	json_writer_array_end(&w);
	json_writer_object_end(&w);
	json_writer_int(&w, -1);
	json_writer_array_end(&w);
	json_writer_key(&w, "after");
	json_writer_object_begin(&w);
	json_writer_object_end(&w);
	json_writer_object_end(&w);
	_cleanup_free_ char *all = json_writer_finish(&w);
	is_str(all,
	       "{\"name\":\"pv-1\",\"size\":18446744073709551615,\"delta\":-9223372036854775808,"
	       "\"ro\":true,\"rw\":false,\"none\":null,\"also none\":null,"
	       "\"list\":[0,[],{\"\\u003ck\\u003e\":[\"x\"]},-1],\"after\":{}}",
	       "compact: commas between members and elements only, nesting, every kind of value");

	json_writer_array_begin(&w);
	json_writer_bool(&w, true);
	json_writer_array_end(&w);
	_cleanup_free_ char *again = json_writer_finish(&w);
	is_str(again, "[true]", "finish leaves the writer ready for a new text");

	_cleanup_free_ char *nothing = json_writer_finish(&w);
	is_str(nothing, "", "nothing written: \"\"");
}

int main(void)
{
	test_escaping();
	test_shapes();
	return tap_done();
}
