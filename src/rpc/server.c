/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC C core server: one poller thread drives the completion queue and never runs a
 * handler; a pool of workers decodes requests, runs handlers and starts the reply batch.
 *
 * A call's life: request_call completes (NEW) -> RECV_MESSAGE batch and, in parallel, a
 * RECV_CLOSE_ON_SERVER batch that tells us about cancellation -> worker runs the handler
 * -> one SEND batch (initial metadata, message, status). The call is freed when both the
 * SEND and the CLOSE batch have completed. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "alloc.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "pbjson.h"
#include "server.h"
#include "status.h"
#include "wire-check.h"

typedef enum {
	TAG_NEW,
	TAG_RECV,
	TAG_CLOSE,
	TAG_SEND,
	TAG_SHUTDOWN,
} TagKind;

typedef struct Tag {
	TagKind kind;
	RpcCall *call;
} Tag;

struct RpcCall {
	RpcServer *server;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array request_metadata;
	grpc_byte_buffer *request_payload;
	int close_cancelled;	 /* written by the CLOSE batch */
	atomic_bool cancelled;	 /* read by the handler */
	atomic_int refs;	 /* SEND path + CLOSE batch */
	const RpcMethod *method; /* NULL: unknown method */
	char name[96];		 /* short method name */
	char *error_message;	 /* set by rpc_fail() */
	grpc_slice status_details;
	grpc_byte_buffer *reply_payload;
	Tag tag_new, tag_recv, tag_close, tag_send;
	RpcCall *next; /* worker queue link, guarded by RpcServer.lock */
};

struct RpcServer {
	RpcServerConfig config;
	char *socket_path;
	grpc_server *server;
	grpc_completion_queue *cq;
	Tag shutdown_tag;
	atomic_bool stopping;
	usec_t stop_requested; /* CLOCK_MONOTONIC; written by the poller only */
	bool cancelled_all;

	pthread_mutex_t lock; /* guards queue_head, queue_tail, quit */
	pthread_cond_t cond;
	RpcCall *queue_head, *queue_tail;
	bool quit;
	pthread_t *workers;
	unsigned n_workers;
};

METRIC_DEFINE(call_seconds, METRIC_HISTOGRAM, "volplug_csi_operation_duration_seconds",
	      "Time to answer a call, by method and gRPC status code (its _count counts calls)",
	      "method", "code");
METRIC_DEFINE(calls_in_flight, METRIC_GAUGE, "volplug_csi_operations_in_flight",
	      "Calls being answered now, by method", "method");

/* How many request_call slots wait for new calls at once. */
#define PENDING_REQUESTS 32

/* A message echoes what the request held: a 10 KB id would push the status past the client's
 * metadata limit, so that the client sees a size error instead of the reply. Any run of more
 * than MESSAGE_WORD_MAX bytes without a space keeps its head and says how long it was. */
#define MESSAGE_WORD_MAX 1024
#define MESSAGE_WORD_KEEP 128

static char *message_shorten_words(char *msg)
{
	size_t n = strlen(msg), out = 0;
	char *s = xmalloc(n + 1);

	for (size_t i = 0; i < n;) {
		size_t w = strcspn(msg + i, " ");
		if (w > MESSAGE_WORD_MAX) {
			char note[64];
			int k = snprintf(note, sizeof(note), "...(%zu bytes)", w);
			memcpy(s + out, msg + i, MESSAGE_WORD_KEEP);
			memcpy(s + out + MESSAGE_WORD_KEEP, note, (size_t)k);
			out += MESSAGE_WORD_KEEP + (size_t)k;
		} else {
			memcpy(s + out, msg + i, w);
			out += w;
		}
		i += w;
		if (i < n)
			s[out++] = msg[i++]; /* the space */
	}
	s[out] = 0;
	free(msg);
	return s;
}

int rpc_fail(RpcCall *call, int err, const char *fmt, ...)
{
	va_list ap;

	free(call->error_message);
	va_start(ap, fmt);
	if (vasprintf(&call->error_message, fmt, ap) < 0)
		call->error_message = NULL;
	va_end(ap);
	if (call->error_message)
		call->error_message = message_shorten_words(call->error_message);
	return err;
}

bool rpc_call_cancelled(RpcCall *call)
{
	return atomic_load(&call->cancelled);
}

usec_t rpc_call_deadline(RpcCall *call)
{
	gpr_timespec d = gpr_convert_clock_type(call->details.deadline, GPR_CLOCK_MONOTONIC);
	gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
	if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0)
		return USEC_INFINITY;
	/* gpr's monotonic clock has its own origin: translate the remaining time to ours. */
	gpr_timespec left = gpr_time_sub(d, now);
	int64_t left_us = left.tv_sec * 1000000 + left.tv_nsec / 1000;
	usec_t mine = now_usec(CLOCK_MONOTONIC);
	return left_us <= 0 ? mine : mine + (usec_t)left_us;
}

const char *rpc_call_method(RpcCall *call)
{
	return call->name;
}

const void *rpc_call_method_data(RpcCall *call)
{
	return call->method ? call->method->data : NULL;
}

void *rpc_call_userdata(RpcCall *call)
{
	return call->server->config.userdata;
}

static void call_free(RpcCall *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->request_metadata);
	if (c->request_payload)
		grpc_byte_buffer_destroy(c->request_payload);
	if (c->reply_payload)
		grpc_byte_buffer_destroy(c->reply_payload);
	grpc_slice_unref(c->status_details);
	free(c->error_message);
	free(c);
}

static void call_unref(RpcCall *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		call_free(c);
}

static int request_new_call(RpcServer *s)
{
	RpcCall *c = xnew0(RpcCall, 1);

	c->server = s;
	c->status_details = grpc_empty_slice();
	c->tag_new = (Tag){TAG_NEW, c};
	c->tag_recv = (Tag){TAG_RECV, c};
	c->tag_close = (Tag){TAG_CLOSE, c};
	c->tag_send = (Tag){TAG_SEND, c};
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->request_metadata);
	grpc_call_error e = grpc_server_request_call(
		s->server, &c->call, &c->details, &c->request_metadata, s->cq, s->cq, &c->tag_new);
	if (e != GRPC_CALL_OK) {
		call_free(c);
		return log_debug_errno(EIO, "grpc_server_request_call: %d", (int)e);
	}
	return 0;
}

static const RpcMethod *method_lookup(RpcServer *s, const char *path, size_t len)
{
	for (size_t i = 0; i < s->config.n_methods; i++) {
		const char *p = s->config.methods[i].path;
		if (strlen(p) == len && memcmp(p, path, len) == 0)
			return &s->config.methods[i];
	}
	return NULL;
}

static void call_set_name(RpcCall *c)
{
	const char *path = (const char *)GRPC_SLICE_START_PTR(c->details.method);
	size_t len = GRPC_SLICE_LENGTH(c->details.method);
	const char *slash = memrchr(path, '/', len);
	const char *start = slash ? slash + 1 : path;
	size_t n = MIN((size_t)(path + len - start), sizeof(c->name) - 1);

	memcpy(c->name, start, n);
	c->name[n] = 0;
	/* Names reach the log: keep them printable. */
	for (char *p = c->name; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
}

/* Starts a batch and says whether it was accepted; the tag completes only if it was. */
static bool start_batch(RpcCall *c, const grpc_op *ops, size_t n, Tag *tag)
{
	grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
	if (e != GRPC_CALL_OK) {
		log_debug("%s: grpc_call_start_batch failed: %d", c->name, (int)e);
		return false;
	}
	return true;
}

static void on_new_call(RpcServer *s, RpcCall *c, bool ok)
{
	if (!ok) { /* the server is shutting down */
		call_free(c);
		return;
	}
	if (!atomic_load(&s->stopping))
		(void)request_new_call(s);

	c->method = method_lookup(s, (const char *)GRPC_SLICE_START_PTR(c->details.method),
				  GRPC_SLICE_LENGTH(c->details.method));
	call_set_name(c);
	atomic_store(&c->refs, 2);

	grpc_op close_op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
	close_op.data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (!start_batch(c, &close_op, 1, &c->tag_close))
		atomic_fetch_sub(&c->refs, 1);

	grpc_op recv_op = {.op = GRPC_OP_RECV_MESSAGE};
	recv_op.data.recv_message.recv_message = &c->request_payload;
	if (!start_batch(c, &recv_op, 1, &c->tag_recv))
		call_unref(c);
}

static void queue_push(RpcServer *s, RpcCall *c)
{
	pthread_mutex_lock(&s->lock);
	c->next = NULL;
	if (s->queue_tail)
		s->queue_tail->next = c;
	else
		s->queue_head = c;
	s->queue_tail = c;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static RpcCall *queue_pop(RpcServer *s)
{
	RpcCall *c;

	pthread_mutex_lock(&s->lock);
	while (!s->queue_head && !s->quit)
		pthread_cond_wait(&s->cond, &s->lock);
	c = s->queue_head;
	if (c) {
		s->queue_head = c->next;
		if (!s->queue_head)
			s->queue_tail = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return c;
}

static grpc_byte_buffer *encode_message(const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(len);

	protobuf_c_message_pack(m, buf);
	grpc_slice slice = grpc_slice_new(buf, len, free);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
	grpc_slice_unref(slice);
	return bb;
}

/* The request, or NULL with the reason recorded for the client. */
static ProtobufCMessage *decode_message(RpcCall *c, grpc_byte_buffer *bb,
					const ProtobufCMessageDescriptor *d)
{
	grpc_byte_buffer_reader reader;
	_cleanup_free_ char *field = NULL;
	ProtobufCMessage *m = NULL;

	if (!grpc_byte_buffer_reader_init(&reader, bb)) {
		rpc_fail(c, -EINVAL, "%s: the request cannot be read", c->name);
		return NULL;
	}
	grpc_slice slice = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	if (wire_strings_check(d, GRPC_SLICE_START_PTR(slice), GRPC_SLICE_LENGTH(slice), &field) <
	    0)
		rpc_fail(c, -EINVAL, "%s: a NUL byte inside a string", field);
	else if (!(m = protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(slice),
						 GRPC_SLICE_START_PTR(slice))))
		rpc_fail(c, -EINVAL, "%s: the request is not a valid %s message", c->name, d->name);
	grpc_slice_unref(slice);
	return m;
}

/* The request's fields that name what it is about, most telling first. */
static const char *const object_fields[] = {"volume_id", "snapshot_id", "group_snapshot_id",
					    "source_volume_id", "name"};

/* Puts the object a request concerns into the log context of the call's thread. */
static void log_context_from_request(const ProtobufCMessage *m)
{
	for (size_t i = 0; i < ELEMENTSOF(object_fields); i++) {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
			m->descriptor, object_fields[i]);
		if (!f || f->type != PROTOBUF_C_TYPE_STRING ||
		    f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		const char *v = *(char *const *)((const char *)m + f->offset);
		if (v && *v) {
			log_set_context_object(object_fields[i], v);
			return;
		}
	}
}

/* Every field named "secrets" (CSI's csi_secret fields all are) replaced, at any depth. */
static void secrets_strip(json_t *j)
{
	const char *key;
	json_t *v;
	void *tmp;
	size_t i;

	if (json_is_array(j))
		json_array_foreach (j, i, v)
			secrets_strip(v);
	if (!json_is_object(j))
		return;
	json_object_foreach_safe(j, tmp, key, v)
	{
		if (strcmp(key, "secrets") == 0)
			json_object_set_new(j, key, json_string("***stripped***"));
		else
			secrets_strip(v);
	}
}

/* At -v 5, the request as JSON, secrets left out (as the CSI sidecars log them). */
static void log_request(const ProtobufCMessage *m)
{
	if (log_get_verbosity() < 5)
		return;
	json_t *j = pbjson_from_message(m);
	secrets_strip(j);
	_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	log_v(5, "request: %s", text ?: "?");
}

/* Runs the handler and returns the status; *ret_reply is set on success. */
static grpc_status_code call_dispatch(RpcCall *c, ProtobufCMessage **ret_reply)
{
	ProtobufCMessage *request, *reply = NULL;

	if (!c->method) {
		rpc_fail(c, -ENOSYS, "unknown method %s", c->name);
		return GRPC_STATUS_UNIMPLEMENTED;
	}
	if (!c->request_payload) {
		rpc_fail(c, -EINVAL, "%s: the request carries no message", c->name);
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	request = decode_message(c, c->request_payload, c->method->request);
	if (!request)
		return GRPC_STATUS_INVALID_ARGUMENT;
	log_context_from_request(request);
	log_request(request);
	if (failpoints_enabled()) {
		char fp[128];
		snprintf(fp, sizeof(fp), "rpc:%s", c->name);
		failpoint(fp);
	}
	int r = c->method->handler(c, request, &reply);
	protobuf_c_message_free_unpacked(request, NULL);
	if (r < 0) {
		if (reply)
			protobuf_c_message_free_unpacked(reply, NULL);
		return rpc_status_from_errno(r) ?: GRPC_STATUS_INTERNAL;
	}
	if (!reply) {
		rpc_fail(c, -EIO, "%s: handler gave no reply", c->name);
		return GRPC_STATUS_INTERNAL;
	}
	*ret_reply = reply;
	return GRPC_STATUS_OK;
}

static void call_reply(RpcCall *c)
{
	ProtobufCMessage *reply = NULL;
	grpc_op ops[3] = {};
	size_t n = 0;
	usec_t start = now_usec(CLOCK_MONOTONIC);
	/* A method no table has is one label, not one per name a client makes up. */
	const char *label = c->method ? c->name : "unknown";

	metric_add(&calls_in_flight, 1, label);
	log_set_context(c->name);
	grpc_status_code code = call_dispatch(c, &reply);
	if (reply) {
		c->reply_payload = encode_message(reply);
		protobuf_c_message_free_unpacked(reply, NULL);
	}
	if (code != GRPC_STATUS_OK) {
		if (!c->error_message)
			rpc_fail(c, 0, "%s", rpc_status_name(code));
		c->status_details = grpc_slice_from_copied_string(c->error_message);
		log_full_errno(code == GRPC_STATUS_INTERNAL ? LOG_LEVEL_ERROR : LOG_LEVEL_INFO, 0,
			       "failed with %s: %s", rpc_status_name(code), c->error_message);
		if (code != GRPC_STATUS_INTERNAL) /* an error record is in the list already */
			log_recent_add(rpc_status_name(code), c->error_message);
	}
	log_debug("done in %llu us: %s", (unsigned long long)(now_usec(CLOCK_MONOTONIC) - start),
		  rpc_status_name(code));
	log_set_context(NULL);
	metric_observe(&call_seconds, metric_seconds_since(start), label, rpc_status_name(code));
	metric_add(&calls_in_flight, -1, label);

	ops[n++] = (grpc_op){.op = GRPC_OP_SEND_INITIAL_METADATA};
	if (c->reply_payload) {
		ops[n] = (grpc_op){.op = GRPC_OP_SEND_MESSAGE};
		ops[n++].data.send_message.send_message = c->reply_payload;
	}
	ops[n] = (grpc_op){.op = GRPC_OP_SEND_STATUS_FROM_SERVER};
	ops[n].data.send_status_from_server.status = code;
	ops[n++].data.send_status_from_server.status_details =
		code == GRPC_STATUS_OK ? NULL : &c->status_details;
	if (!start_batch(c, ops, n, &c->tag_send))
		call_unref(c);
}

static void *worker_main(void *userdata)
{
	RpcServer *s = userdata;
	RpcCall *c;

	while ((c = queue_pop(s)))
		call_reply(c);
	return NULL;
}

static void on_event(RpcServer *s, Tag *tag, bool ok)
{
	RpcCall *c = tag->call;

	switch (tag->kind) {
	case TAG_NEW:
		on_new_call(s, c, ok);
		break;
	case TAG_RECV:
		if (ok)
			queue_push(s, c);
		else
			call_unref(c);
		break;
	case TAG_CLOSE:
		if (c->close_cancelled)
			atomic_store(&c->cancelled, true);
		call_unref(c);
		break;
	case TAG_SEND:
		call_unref(c);
		break;
	case TAG_SHUTDOWN:
		break;
	}
}

int rpc_server_run(RpcServer *s)
{
	for (;;) {
		gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						     gpr_time_from_millis(200, GPR_TIMESPAN));
		grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);

		if (ev.type == GRPC_OP_COMPLETE) {
			Tag *tag = ev.tag;
			if (tag->kind == TAG_SHUTDOWN)
				return 0;
			on_event(s, tag, ev.success);
		} else if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return 0;

		if (atomic_load(&s->stopping) && s->stop_requested == 0) {
			s->stop_requested = now_usec(CLOCK_MONOTONIC);
			grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
		}
		if (s->stop_requested && !s->cancelled_all &&
		    now_usec(CLOCK_MONOTONIC) - s->stop_requested > s->config.shutdown_grace) {
			log_warning(
				"calls still running after the shutdown grace period: cancelling");
			grpc_server_cancel_all_calls(s->server);
			s->cancelled_all = true;
		}
	}
}

void rpc_server_stop(RpcServer *s)
{
	atomic_store(&s->stopping, true);
}

int unix_socket_alive(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 1;
	return 0;
}

static int socket_claim(const char *path)
{
	int r = unix_socket_alive(path);
	if (r < 0)
		return log_debug_errno(r, "%s exists and is not a usable socket: %m", path);
	if (r > 0)
		return -EADDRINUSE;
	if (unlink(path) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}

static int workers_start(RpcServer *s, unsigned n)
{
	s->workers = xnew0(pthread_t, n);
	for (unsigned i = 0; i < n; i++) {
		int r = pthread_create(&s->workers[i], NULL, worker_main, s);
		if (r != 0)
			return -r;
		s->n_workers++;
	}
	return 0;
}

int rpc_server_new(const RpcServerConfig *config, RpcServer **ret)
{
	RpcServer *s = xnew0(RpcServer, 1);
	_cleanup_free_ char *address = NULL;
	int r;

	s->config = *config;
	s->socket_path = xstrdup(config->socket_path);
	s->shutdown_tag = (Tag){TAG_SHUTDOWN, NULL};
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);

	r = socket_claim(s->socket_path);
	if (r < 0)
		goto fail;

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);

	address = xasprintf("unix:%s", s->socket_path);
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	/* No window in which the socket exists with looser permissions. */
	mode_t old_umask = umask(0777 & ~config->socket_mode);
	int port = grpc_server_add_http2_port(s->server, address, creds);
	umask(old_umask);
	grpc_server_credentials_release(creds);
	if (port == 0) {
		r = -EADDRNOTAVAIL;
		goto fail;
	}
	if (chmod(s->socket_path, config->socket_mode) < 0) {
		r = negative_errno();
		goto fail;
	}
	grpc_server_start(s->server);

	for (unsigned i = 0; i < PENDING_REQUESTS; i++) {
		r = request_new_call(s);
		if (r < 0)
			goto fail;
	}
	r = workers_start(s, config->workers ? config->workers : 1);
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	rpc_server_free(s);
	return r;
}

void rpc_server_free(RpcServer *s)
{
	if (!s)
		return;
	if (s->server) {
		if (!s->stop_requested) {
			grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
			grpc_server_cancel_all_calls(s->server);
		}
		grpc_server_destroy(s->server);
	}
	if (s->cq) {
		grpc_completion_queue_shutdown(s->cq);
		for (;;) {
			grpc_event ev = grpc_completion_queue_next(
				s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
			if (ev.type == GRPC_QUEUE_SHUTDOWN)
				break;
			if (ev.type == GRPC_OP_COMPLETE && ((Tag *)ev.tag)->kind != TAG_SHUTDOWN)
				on_event(s, ev.tag, false);
		}
		grpc_completion_queue_destroy(s->cq);
	}
	pthread_mutex_lock(&s->lock);
	s->quit = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	if (s->server)
		(void)unlink(s->socket_path);
	free(s->socket_path);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}
