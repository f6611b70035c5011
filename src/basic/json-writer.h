/* SPDX-License-Identifier: Apache-2.0 */
/* Compact JSON text written in order, byte for byte what Go's encoding/json writes for the same
 * values (volplug speaks to programs written for Kubernetes, which is Go): strings HTML-safe
 * (<, >, & as \u003c...), U+2028/U+2029 escaped, invalid UTF-8 as \ufffd. jansson cannot do
 * that (it writes <, >, & and U+2028 as they are and refuses invalid UTF-8), hence this.
 *
 *     JsonWriter w = {};
 *     json_writer_object_begin(&w);
 *     json_writer_key(&w, "size");
 *     json_writer_uint(&w, 4096);
 *     json_writer_object_end(&w);
 *     char *text = json_writer_finish(&w);      {"size":4096}
 *
 * The caller keeps the shape right: a key before each member of an object, every container
 * ended, at most JSON_WRITER_DEPTH_MAX deep (deeper aborts). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "strbuf.h"

#define JSON_WRITER_DEPTH_MAX 64

typedef struct JsonWriter {
	StrBuf out;
	unsigned depth;
	uint64_t has_member; /* bit d-1: the open container at depth d has a value already */
	bool after_key;
} JsonWriter;

void json_writer_object_begin(JsonWriter *w);
void json_writer_object_end(JsonWriter *w);
void json_writer_array_begin(JsonWriter *w);
void json_writer_array_end(JsonWriter *w);
/* The name of the next member of the open object. */
void json_writer_key(JsonWriter *w, const char *key);
/* A string value; NULL writes null. */
void json_writer_string(JsonWriter *w, const char *s);
void json_writer_int(JsonWriter *w, int64_t v);
void json_writer_uint(JsonWriter *w, uint64_t v);
void json_writer_bool(JsonWriter *w, bool v);
void json_writer_null(JsonWriter *w);
/* Hands the text over (never NULL) and empties w for reuse. */
char *json_writer_finish(JsonWriter *w);
