/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "wire-check.h"

#define MAX_DEPTH 32

enum {
	WIRE_VARINT = 0,
	WIRE_FIXED64 = 1,
	WIRE_LEN = 2,
	WIRE_FIXED32 = 5
};

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret)
{
	uint64_t v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return true;
		}
	}
	return false;
}

static char *join_name(const char *prefix, const char *name)
{
	return prefix ? xasprintf("%s.%s", prefix, name) : xstrdup(name);
}

static int check(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
		 const char *prefix, unsigned depth, char **ret_field)
{
	if (depth > MAX_DEPTH)
		return 0;
	while (p < end) {
		uint64_t tag, len;
		if (!read_varint(&p, end, &tag))
			return 0;
		switch (tag & 7) {
		case WIRE_VARINT:
			if (!read_varint(&p, end, &len))
				return 0;
			continue;
		case WIRE_FIXED64:
			p += 8;
			continue;
		case WIRE_FIXED32:
			p += 4;
			continue;
		case WIRE_LEN:
			break;
		default:
			return 0; /* groups: the decoder judges */
		}
		if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
			return 0;
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
		if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, len)) {
			*ret_field = join_name(prefix, f->name);
			return -EINVAL;
		}
		if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
			_cleanup_free_ char *name = join_name(prefix, f->name);
			int r = check(f->descriptor, p, p + len, name, depth + 1, ret_field);
			if (r < 0)
				return r;
		}
		p += len;
	}
	return 0;
}

int wire_strings_check(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
		       char **ret_field)
{
	return check(d, data, data + len, NULL, 0, ret_field);
}
