/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <string.h>

#include "alloc.h"
#include "csi-test.h"
#include "ownership.h"
#include "pbjson.h"
#include "status.h"

Env *env_new(DriverMode mode)
{
	Env *e = xnew0(Env, 1);

	e->fake = fake_backend_new("fake", NULL);
	e->other = fake_backend_new("other", "other-");
	e->d = (Driver){
		.mode = mode,
		.name = "volplug.test.io",
		.version = "9.8.7",
		.node_id = "node-1",
		.coalesce_window = 20 * USEC_PER_MSEC,
		.fs_group_policy = OWNERSHIP_ON_ROOT_MISMATCH,
		.backends = xnew0(Backend *, 3),
	};
	e->d.backends[0] = &e->fake->base;
	e->d.backends[1] = &e->other->base;
	if (driver_init(&e->d) < 0) {
		printf("Bail out! driver_init failed\n");
		exit(1);
	}
	return e;
}

void env_free(Env *e)
{
	driver_done(&e->d);
	backends_free(e->d.backends);
	free(e);
}

void call_done(Call *c)
{
	free(c->error);
	if (c->reply)
		protobuf_c_message_free_unpacked(c->reply, NULL);
	*c = (Call){};
}

typedef struct StringEntry {
	ProtobufCMessage base;
	char *key;
	char *value;
} StringEntry;

/* A message as the other end decodes it. */
static ProtobufCMessage *wire_trip(const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	_cleanup_free_ uint8_t *buf = xmalloc(len);

	protobuf_c_message_pack(m, buf);
	return protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
}

/* JSON with ' for ". */
static json_t *json_quoted(const char *text)
{
	_cleanup_free_ char *s = xstrdup(text);

	for (char *q = s; *q; q++)
		if (*q == '\'')
			*q = '"';
	return json_loads(s, 0, NULL);
}

ProtobufCMessage *request_new(const ProtobufCMessageDescriptor *type, const char *json)
{
	_cleanup_free_ char *error = NULL;
	ProtobufCMessage *m = NULL;
	json_t *j = json_quoted(json);

	if (!j || pbjson_to_message(j, type, &m, &error) < 0) {
		printf("Bail out! not a %s: %s (%s)\n", type->name, json, j ? error : "no JSON");
		exit(1);
	}
	json_decref(j);
	ProtobufCMessage *decoded = wire_trip(m);
	protobuf_c_message_free_unpacked(m, NULL);
	return decoded;
}

Call call_message(Driver *d, CsiHandler handler, ProtobufCMessage *request)
{
	ProtobufCMessage *req = wire_trip(request), *reply = NULL;
	Call c = {};

	protobuf_c_message_free_unpacked(request, NULL);
	c.r = csi_call(d, handler, req, &reply, &c.error);
	c.code = rpc_status_name(rpc_status_from_errno(c.r));
	if (reply) {
		c.reply = wire_trip(reply);
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	protobuf_c_message_free_unpacked(req, NULL);
	return c;
}

static Call call_json(Driver *d, CsiHandler handler, const ProtobufCMessageDescriptor *type,
		      const char *json)
{
	return call_message(d, handler, request_new(type, json));
}

void pbmap_add_many(void ***entries, size_t *n, const ProtobufCMessageDescriptor *entry_type,
		    size_t count, const char *key_prefix, const char *value)
{
	*entries = xrealloc(*entries, (*n + count) * sizeof(void *));
	for (size_t i = 0; i < count; i++) {
		StringEntry *e = xmalloc(entry_type->sizeof_message);
		entry_type->message_init(&e->base);
		e->key = xasprintf("%s%zu", key_prefix, *n + 1);
		e->value = xstrdup(value);
		(*entries)[(*n)++] = e;
	}
}

Call call_run(Driver *d, CsiHandler handler, const ProtobufCMessageDescriptor *type,
	      const char *json_fmt, ...)
{
	_cleanup_free_ char *json = NULL;
	va_list ap;

	va_start(ap, json_fmt);
	if (vasprintf(&json, json_fmt, ap) < 0)
		abort();
	va_end(ap);
	return call_json(d, handler, type, json);
}

pthread_mutex_t background_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t background_changed = PTHREAD_COND_INITIALIZER;

static void *background_run(void *arg)
{
	Background *b = arg;

	b->call = call_json(b->d, b->handler, b->type, b->json);
	pthread_mutex_lock(&background_lock);
	if (b->finished)
		*b->finished = true;
	pthread_cond_broadcast(&background_changed);
	pthread_mutex_unlock(&background_lock);
	return NULL;
}

void background_start(Background *b, Driver *d, CsiHandler handler,
		      const ProtobufCMessageDescriptor *type, const char *json_fmt, ...)
{
	va_list ap;

	b->d = d;
	b->handler = handler;
	b->type = type;
	va_start(ap, json_fmt);
	if (vasprintf(&b->json, json_fmt, ap) < 0)
		abort();
	va_end(ap);
	if (pthread_create(&b->thread, NULL, background_run, b) != 0) {
		printf("Bail out! pthread_create failed\n");
		exit(1);
	}
}

void background_join(Background *b)
{
	pthread_join(b->thread, NULL);
	free(b->json);
	b->json = NULL;
}

char *reply_text(const Call *c)
{
	if (!c->reply)
		return NULL;
	json_t *j = pbjson_from_message(c->reply);
	char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return text;
}

bool reply_is(const Call *c, const char *expected, char **ret_text)
{
	json_t *want = json_quoted(expected);
	bool same = false;

	if (!want) {
		printf("Bail out! not JSON: %s\n", expected);
		exit(1);
	}
	if (c->reply) {
		json_t *got = pbjson_from_message(c->reply);
		same = json_equal(got, want);
		json_decref(got);
	}
	json_decref(want);
	*ret_text = reply_text(c);
	return same;
}

const char *pbmap_get(void *const *entries, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const StringEntry *e = entries[i];
		if (strcmp(e->key, key) == 0)
			return e->value;
	}
	return NULL;
}

const char *repeat(char c, size_t n)
{
	static char buf[1024];

	memset(buf, c, n);
	buf[n] = 0;
	return buf;
}
