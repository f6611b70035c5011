/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <protobuf-c/protobuf-c.h>

#include "time-util.h"

typedef struct RpcClient RpcClient;

typedef struct RpcStatus {
	int code;      /* grpc_status_code */
	char *message; /* owned; may be NULL */
} RpcStatus;

void rpc_status_done(RpcStatus *st);

/* Turns "unix:///p", "unix:/p" or "/p" into the absolute socket path. Returns -EINVAL for
 * anything else (only unix sockets are served). */
int endpoint_to_path(const char *endpoint, char **ret_path);

/* Opens a channel to a unix-socket endpoint, with a connection of its own (not shared with
 * another client's). Does not connect yet. grpc_init() first. */
int rpc_client_new(const char *endpoint, RpcClient **ret);
void rpc_client_free(RpcClient *c);

/* One unary call; thread-safe. Returns 0 when the call completed (its gRPC status is in
 * *ret_status; *ret_reply is set only when the status is OK), or a negative errno when the
 * reply could not be decoded. Blocks up to timeout. */
int rpc_client_call(RpcClient *c, const char *method, const ProtobufCMessage *request,
		    const ProtobufCMessageDescriptor *reply_type, usec_t timeout,
		    ProtobufCMessage **ret_reply, RpcStatus *ret_status);

/* Takes one reply of a stream (rpc_client_stream()); the message is freed when it returns.
 * A negative return cancels the call. */
typedef int (*RpcStreamFunc)(const ProtobufCMessage *reply, void *userdata);

/* One call whose replies are a stream: fn gets each reply as it comes, decoded. Returns 0 when
 * the call completed (its gRPC status in *ret_status, messages received before an error
 * included), fn's negative return after cancelling the call, or -EBADMSG when a reply could
 * not be decoded. Blocks up to timeout for the whole stream; thread-safe. */
int rpc_client_stream(RpcClient *c, const char *method, const ProtobufCMessage *request,
		      const ProtobufCMessageDescriptor *reply_type, usec_t timeout,
		      RpcStreamFunc fn, void *userdata, RpcStatus *ret_status);

/* Like rpc_client_call() but sends raw bytes and returns raw reply bytes (malloc'ed). */
int rpc_client_call_raw(RpcClient *c, const char *method, const void *data, size_t size,
			usec_t timeout, void **ret_data, size_t *ret_size, RpcStatus *ret_status);
