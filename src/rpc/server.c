/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC C core server: poller threads drive the completion queue and run only the handlers of
 * cheap methods (RpcMethod.cheap: GetPluginInfo, no wait, no lock held long); a pool of
 * workers decodes the other requests, runs their handlers and starts the reply batch. An acceptor
 * thread owns the listening socket: it hands each connection to gRPC and keeps a duplicate of
 * it, through which a connection that breaks the bounds is shut down (docs/architecture.md,
 * "The gRPC socket's bounds").
 *
 * A call's life: request_call completes (NEW) -> RECV_MESSAGE batch and, in parallel, a
 * RECV_CLOSE_ON_SERVER batch that tells us about cancellation -> worker runs the handler
 * -> one SEND batch (initial metadata, message, status). The call is freed when both the
 * SEND and the CLOSE batch have completed.
 *
 * A streaming method's handler sends its messages itself (rpc_call_send()): one MESSAGE batch
 * at a time, the first with the initial metadata, each waited for on the call's condition
 * until the poller saw it complete; then the SEND batch carries the status alone. gRPC
 * completes a MESSAGE batch once the transport took the message, so a client that reads
 * slowly holds the handler, never the daemon's memory. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "alloc.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "pbjson.h"
#include "server.h"
#include "status.h"
#include "wire-check.h"

/* Pollers besides the one in rpc_server_run(): gRPC reads a connection in the thread that polls
 * it, for as long as the client keeps writing, so a flood would otherwise hold the only poller
 * and let calls pile up unanswered inside gRPC. */
#define EXTRA_POLLERS 1

typedef enum {
	TAG_NEW,
	TAG_RECV,
	TAG_CLOSE,
	TAG_SEND,
	TAG_MESSAGE,
	TAG_SHUTDOWN,
} TagKind;

typedef struct Tag {
	TagKind kind;
	RpcCall *call;
} Tag;

/* One client connection. gRPC owns fd and closes it; watch_fd is our duplicate of the same
 * socket, polled by the acceptor for the connection's end and shut down to end it. */
typedef struct Conn {
	int fd;		      /* gRPC's descriptor: its peer name is "fd:<fd>" */
	int watch_fd;	      /* ours; -EBADF once the connection ended */
	unsigned refs;	      /* the acceptor's while watch_fd is open, and one per call */
	unsigned calls;	      /* its calls in our hands (NEW until freed) */
	unsigned resets;      /* its calls the client cancelled unanswered, this window */
	usec_t resets_window; /* CLOCK_MONOTONIC start of that window */
	usec_t stalled_since; /* bytes waiting and no call in our hands since, or 0 */
	bool shut;	      /* shut down by us */
	struct Conn *next;
} Conn;

struct RpcCall {
	RpcServer *server;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array request_metadata;
	grpc_byte_buffer *request_payload;
	size_t payload_bytes;	 /* of request_payload, counted in RpcServer.payload_bytes */
	int close_cancelled;	 /* written by the CLOSE batch */
	atomic_bool cancelled;	 /* read by the handler */
	atomic_int refs;	 /* SEND path + CLOSE batch */
	const RpcMethod *method; /* NULL: unknown method */
	char name[96];		 /* short method name */
	char *error_message;	 /* set by rpc_fail() */
	grpc_slice status_details;
	grpc_byte_buffer *reply_payload;
	Conn *conn;	      /* a reference, set when counted in its calls; guarded by conn_lock */
	atomic_bool answered; /* the reply batch was started */
	atomic_bool reset_counted; /* counted once against its connection's resets */
	Tag tag_new, tag_recv, tag_close, tag_send, tag_message;
	/* Streaming: the MESSAGE batch in flight. send_lock guards send_done and send_ok; the
	 * rest is the handler's thread's own. */
	pthread_mutex_t send_lock;
	pthread_cond_t send_cond;
	bool send_done, send_ok;
	bool sent_initial; /* the initial metadata went with the first message */
	RpcCall *next;	   /* worker queue link, guarded by RpcServer.lock */
};

struct RpcServer {
	RpcServerConfig config;
	char *socket_path;
	grpc_server *server;
	grpc_server_credentials *creds;
	grpc_resource_quota *quota;
	grpc_completion_queue *cq;
	Tag shutdown_tag;
	atomic_bool stopping;
	atomic_bool shut_down; /* the shutdown tag came */
	atomic_uint calls;     /* calls in our hands, all connections (refused ones not) */
	/* Every RpcCall allocated, request slots included: one may still start a batch, so the
	 * pollers return and the queue is shut down only once the shutdown tag came and this is
	 * 0 (gRPC sends the tag without waiting for the calls we still hold). */
	atomic_uint live_calls;
	atomic_size_t payload_bytes; /* their request messages */
	pthread_t extra_pollers[EXTRA_POLLERS];
	unsigned n_extra_pollers;

	int listen_fd; /* closed by the acceptor when it returns */
	bool bound;    /* socket_path is ours to remove */
	int wake_fd;   /* eventfd: tells the acceptor to return */
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t conn_lock; /* guards conns and every Conn's fields but fd */
	Conn *conns;
	unsigned n_conns;      /* with watch_fd open */
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

/* The bounds of the socket (docs/architecture.md, "The gRPC socket's bounds"). */
#define STREAMS_MAX 100		      /* open streams on one connection */
#define MESSAGE_MAX (4 * 1024 * 1024) /* bytes of one request */
#define METADATA_MAX (8 * 1024)	      /* bytes of a call's headers */
#define MEMORY_QUOTA_BYTES (64 * 1024 * 1024)
#define CONNECTIONS_MAX 128		  /* connections at once */
#define CONN_CALLS_MAX (2 * STREAMS_MAX)  /* calls of one connection in our hands */
#define CALLS_MAX 1024			  /* calls in our hands, all connections */
#define PAYLOAD_MAX (64 * 1024 * 1024)	  /* bytes of requests in our hands */
#define RESETS_MAX 1000			  /* calls one connection may cancel unanswered... */
#define RESETS_WINDOW (10 * USEC_PER_SEC) /* ...in this long */
/* A connection whose bytes wait unread this long while it has no call in our hands feeds gRPC
 * headers that never end (CONTINUATION after CONTINUATION: gRPC 1.51 buffers a header value
 * whatever its length and parses it again with every frame), or reads none of its answers. */
#define STALL_MAX (3 * USEC_PER_SEC)

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
	RpcServer *s = c->server;

	if (c->payload_bytes)
		atomic_fetch_sub(&c->server->payload_bytes, c->payload_bytes);
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
	pthread_mutex_destroy(&c->send_lock);
	pthread_cond_destroy(&c->send_cond);
	free(c);
	atomic_fetch_sub(&s->live_calls, 1);
}

static void conn_unref_locked(RpcServer *s, Conn *conn)
{
	if (--conn->refs > 0)
		return;
	for (Conn **p = &s->conns; *p; p = &(*p)->next)
		if (*p == conn) {
			*p = conn->next;
			break;
		}
	free(conn);
}

/* Ends a connection: gRPC finds its socket shut down, closes it and cancels its calls. */
static void conn_shut_locked(Conn *conn, const char *why, unsigned n)
{
	if (conn->shut || conn->watch_fd < 0)
		return;
	conn->shut = true;
	(void)shutdown(conn->watch_fd, SHUT_RDWR);
	log_warning("closing a client's connection: %s (%u)", why, n);
}

/* Drops a reference: the last one (its last batch done) uncounts a counted call and frees it. */
static void call_unref(RpcCall *c)
{
	RpcServer *s = c->server;

	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->conn) { /* counted: neither refused nor of a closed connection */
		atomic_fetch_sub(&s->calls, 1);
		pthread_mutex_lock(&s->conn_lock);
		c->conn->calls--;
		conn_unref_locked(s, c->conn);
		pthread_mutex_unlock(&s->conn_lock);
	}
	call_free(c);
}

static int request_new_call(RpcServer *s)
{
	RpcCall *c = xnew0(RpcCall, 1);

	atomic_fetch_add(&s->live_calls, 1);
	c->server = s;
	c->status_details = grpc_empty_slice();
	c->tag_new = (Tag){TAG_NEW, c};
	c->tag_recv = (Tag){TAG_RECV, c};
	c->tag_close = (Tag){TAG_CLOSE, c};
	c->tag_send = (Tag){TAG_SEND, c};
	c->tag_message = (Tag){TAG_MESSAGE, c};
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_cond_init(&c->send_cond, NULL);
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

/* The connection a call came on, from gRPC's peer name "fd:<n>" of the descriptor the acceptor
 * handed over; the newest one with that number (a number is reused once gRPC closed it). */
static Conn *conn_of_call_locked(RpcServer *s, grpc_call *call)
{
	char *peer = grpc_call_get_peer(call);
	Conn *found = NULL;
	unsigned fd;
	int end = 0;

	if (peer && sscanf(peer, "fd:%u%n", &fd, &end) == 1 && peer[end] == 0)
		for (Conn *conn = s->conns; conn && !found; conn = conn->next)
			if (conn->fd == (int)fd && conn->watch_fd >= 0)
				found = conn;
	gpr_free(peer);
	return found;
}

/* Answers RESOURCE_EXHAUSTED at once, without running the handler. A call not yet started
 * gets its RECV_CLOSE_ON_SERVER here (the reply holds its only reference); one started has
 * its CLOSE batch already, and the reply takes the SEND path's reference. */
static void call_refuse(RpcCall *c, bool started, const char *why, size_t n)
{
	grpc_op ops[3] = {};
	size_t n_ops = 2;

	rpc_fail(c, -ENOMEM, "%s: %s (%zu); try again later", c->name, why, n);
	c->status_details = grpc_slice_from_copied_string(c->error_message);
	log_debug("refused: %s", c->error_message);
	metric_observe(&call_seconds, 0, c->method ? c->name : "unknown",
		       rpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED));
	ops[0] = (grpc_op){.op = GRPC_OP_SEND_INITIAL_METADATA};
	ops[1] = (grpc_op){.op = GRPC_OP_SEND_STATUS_FROM_SERVER};
	ops[1].data.send_status_from_server.status = GRPC_STATUS_RESOURCE_EXHAUSTED;
	ops[1].data.send_status_from_server.status_details = &c->status_details;
	if (!started) {
		ops[n_ops] = (grpc_op){.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
		ops[n_ops++].data.recv_close_on_server.cancelled = &c->close_cancelled;
		atomic_store(&c->refs, 1);
	}
	atomic_store(&c->answered, true);
	if (!start_batch(c, ops, n_ops, &c->tag_send))
		call_unref(c);
}

/* Counts a request message the call received; false when the messages in our hands would
 * pass PAYLOAD_MAX (one is taken whatever its size, when it is alone). */
static bool payload_take(RpcServer *s, RpcCall *c)
{
	size_t n = grpc_byte_buffer_length(c->request_payload);
	size_t before = atomic_fetch_add(&s->payload_bytes, n);

	if (before > 0 && before + n > PAYLOAD_MAX) {
		atomic_fetch_sub(&s->payload_bytes, n);
		return false;
	}
	c->payload_bytes = n;
	return true;
}

static void on_new_call(RpcServer *s, RpcCall *c, bool ok)
{
	/* Not ok: the server is shutting down, or gRPC gave our request to a call that died
	 * while it waited to be matched. The slot is lost either way: ask for another one. */
	if (!atomic_load(&s->stopping))
		(void)request_new_call(s);
	if (!ok) {
		call_free(c);
		return;
	}

	c->method = method_lookup(s, (const char *)GRPC_SLICE_START_PTR(c->details.method),
				  GRPC_SLICE_LENGTH(c->details.method));
	call_set_name(c);

	pthread_mutex_lock(&s->conn_lock);
	Conn *conn = conn_of_call_locked(s, c->call);
	if (conn && !conn->shut && conn->calls >= CONN_CALLS_MAX)
		/* More calls in our hands than streams it may have open: it resets streams as
		 * fast as it opens them, or ignores the limit. */
		conn_shut_locked(conn, "more calls unanswered than streams allowed",
				 conn->calls + 1);
	if (!conn || conn->shut) {
		/* Its connection is gone or going: unreferenced unanswered, the call is
		 * cancelled. */
		pthread_mutex_unlock(&s->conn_lock);
		call_free(c);
		return;
	}
	bool busy = atomic_load(&s->calls) >= CALLS_MAX;
	if (!busy) {
		c->conn = conn;
		conn->refs++;
		conn->calls++;
		conn->stalled_since = 0;
		atomic_fetch_add(&s->calls, 1);
	}
	pthread_mutex_unlock(&s->conn_lock);
	if (busy) {
		call_refuse(c, false, "too many calls in progress", CALLS_MAX);
		return;
	}

	atomic_store(&c->refs, 2);
	grpc_op close_op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
	close_op.data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (!start_batch(c, &close_op, 1, &c->tag_close))
		call_unref(c);

	grpc_op recv_op = {.op = GRPC_OP_RECV_MESSAGE};
	recv_op.data.recv_message.recv_message = &c->request_payload;
	if (!start_batch(c, &recv_op, 1, &c->tag_recv))
		call_unref(c);
}

/* A call the client cancelled before its answer, or sent without its message: a connection
 * that does this more than RESETS_MAX times in RESETS_WINDOW is flooding us (HEADERS then
 * RST_STREAM, over and over). */
static void conn_count_reset(RpcServer *s, Conn *conn)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);

	pthread_mutex_lock(&s->conn_lock);
	if (now - conn->resets_window > RESETS_WINDOW) {
		conn->resets_window = now;
		conn->resets = 0;
	}
	if (++conn->resets > RESETS_MAX)
		conn_shut_locked(conn, "calls cancelled before their answer or without a message",
				 conn->resets);
	pthread_mutex_unlock(&s->conn_lock);
}

/* Counts a call against its connection's resets, once: one cancelled before its answer, or one
 * whose stream ended without its request message (no gRPC client sends such a call; a flood of
 * HEADERS then RST_STREAM becomes one when the stream's end is read before its reset). */
static void call_count_reset(RpcServer *s, RpcCall *c)
{
	if (c->conn && !atomic_exchange(&c->reset_counted, true))
		conn_count_reset(s, c->conn);
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
	if (!c->request_payload && rpc_call_cancelled(c)) {
		rpc_fail(c, -ECANCELED, "%s: cancelled by the client", c->name);
		return GRPC_STATUS_CANCELLED;
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
	int r = c->method->stream ? c->method->stream(c, request)
				  : c->method->handler(c, request, &reply);
	protobuf_c_message_free_unpacked(request, NULL);
	if (r < 0) {
		if (reply)
			protobuf_c_message_free_unpacked(reply, NULL);
		return rpc_status_from_errno(r) ?: GRPC_STATUS_INTERNAL;
	}
	if (c->method->stream)
		return GRPC_STATUS_OK;
	if (!reply) {
		rpc_fail(c, -EIO, "%s: handler gave no reply", c->name);
		return GRPC_STATUS_INTERNAL;
	}
	*ret_reply = reply;
	return GRPC_STATUS_OK;
}

int rpc_call_send(RpcCall *c, const ProtobufCMessage *reply)
{
	grpc_op ops[2] = {};
	size_t n = 0;

	if (failpoints_enabled()) { /* a slow stream, for the tests of its deadline */
		char fp[128];
		snprintf(fp, sizeof(fp), "rpc-send:%s", c->name);
		failpoint(fp);
	}
	if (rpc_call_cancelled(c))
		return -ECANCELED;
	if (!c->sent_initial)
		ops[n++] = (grpc_op){.op = GRPC_OP_SEND_INITIAL_METADATA};
	grpc_byte_buffer *bb = encode_message(reply);
	ops[n] = (grpc_op){.op = GRPC_OP_SEND_MESSAGE};
	ops[n++].data.send_message.send_message = bb;
	c->send_done = false;
	if (!start_batch(c, ops, n, &c->tag_message)) {
		grpc_byte_buffer_destroy(bb);
		return -ECANCELED;
	}
	c->sent_initial = true;
	/* gRPC completes every batch it accepted, a cancelled call's too. */
	pthread_mutex_lock(&c->send_lock);
	while (!c->send_done)
		pthread_cond_wait(&c->send_cond, &c->send_lock);
	bool ok = c->send_ok;
	pthread_mutex_unlock(&c->send_lock);
	grpc_byte_buffer_destroy(bb);
	return ok && !rpc_call_cancelled(c) ? 0 : -ECANCELED;
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
		if (code == GRPC_STATUS_CANCELLED) /* nobody waits for it; a flood is logged once */
			log_debug("%s", c->error_message);
		else
			log_full_errno(
				code == GRPC_STATUS_INTERNAL ? LOG_LEVEL_ERROR : LOG_LEVEL_INFO, 0,
				"failed with %s: %s", rpc_status_name(code), c->error_message);
		if (code != GRPC_STATUS_INTERNAL && code != GRPC_STATUS_CANCELLED)
			log_recent_add(rpc_status_name(code), c->error_message);
	}
	log_debug("done in %llu us: %s", (unsigned long long)(now_usec(CLOCK_MONOTONIC) - start),
		  rpc_status_name(code));
	log_set_context(NULL);
	metric_observe(&call_seconds, metric_seconds_since(start), label, rpc_status_name(code));
	metric_add(&calls_in_flight, -1, label);

	if (!c->sent_initial)
		ops[n++] = (grpc_op){.op = GRPC_OP_SEND_INITIAL_METADATA};
	if (c->reply_payload) {
		ops[n] = (grpc_op){.op = GRPC_OP_SEND_MESSAGE};
		ops[n++].data.send_message.send_message = c->reply_payload;
	}
	ops[n] = (grpc_op){.op = GRPC_OP_SEND_STATUS_FROM_SERVER};
	ops[n].data.send_status_from_server.status = code;
	ops[n++].data.send_status_from_server.status_details =
		code == GRPC_STATUS_OK ? NULL : &c->status_details;
	atomic_store(&c->answered, true);
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
		/* A call cancelled before its message came needs no worker. */
		if (!ok || (!c->request_payload && atomic_load(&c->cancelled))) {
			call_unref(c);
			break;
		}
		if (!c->request_payload)
			call_count_reset(s, c); /* answered all the same: the request is bad */
		if (c->request_payload && !payload_take(s, c)) {
			grpc_byte_buffer_destroy(c->request_payload);
			c->request_payload = NULL;
			call_refuse(c, true, "too many request bytes waiting",
				    atomic_load(&s->payload_bytes));
		} else if (c->method && c->method->cheap)
			call_reply(c); /* a hand-over to a worker would cost more than the call */
		else
			queue_push(s, c);
		break;
	case TAG_CLOSE:
		if (c->close_cancelled) {
			atomic_store(&c->cancelled, true);
			if (!atomic_load(&c->answered))
				call_count_reset(s, c);
		}
		call_unref(c);
		break;
	case TAG_SEND:
		call_unref(c);
		break;
	case TAG_MESSAGE: /* the streaming handler waits for it and holds the call meanwhile */
		pthread_mutex_lock(&c->send_lock);
		c->send_done = true;
		c->send_ok = ok;
		pthread_cond_signal(&c->send_cond);
		pthread_mutex_unlock(&c->send_lock);
		break;
	case TAG_SHUTDOWN:
		break;
	}
}

/* Takes one completion (or waits 200 ms); false, to any poller, once the shutdown tag came and
 * every call has ended: no handler left to start a batch, no batch left to complete. */
static bool poll_once(RpcServer *s)
{
	gpr_timespec deadline =
		gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN));
	grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);

	if (ev.type == GRPC_OP_COMPLETE) {
		Tag *tag = ev.tag;
		if (tag->kind == TAG_SHUTDOWN)
			atomic_store(&s->shut_down, true);
		else
			on_event(s, tag, ev.success);
	} else if (ev.type == GRPC_QUEUE_SHUTDOWN)
		atomic_store(&s->shut_down, true);
	return !atomic_load(&s->shut_down) || atomic_load(&s->live_calls) > 0;
}

static void *poller_main(void *userdata)
{
	RpcServer *s = userdata;

	while (poll_once(s))
		;
	return NULL;
}

int rpc_server_run(RpcServer *s)
{
	for (unsigned i = 0; i < EXTRA_POLLERS; i++) {
		if (pthread_create(&s->extra_pollers[i], NULL, poller_main, s) != 0)
			break;
		s->n_extra_pollers++;
	}
	while (poll_once(s)) {
		if (atomic_load(&s->stopping) && s->stop_requested == 0) {
			s->stop_requested = now_usec(CLOCK_MONOTONIC);
			grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
		}
		if (s->stop_requested && !s->cancelled_all &&
		    now_usec(CLOCK_MONOTONIC) - s->stop_requested > s->config.shutdown_grace) {
			/* Their handlers see rpc_call_cancelled(); we wait for them to return. */
			log_warning("%u call(s) still running after the shutdown grace period: "
				    "cancelling",
				    atomic_load(&s->calls));
			grpc_server_cancel_all_calls(s->server);
			s->cancelled_all = true;
		}
	}
	for (unsigned i = 0; i < s->n_extra_pollers; i++)
		pthread_join(s->extra_pollers[i], NULL);
	s->n_extra_pollers = 0;
	return 0;
}

void rpc_server_stop(RpcServer *s)
{
	atomic_store(&s->stopping, true);
	/* No new connection from now on. */
	if (s->wake_fd >= 0)
		(void)eventfd_write(s->wake_fd, 1);
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

/* Binds and listens on the unix socket, created with mode and never looser. */
static int socket_listen(const char *path, mode_t mode, int *ret_fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return negative_errno();
	mode_t old_umask = umask(0777 & ~mode);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_umask);
	if (r < 0)
		return negative_errno();
	if (chmod(path, mode) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = negative_errno();
		(void)unlink(path);
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static void conn_ended_locked(RpcServer *s, Conn *conn)
{
	close(conn->watch_fd);
	conn->watch_fd = -EBADF;
	s->n_conns--;
	conn_unref_locked(s, conn);
}

/* Takes every waiting connection: hands it to gRPC and keeps a duplicate to watch it. */
static void accept_all(RpcServer *s)
{
	static usec_t refused_logged;

	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE) { /* let some close first */
				log_warning_errno(errno, "cannot take a connection: %m");
				usleep(100 * 1000);
			} else if (errno != EAGAIN)
				log_debug_errno(errno, "accept: %m");
			return;
		}
		if (atomic_load(&s->stopping)) { /* gRPC's server may be shut down already */
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->conn_lock);
		bool full = s->n_conns >= CONNECTIONS_MAX;
		pthread_mutex_unlock(&s->conn_lock);
		int watch_fd = full ? -EBADF : fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (watch_fd < 0) {
			usec_t now = now_usec(CLOCK_MONOTONIC);
			if (now - refused_logged > USEC_PER_SEC) {
				refused_logged = now;
				log_warning("refusing a connection: %s",
					    full ? "too many connections open" : strerror(errno));
			}
			close(fd);
			continue;
		}
		Conn *conn = xnew0(Conn, 1);
		conn->fd = fd;
		conn->watch_fd = watch_fd;
		conn->refs = 1;
		conn->resets_window = now_usec(CLOCK_MONOTONIC);
		pthread_mutex_lock(&s->conn_lock);
		conn->next = s->conns;
		s->conns = conn;
		s->n_conns++;
		pthread_mutex_unlock(&s->conn_lock);
		grpc_server_add_channel_from_fd(s->server, fd, s->creds);
	}
}

/* Shuts the connections whose unread bytes wait with no call of theirs in our hands. */
static void conns_check_stalled(RpcServer *s)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);

	pthread_mutex_lock(&s->conn_lock);
	for (Conn *conn = s->conns; conn; conn = conn->next) {
		int queued = 0;
		if (conn->watch_fd < 0 || conn->shut)
			continue;
		if (conn->calls > 0 || ioctl(conn->watch_fd, SIOCINQ, &queued) < 0 || queued == 0)
			conn->stalled_since = 0;
		else if (conn->stalled_since == 0)
			conn->stalled_since = now;
		else if (now - conn->stalled_since > STALL_MAX)
			conn_shut_locked(conn, "bytes left unread with no call, seconds",
					 (unsigned)((now - conn->stalled_since) / USEC_PER_SEC));
	}
	pthread_mutex_unlock(&s->conn_lock);
}

static void *acceptor_main(void *userdata)
{
	RpcServer *s = userdata;
	_cleanup_free_ struct pollfd *pfds = NULL;
	_cleanup_free_ Conn **conns = NULL;
	size_t allocated = 0;

	for (;;) {
		pthread_mutex_lock(&s->conn_lock);
		if (2 + s->n_conns > allocated) {
			allocated = 2 * (2 + s->n_conns);
			pfds = xrealloc(pfds, allocated * sizeof(*pfds));
			conns = xrealloc(conns, allocated * sizeof(*conns));
		}
		pfds[0] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
		pfds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		size_t n = 2;
		for (Conn *conn = s->conns; conn; conn = conn->next)
			if (conn->watch_fd >= 0) {
				conns[n] = conn;
				pfds[n++] =
					(struct pollfd){.fd = conn->watch_fd, .events = POLLRDHUP};
			}
		pthread_mutex_unlock(&s->conn_lock);

		int r = poll(pfds, n, 1000);
		conns_check_stalled(s);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_error_errno(errno, "poll on the listening socket: %m");
			return NULL;
		}
		if (pfds[0].revents) { /* stopping: a client that comes now is refused */
			close(TAKE_FD(s->listen_fd));
			return NULL;
		}
		/* Only this thread closes watch_fd, so the connections polled are still there. */
		pthread_mutex_lock(&s->conn_lock);
		for (size_t i = 2; i < n; i++)
			if (pfds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
				conn_ended_locked(s, conns[i]);
		pthread_mutex_unlock(&s->conn_lock);
		if (pfds[1].revents & POLLIN)
			accept_all(s);
	}
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
	int r;

	s->config = *config;
	s->socket_path = xstrdup(config->socket_path);
	s->shutdown_tag = (Tag){TAG_SHUTDOWN, NULL};
	s->listen_fd = -EBADF;
	s->wake_fd = -EBADF;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&s->conn_lock, NULL);

	r = socket_claim(s->socket_path);
	if (r < 0)
		goto fail;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake_fd < 0) {
		r = negative_errno();
		goto fail;
	}
	r = socket_listen(s->socket_path, config->socket_mode, &s->listen_fd);
	if (r < 0)
		goto fail;
	s->bound = true;

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->quota = grpc_resource_quota_create("volplugd");
	grpc_resource_quota_resize(s->quota, MEMORY_QUOTA_BYTES);
	grpc_arg args[] = {
		{GRPC_ARG_INTEGER, GRPC_ARG_MAX_CONCURRENT_STREAMS, {.integer = STREAMS_MAX}},
		{GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = MESSAGE_MAX}},
		{GRPC_ARG_INTEGER, GRPC_ARG_MAX_METADATA_SIZE, {.integer = METADATA_MAX}},
		{GRPC_ARG_POINTER,
		 GRPC_ARG_RESOURCE_QUOTA,
		 {.pointer = {s->quota, grpc_resource_quota_arg_vtable()}}},
	};
	grpc_channel_args channel_args = {ELEMENTSOF(args), args};
	s->server = grpc_server_create(&channel_args, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	s->creds = grpc_insecure_server_credentials_create();
	grpc_server_start(s->server);

	for (unsigned i = 0; i < PENDING_REQUESTS; i++) {
		r = request_new_call(s);
		if (r < 0)
			goto fail;
	}
	r = workers_start(s, config->workers ? config->workers : 1);
	if (r < 0)
		goto fail;
	r = -pthread_create(&s->acceptor, NULL, acceptor_main, s);
	if (r < 0)
		goto fail;
	s->acceptor_started = true;
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
	atomic_store(&s->stopping, true);
	if (s->acceptor_started) {
		(void)eventfd_write(s->wake_fd, 1);
		pthread_join(s->acceptor, NULL);
	}
	if (s->server) {
		if (!s->stop_requested) { /* never run: no handler has a call */
			grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
			grpc_server_cancel_all_calls(s->server);
			while (poll_once(s))
				;
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
	if (s->creds)
		grpc_server_credentials_release(s->creds);
	if (s->quota)
		grpc_resource_quota_unref(s->quota);
	pthread_mutex_lock(&s->lock);
	s->quit = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	/* Every call is freed: what is left of a connection is its watch. */
	while (s->conns) {
		Conn *conn = s->conns;
		s->conns = conn->next;
		if (conn->watch_fd >= 0)
			close(conn->watch_fd);
		free(conn);
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->bound)
		(void)unlink(s->socket_path);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	free(s->socket_path);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->conn_lock);
	free(s);
}
