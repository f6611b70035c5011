/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "request-check.h"
#include "utf8.h"

/* CSI's messages nest a few levels; deeper is not a CSI request. */
#define MAX_DEPTH 16
/* Field paths in messages ("volume_capabilities[0].mount.fs_type"); CSI's are short. */
#define PATH_MAX_LEN 256

typedef enum Pass {
	PASS_COUNTS, /* map entry counts only: O(fields), whatever the maps hold */
	PASS_CONTENT /* bytes and UTF-8: O(size of the request) */
} Pass;

typedef struct MapEntry {
	ProtobufCMessage base;
	char *key;
	char *value;
} MapEntry;

/* protobuf-c has no map type: a map field is a repeated message of a "key" and a "value"
 * field. Only string -> string maps occur in CSI. */
static bool is_string_map(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *e = f->descriptor;

	return f->type == PROTOBUF_C_TYPE_MESSAGE && f->label == PROTOBUF_C_LABEL_REPEATED &&
	       e->n_fields == 2 && strcmp(e->fields[0].name, "key") == 0 &&
	       strcmp(e->fields[1].name, "value") == 0 &&
	       e->fields[0].type == PROTOBUF_C_TYPE_STRING &&
	       e->fields[1].type == PROTOBUF_C_TYPE_STRING;
}

/* Whether f holds a value in m: a oneof member only when it is the one set (the members
 * share their storage). */
static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
		return true;
	return *(const uint32_t *)((const char *)m + f->quantifier_offset) == f->id;
}

static int string_check(const char *s, const char *path, char **ret_error)
{
	if (s && !utf8_valid(s, strlen(s)))
		return errorf(ret_error, -EINVAL, "%s: not valid UTF-8", path);
	return 0;
}

static int map_check(Pass pass, const ProtobufCFieldDescriptor *f, const MapEntry *const *e,
		     size_t n, const char *path, char **ret_error)
{
	bool secrets = strcmp(f->name, "secrets") == 0;
	size_t max_bytes = secrets ? CSI_SECRETS_MAX_BYTES : CSI_MAP_MAX_BYTES, bytes = 0;

	if (n > CSI_MAP_MAX_ENTRIES)
		return errorf(ret_error, -EINVAL, "%s: at most %d entries, got %zu", path,
			      CSI_MAP_MAX_ENTRIES, n);
	if (pass == PASS_COUNTS)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = e[i]->key ?: "", *v = e[i]->value ?: "";
		size_t kl = strlen(k), vl = strlen(v);

		bytes += kl + vl;
		if (bytes > max_bytes)
			return errorf(ret_error, -EINVAL,
				      "%s: at most %zu bytes of keys and values, got more", path,
				      max_bytes);
		if (!utf8_valid(k, kl))
			return errorf(ret_error, -EINVAL, "%s: key #%zu is not valid UTF-8", path,
				      i + 1);
		/* named by its key when short (a secret's value is never quoted) */
		if (!utf8_valid(v, vl) && kl <= 64)
			return errorf(ret_error, -EINVAL, "%s[%s]: not valid UTF-8", path, k);
		if (!utf8_valid(v, vl))
			return errorf(ret_error, -EINVAL,
				      "%s: the value of key #%zu is not valid UTF-8", path, i + 1);
	}
	return 0;
}

static int message_check(Pass pass, const ProtobufCMessage *m, const char *prefix, unsigned depth,
			 char **ret_error);

static int field_check(Pass pass, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		       const char *path, unsigned depth, char **ret_error)
{
	const void *slot = (const char *)m + f->offset;
	bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
	size_t n = repeated ? *(const size_t *)((const char *)m + f->quantifier_offset) : 1;
	int r;

	if (f->type == PROTOBUF_C_TYPE_STRING) {
		if (pass == PASS_COUNTS)
			return 0;
		if (!repeated)
			return string_check(*(char *const *)slot, path, ret_error);
		char *const *v = *(char **const *)slot;
		for (size_t i = 0; i < n; i++)
			if (v[i] && !utf8_valid(v[i], strlen(v[i])))
				return errorf(ret_error, -EINVAL, "%s[%zu]: not valid UTF-8", path,
					      i);
		return 0;
	}
	if (f->type != PROTOBUF_C_TYPE_MESSAGE)
		return 0;
	if (is_string_map(f))
		return map_check(pass, f, *(const MapEntry *const *const *)slot, n, path,
				 ret_error);
	if (!repeated)
		return message_check(pass, *(const ProtobufCMessage *const *)slot, path, depth + 1,
				     ret_error);
	const ProtobufCMessage *const *v = *(const ProtobufCMessage *const *const *)slot;
	for (size_t i = 0; i < n; i++) {
		char item[PATH_MAX_LEN + 24];
		snprintf(item, sizeof(item), "%s[%zu]", path, i);
		if ((r = message_check(pass, v[i], item, depth + 1, ret_error)) < 0)
			return r;
	}
	return 0;
}

static int message_check(Pass pass, const ProtobufCMessage *m, const char *prefix, unsigned depth,
			 char **ret_error)
{
	if (!m || depth > MAX_DEPTH)
		return 0;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char path[PATH_MAX_LEN];
		int r;

		if (!field_present(m, f))
			continue;
		if (prefix)
			snprintf(path, sizeof(path), "%s.%s", prefix, f->name);
		else
			snprintf(path, sizeof(path), "%s", f->name);
		if ((r = field_check(pass, m, f, path, depth, ret_error)) < 0)
			return r;
	}
	return 0;
}

int csi_request_check(const ProtobufCMessage *req, char **ret_error)
{
	int r = message_check(PASS_COUNTS, req, NULL, 0, ret_error);
	if (r < 0)
		return r;
	return message_check(PASS_CONTENT, req, NULL, 0, ret_error);
}
