/* SPDX-License-Identifier: Apache-2.0 */
/* protobuf-c messages <-> JSON (jansson), driven by the message descriptors, following the
 * proto3 JSON mapping where it matters to a CLI user: field names as in the .proto, enums by
 * name, maps as objects, 64-bit integers as numbers, default values left out. */
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "pbjson.h"

static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
	size_t n = strlen(d->name);
	return d->n_fields == 2 && n > 5 && strcmp(d->name + n - 5, "Entry") == 0 &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

static const void *field_ptr(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return (const char *)m + f->offset;
}

static json_t *scalar_to_json(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_integer(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_integer((json_int_t) * (const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return json_real(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_real(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *v =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		return v ? json_string(v->name) : json_integer(*(const int *)p);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return json_string(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		return json_stringn((const char *)b->data, b->len);
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		return sub ? pbjson_from_message(sub) : json_null();
	}
	}
	return json_null();
}

static bool scalar_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return *(const uint32_t *)p == 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p == 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)p == 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p == 0;
	case PROTOBUF_C_TYPE_BOOL:
		return !*(const protobuf_c_boolean *)p;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p == NULL;
	}
	return true;
}

static size_t scalar_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static json_t *repeated_to_json(const ProtobufCFieldDescriptor *f, const void *p, size_t n)
{
	const char *arr = *(char *const *)p;
	bool map = f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor);
	json_t *out = map ? json_object() : json_array();

	for (size_t i = 0; i < n; i++) {
		const void *elem = arr + i * scalar_size(f->type);
		if (map) {
			const ProtobufCMessage *e = *(ProtobufCMessage *const *)elem;
			const ProtobufCMessageDescriptor *d = f->descriptor;
			const char *key = *(char *const *)field_ptr(e, &d->fields[0]);
			json_object_set_new(
				out, key ? key : "",
				scalar_to_json(&d->fields[1], field_ptr(e, &d->fields[1])));
		} else
			json_array_append_new(out, scalar_to_json(f, elem));
	}
	return out;
}

/* google.protobuf.Int64Value and friends: their value is the point, zero included. */
static bool is_wrapper(const ProtobufCMessageDescriptor *d)
{
	size_t n = strlen(d->name);
	return strncmp(d->name, "google.protobuf.", 16) == 0 && n > 5 &&
	       strcmp(d->name + n - 5, "Value") == 0;
}

json_t *pbjson_from_message(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *obj = json_object();
	bool wrapper = is_wrapper(d);

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = field_ptr(m, f);

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			if (n > 0)
				json_object_set_new(obj, f->name, repeated_to_json(f, p, n));
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t which =
				*(const uint32_t *)((const char *)m + f->quantifier_offset);
			if (which != f->id)
				continue;
		} else if (!wrapper && scalar_is_default(f, p))
			continue;

		json_object_set_new(obj, f->name, scalar_to_json(f, p));
	}
	return obj;
}

/* JSON -> message */

static int set_error(const char *path, const char *what, char **ret_error)
{
	if (ret_error && !*ret_error)
		*ret_error = xasprintf("%s: %s", path, what);
	return -EINVAL;
}

static int json_to_message_at(const json_t *j, const ProtobufCMessageDescriptor *d,
			      const char *path, ProtobufCMessage **ret, char **ret_error);

static int scalar_from_json(const ProtobufCFieldDescriptor *f, const json_t *j, void *p,
			    const char *path, char **ret_error)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		if (!json_is_integer(j))
			return set_error(path, "want an integer", ret_error);
		*(int32_t *)p = (int32_t)json_integer_value(j);
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (!json_is_integer(j))
			return set_error(path, "want an integer", ret_error);
		*(int64_t *)p = json_integer_value(j);
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		if (!json_is_number(j))
			return set_error(path, "want a number", ret_error);
		*(float *)p = (float)json_number_value(j);
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		if (!json_is_number(j))
			return set_error(path, "want a number", ret_error);
		*(double *)p = json_number_value(j);
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(j))
			return set_error(path, "want true or false", ret_error);
		*(protobuf_c_boolean *)p = json_is_true(j);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: {
		/* proto3 enums are open: a number keeps its value even when it has no name. */
		if (json_is_integer(j)) {
			*(int *)p = (int)json_integer_value(j);
			return 0;
		}
		const ProtobufCEnumValue *v = NULL;
		if (json_is_string(j))
			v = protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
									 json_string_value(j));
		if (!v)
			return set_error(path, "not a value of this enum", ret_error);
		*(int *)p = v->value;
		return 0;
	}

	case PROTOBUF_C_TYPE_STRING:
		if (!json_is_string(j))
			return set_error(path, "want a string", ret_error);
		*(char **)p = xstrdup(json_string_value(j));
		return 0;
	case PROTOBUF_C_TYPE_BYTES: {
		if (!json_is_string(j))
			return set_error(path, "want a string", ret_error);
		ProtobufCBinaryData *b = p;
		b->len = json_string_length(j);
		b->data = xmalloc(b->len);
		memcpy(b->data, json_string_value(j), b->len);
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		return json_to_message_at(j, f->descriptor, path, (ProtobufCMessage **)p,
					  ret_error);
	}
	return set_error(path, "unsupported field type", ret_error);
}

static int map_from_json(const ProtobufCFieldDescriptor *f, const json_t *j, char **arr, size_t *n,
			 const char *path, char **ret_error)
{
	const ProtobufCMessageDescriptor *d = f->descriptor;
	const char *key;
	json_t *value;

	if (!json_is_object(j))
		return set_error(path, "want an object", ret_error);
	ProtobufCMessage **entries = xnew0(ProtobufCMessage *, json_object_size(j));
	*arr = (char *)entries;
	json_object_foreach ((json_t *)j, key, value) {
		ProtobufCMessage *e = xmalloc(d->sizeof_message);
		d->message_init(e);
		entries[(*n)++] = e;
		*(char **)((char *)e + d->fields[0].offset) = xstrdup(key);
		_cleanup_free_ char *sub = xasprintf("%s.%s", path, key);
		int r = scalar_from_json(&d->fields[1], value, (char *)e + d->fields[1].offset, sub,
					 ret_error);
		if (r < 0)
			return r;
	}
	return 0;
}

static int repeated_from_json(const ProtobufCFieldDescriptor *f, const json_t *j, void *p,
			      size_t *n, const char *path, char **ret_error)
{
	char **arr = p;

	if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor))
		return map_from_json(f, j, arr, n, path, ret_error);
	if (!json_is_array(j))
		return set_error(path, "want an array", ret_error);
	*arr = xcalloc(json_array_size(j), scalar_size(f->type));
	for (size_t i = 0; i < json_array_size(j); i++) {
		_cleanup_free_ char *sub = xasprintf("%s[%zu]", path, i);
		int r = scalar_from_json(f, json_array_get(j, i), *arr + i * scalar_size(f->type),
					 sub, ret_error);
		if (r < 0)
			return r;
		(*n)++;
	}
	return 0;
}

static int json_to_message_at(const json_t *j, const ProtobufCMessageDescriptor *d,
			      const char *path, ProtobufCMessage **ret, char **ret_error)
{
	const char *key;
	json_t *value;
	int r = 0;

	if (!json_is_object(j))
		return set_error(path, "want an object", ret_error);
	ProtobufCMessage *m = xmalloc(d->sizeof_message);
	d->message_init(m);
	json_object_foreach ((json_t *)j, key, value) {
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(d, key);
		_cleanup_free_ char *sub = path[0] ? xasprintf("%s.%s", path, key) : xstrdup(key);
		if (!f) {
			r = set_error(sub, "no such field", ret_error);
			break;
		}
		void *p = (char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED)
			r = repeated_from_json(f, value, p,
					       (size_t *)((char *)m + f->quantifier_offset), sub,
					       ret_error);
		else {
			r = scalar_from_json(f, value, p, sub, ret_error);
			if (r == 0 && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
				*(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
		}
		if (r < 0)
			break;
	}
	if (r < 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		return r;
	}
	*ret = m;
	return 0;
}

int pbjson_to_message(const json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		      char **ret_error)
{
	return json_to_message_at(j, d, "", ret, ret_error);
}
