/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "alloc.h"
#include "client.h"
#include "log.h"

struct RpcClient {
	grpc_channel *channel;
};

/* One pluck queue per calling thread, kept for its lifetime: creating one per call costs
 * more than the call itself on a unix socket. */
static pthread_key_t cq_key;
static pthread_once_t cq_once = PTHREAD_ONCE_INIT;

static void cq_destroy(void *p)
{
	grpc_completion_queue *cq = p;
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		       .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

static void cq_key_init(void)
{
	pthread_key_create(&cq_key, cq_destroy);
}

static grpc_completion_queue *thread_cq(void)
{
	pthread_once(&cq_once, cq_key_init);
	grpc_completion_queue *cq = pthread_getspecific(cq_key);
	if (!cq) {
		cq = grpc_completion_queue_create_for_pluck(NULL);
		pthread_setspecific(cq_key, cq);
	}
	return cq;
}

void rpc_status_done(RpcStatus *st)
{
	free(st->message);
	st->message = NULL;
}

int endpoint_to_path(const char *endpoint, char **ret_path)
{
	const char *p = endpoint;

	if (strncmp(p, "unix://", 7) == 0)
		p += 7;
	else if (strncmp(p, "unix:", 5) == 0)
		p += 5;
	if (p[0] != '/' || strlen(p) >= 108)
		return -EINVAL;
	*ret_path = xstrdup(p);
	return 0;
}

int rpc_client_new(const char *endpoint, RpcClient **ret)
{
	_cleanup_free_ char *path = NULL;
	int r = endpoint_to_path(endpoint, &path);
	if (r < 0)
		return r;

	_cleanup_free_ char *target = xasprintf("unix:%s", path);
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	RpcClient *c = xnew0(RpcClient, 1);
	/* Each client its own connection: gRPC would otherwise share one among the channels
	 * to the same target (its global subchannel pool). */
	grpc_arg arg = {.type = GRPC_ARG_INTEGER,
			.key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
			.value.integer = 1};
	grpc_channel_args args = {.num_args = 1, .args = &arg};
	c->channel = grpc_channel_create(target, creds, &args);
	grpc_channel_credentials_release(creds);
	*ret = c;
	return 0;
}

void rpc_client_free(RpcClient *c)
{
	if (!c)
		return;
	grpc_channel_destroy(c->channel);
	free(c);
}

static gpr_timespec deadline_after(usec_t timeout)
{
	return timeout == USEC_INFINITY
		       ? gpr_inf_future(GPR_CLOCK_REALTIME)
		       : gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
				      gpr_time_from_micros((int64_t)timeout, GPR_TIMESPAN));
}

/* Runs one batch on the thread's queue and waits for it: whether it succeeded. */
static bool batch_run(grpc_call *call, grpc_completion_queue *cq, const grpc_op *ops, size_t n)
{
	int tag;

	if (grpc_call_start_batch(call, ops, n, &tag, NULL) != GRPC_CALL_OK)
		return false;
	return grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		.success;
}

/* The reply bytes of a message, decoded; NULL when they are not a reply_type. */
static ProtobufCMessage *buffer_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d)
{
	grpc_byte_buffer_reader reader;
	ProtobufCMessage *m;

	if (!grpc_byte_buffer_reader_init(&reader, bb))
		return NULL;
	grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	m = protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	return m;
}

int rpc_client_stream(RpcClient *c, const char *method, const ProtobufCMessage *request,
		      const ProtobufCMessageDescriptor *reply_type, usec_t timeout,
		      RpcStreamFunc fn, void *userdata, RpcStatus *ret_status)
{
	grpc_completion_queue *cq = thread_cq();
	grpc_metadata_array initial_md, trailing_md;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[4] = {};
	int r = 0;

	grpc_slice method_slice = grpc_slice_from_copied_string(method);
	grpc_call *call =
		grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
					 method_slice, NULL, deadline_after(timeout), NULL);
	grpc_slice_unref(method_slice);

	size_t len = protobuf_c_message_get_packed_size(request);
	uint8_t *buf = xmalloc(len);
	protobuf_c_message_pack(request, buf);
	grpc_slice body = grpc_slice_new(buf, len, free);
	grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&body, 1);
	grpc_slice_unref(body);
	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);

	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	/* A failed send ends the call: its status says why. */
	if (batch_run(call, cq, ops, 4))
		for (;;) {
			grpc_byte_buffer *reply = NULL;
			grpc_op recv = {.op = GRPC_OP_RECV_MESSAGE};
			recv.data.recv_message.recv_message = &reply;
			if (!batch_run(call, cq, &recv, 1) || !reply)
				break; /* the end of the stream, or of the call */
			ProtobufCMessage *m = buffer_unpack(reply, reply_type);
			grpc_byte_buffer_destroy(reply);
			if (!m)
				r = -EBADMSG;
			else {
				r = fn(m, userdata);
				protobuf_c_message_free_unpacked(m, NULL);
			}
			if (r < 0) {
				grpc_call_cancel(call, NULL);
				break;
			}
		}
	grpc_op status = {.op = GRPC_OP_RECV_STATUS_ON_CLIENT};
	status.data.recv_status_on_client.trailing_metadata = &trailing_md;
	status.data.recv_status_on_client.status = &code;
	status.data.recv_status_on_client.status_details = &details;
	(void)batch_run(call, cq, &status, 1);
	if (r == 0) {
		ret_status->code = code;
		ret_status->message =
			GRPC_SLICE_LENGTH(details) > 0 ? grpc_slice_to_c_string(details) : NULL;
	}
	grpc_byte_buffer_destroy(req);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	grpc_call_unref(call);
	return r;
}

int rpc_client_call_raw(RpcClient *c, const char *method, const void *data, size_t size,
			usec_t timeout, void **ret_data, size_t *ret_size, RpcStatus *ret_status)
{
	grpc_completion_queue *cq = thread_cq();
	grpc_metadata_array initial_md, trailing_md;
	grpc_byte_buffer *reply = NULL;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6] = {};
	int tag;

	gpr_timespec deadline =
		timeout == USEC_INFINITY
			? gpr_inf_future(GPR_CLOCK_REALTIME)
			: gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
				       gpr_time_from_micros((int64_t)timeout, GPR_TIMESPAN));
	grpc_slice method_slice = grpc_slice_from_copied_string(method);
	grpc_call *call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
						   method_slice, NULL, deadline, NULL);
	grpc_slice_unref(method_slice);

	grpc_slice body = grpc_slice_from_copied_buffer(data, size);
	grpc_byte_buffer *request = grpc_raw_byte_buffer_create(&body, 1);
	grpc_slice_unref(body);
	grpc_metadata_array_init(&initial_md);
	grpc_metadata_array_init(&trailing_md);

	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = request;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &reply;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
	ops[5].data.recv_status_on_client.status = &code;
	ops[5].data.recv_status_on_client.status_details = &details;

	int r = 0;
	if (grpc_call_start_batch(call, ops, ELEMENTSOF(ops), &tag, NULL) != GRPC_CALL_OK)
		r = -EIO;
	else
		grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

	if (r == 0) {
		ret_status->code = code;
		ret_status->message =
			GRPC_SLICE_LENGTH(details) > 0 ? grpc_slice_to_c_string(details) : NULL;
		*ret_data = NULL;
		*ret_size = 0;
		if (code == GRPC_STATUS_OK && reply) {
			grpc_byte_buffer_reader reader;
			if (grpc_byte_buffer_reader_init(&reader, reply)) {
				grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
				grpc_byte_buffer_reader_destroy(&reader);
				*ret_size = GRPC_SLICE_LENGTH(s);
				*ret_data = xmalloc(*ret_size);
				memcpy(*ret_data, GRPC_SLICE_START_PTR(s), *ret_size);
				grpc_slice_unref(s);
			} else
				r = -EBADMSG;
		}
	}
	if (reply)
		grpc_byte_buffer_destroy(reply);
	grpc_byte_buffer_destroy(request);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial_md);
	grpc_metadata_array_destroy(&trailing_md);
	grpc_call_unref(call);
	return r;
}

int rpc_client_call(RpcClient *c, const char *method, const ProtobufCMessage *request,
		    const ProtobufCMessageDescriptor *reply_type, usec_t timeout,
		    ProtobufCMessage **ret_reply, RpcStatus *ret_status)
{
	size_t len = protobuf_c_message_get_packed_size(request), reply_len;
	_cleanup_free_ uint8_t *buf = xmalloc(len);
	_cleanup_free_ void *reply_data = NULL;
	RpcStatus st = {};

	protobuf_c_message_pack(request, buf);
	int r = rpc_client_call_raw(c, method, buf, len, timeout, &reply_data, &reply_len, &st);
	if (r < 0)
		return r;
	if (st.code == GRPC_STATUS_OK) {
		ProtobufCMessage *m =
			protobuf_c_message_unpack(reply_type, NULL, reply_len, reply_data);
		if (!m) {
			rpc_status_done(&st);
			return -EBADMSG;
		}
		*ret_reply = m;
	}
	*ret_status = st;
	return 0;
}
