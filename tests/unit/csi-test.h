/* SPDX-License-Identifier: Apache-2.0 */
/* What the CSI handlers' unit tests share: a driver on fake backends, requests written as JSON
 * (single quotes for double, so that they read in C) and put through the wire format as the
 * server decodes them, and the call's outcome as the client would see it: the gRPC status the
 * errno maps to, the message, and the reply after a trip through the wire format. */
#pragma once

#include <pthread.h>

#include "controller.h"
#include "csi.pb-c.h"
#include "driver.h"
#include "fake-backend.h"
#include "node.h"
#include "alloc.h"
#include "tap.h"

/* Volume capabilities in requests. */
#define CAP_SNW "{'mount':{'fs_type':'ext4'},'access_mode':{'mode':'SINGLE_NODE_WRITER'}}"
#define CAP_MNRO "{'mount':{'fs_type':'ext4'},'access_mode':{'mode':'MULTI_NODE_READER_ONLY'}}"
#define CAP_XFS_MNRO "{'mount':{'fs_type':'xfs'},'access_mode':{'mode':'MULTI_NODE_READER_ONLY'}}"
#define CAP_MNMW "{'mount':{'fs_type':'ext4'},'access_mode':{'mode':'MULTI_NODE_MULTI_WRITER'}}"
#define CAP_VFAT "{'mount':{'fs_type':'vfat'},'access_mode':{'mode':'SINGLE_NODE_WRITER'}}"
#define CAP_UNKNOWN_MODE "{'mount':{'fs_type':'ext4'},'access_mode':{'mode':'UNKNOWN'}}"
#define CAP_BLOCK_SNW "{'block':{},'access_mode':{'mode':'SINGLE_NODE_WRITER'}}"
#define CAP_BLOCK_MNRO "{'block':{},'access_mode':{'mode':'MULTI_NODE_READER_ONLY'}}"
#define CAP_BLOCK_MNSW "{'block':{},'access_mode':{'mode':'MULTI_NODE_SINGLE_WRITER'}}"
#define CAP_BLOCK_SNSW "{'block':{},'access_mode':{'mode':'SINGLE_NODE_SINGLE_WRITER'}}"
#define CAP_NO_MODE "{'mount':{}}"
#define CAP_NO_TYPE "{'access_mode':{'mode':'SINGLE_NODE_WRITER'}}"

/* A driver whose backends are "fake" (the default) and "other" (claiming ids that start with
 * "other-", and volume contexts naming it). */
typedef struct Env {
	Driver d;
	FakeBackend *fake, *other;
} Env;

/* A new driver in mode, started as the daemon starts it, with a 20 ms coalescing window. */
Env *env_new(DriverMode mode);
void env_free(Env *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(Env *, env_free);

/* The outcome of one handler call. */
typedef struct Call {
	int r;			 /* the handler's return: 0 or a negative errno */
	const char *code;	 /* the gRPC status the client gets: "OK", "NOT_FOUND" */
	char *error;		 /* the message, NULL on success */
	ProtobufCMessage *reply; /* as the client decodes it; NULL on failure */
} Call;

void call_done(Call *c);

/* Runs handler on the request written in JSON (a printf format; ' stands for "). Bails out of
 * the test when the JSON does not make a request of that type (a mistake in the test). */
Call call_run(Driver *d, CsiHandler handler, const ProtobufCMessageDescriptor *type,
	      const char *json_fmt, ...) _printf_(4, 5);

/* The request the JSON makes (as call_run() reads it), for a test to change what JSON cannot
 * say (bytes that are not UTF-8, maps of 100,000 entries) before call_message(). */
ProtobufCMessage *request_new(const ProtobufCMessageDescriptor *type, const char *json);

/* Runs handler on request (freed) as call_run() does. */
Call call_message(Driver *d, CsiHandler handler, ProtobufCMessage *request);

/* Appends count entries of entry_type to a map field: keys key_prefix + their position from
 * 1 ("k1", "k2", ...), every value value. */
void pbmap_add_many(void ***entries, size_t *n, const ProtobufCMessageDescriptor *entry_type,
		    size_t count, const char *key_prefix, const char *value);

#define CALL(env, handler, type, ...) \
	call_run(&(env)->d, handler, &csi__v1__##type##__descriptor, __VA_ARGS__)

/* The reply of a successful call as its type (NULL after a failure). */
#define REPLY(c, Type) ((const Type *)(c).reply)

/* A call on a thread of its own, for what happens while it is in flight. */
typedef struct Background {
	pthread_t thread;
	Driver *d;
	CsiHandler handler;
	const ProtobufCMessageDescriptor *type;
	char *json;
	Call call;
	bool *finished; /* set (under background_lock) when it returns; may be NULL */
} Background;

extern pthread_mutex_t background_lock;
extern pthread_cond_t background_changed; /* a background call returned */

/* Starts handler on the request on a new thread. */
void background_start(Background *b, Driver *d, CsiHandler handler,
		      const ProtobufCMessageDescriptor *type, const char *json_fmt, ...)
	_printf_(5, 6);

#define BACKGROUND(bg, env, handler, type, ...) \
	background_start((bg), &(env)->d, handler, &csi__v1__##type##__descriptor, __VA_ARGS__)

/* Waits for it to return; its outcome is in b->call (call_done() it). */
void background_join(Background *b);

/* The reply as JSON, as volplugctl prints it (compact, keys sorted), or NULL after a failure.
 * Caller frees. */
char *reply_text(const Call *c);

/* Whether the reply is the JSON expected (' for ", any key order); *ret_text: reply_text(). */
bool reply_is(const Call *c, const char *expected, char **ret_text);

/* The value of key in a protobuf string map field, or NULL. */
const char *pbmap_get(void *const *entries, size_t n, const char *key);

/* A string of n copies of c (static storage, n < 1024). */
const char *repeat(char c, size_t n);

/* ---- TAP checks on a call ---- */

/* Whether message is want, where a "..." in want stands for any text. */
static inline bool message_is(const char *message, const char *want)
{
	const char *dots = strstr(want, "...");

	if (!message)
		return false;
	if (!dots)
		return strcmp(message, want) == 0;
	size_t head = (size_t)(dots - want), tail = strlen(dots + 3), n = strlen(message);
	return n >= head + tail && strncmp(message, want, head) == 0 &&
	       strcmp(message + n - tail, dots + 3) == 0;
}

__attribute__((format(printf, 7, 8), unused)) static int
tap_is_status(const Call *c, const char *code, const char *message, const char *file, int line,
	      const char *expr, const char *fmt, ...)
{
	va_list ap;
	bool passed = strcmp(c->code, code) == 0 && (c->r < 0 || c->reply) &&
		      (!message || message_is(c->error, message));

	va_start(ap, fmt);
	tap_result(passed, fmt, ap);
	va_end(ap);
	if (!passed)
		printf("#   failed at %s:%d: %s\n#   got %s (%d) '%s', want %s '%s'\n", file, line,
		       expr, c->code, c->r, c->error ?: "(none)", code, message ?: "(any)");
	fflush(stdout);
	return passed;
}

/* The call failed with that status and that message (NULL: any; "..." stands for any text:
 * what other modules say, which the CSI layer passes on, or what depends on thread order). */
#define is_status(c, code, message, ...) \
	tap_is_status(&(c), (code), (message), __FILE__, __LINE__, #c, __VA_ARGS__)

/* The call succeeded. */
#define is_ok(c, ...) is_status(c, "OK", NULL, __VA_ARGS__)

__attribute__((format(printf, 6, 7), unused)) static int
tap_is_reply(const Call *c, const char *expected, const char *file, int line, const char *expr,
	     const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	bool passed = reply_is(c, expected, &text);

	va_start(ap, fmt);
	tap_result(passed, fmt, ap);
	va_end(ap);
	if (!passed)
		printf("#   failed at %s:%d: %s\n#   got  %s (%s)\n#   want %s\n", file, line, expr,
		       text ?: "no reply", c->error ?: c->code, expected);
	free(text);
	fflush(stdout);
	return passed;
}

/* The call succeeded with exactly that reply (JSON with ' for ", as reply_is()). */
#define is_reply(c, expected, ...) \
	tap_is_reply(&(c), (expected), __FILE__, __LINE__, #c, __VA_ARGS__)
