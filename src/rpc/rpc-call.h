/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <protobuf-c/protobuf-c.h>

#include "macro.h"
#include "time-util.h"

/* One incoming RPC as a handler sees it. Owned by the server; valid during the handler. */
typedef struct RpcCall RpcCall;

/* A handler: returns 0 and a heap-allocated reply in *ret_reply (the server frees it with
 * protobuf_c_message_free_unpacked, so every part of it must be malloc'ed), or a negative
 * errno, mapped by the status table, with a message set by rpc_fail(). Runs on a worker
 * thread and may block. */
typedef int (*RpcHandler)(RpcCall *call, const ProtobufCMessage *request,
			  ProtobufCMessage **ret_reply);

/* A server-streaming handler: sends its replies with rpc_call_send(), as many as it has, then
 * returns 0 (the server ends the stream with OK) or a negative errno with a message set by
 * rpc_fail() (the stream ends with that status after the replies sent). Runs on a worker
 * thread and may block. */
typedef int (*RpcStreamHandler)(RpcCall *call, const ProtobufCMessage *request);

typedef struct RpcMethod {
	const char *path; /* "/csi.v1.Identity/Probe" */
	const ProtobufCMessageDescriptor *request;
	RpcHandler handler;
	/* Set instead of handler for a method whose replies are a stream. */
	RpcStreamHandler stream;
	const void *data; /* for the handler: rpc_call_method_data() */
	/* Answers from what it holds, in microseconds, and never blocks: run by the thread
	 * that received the request instead of being handed to a worker. */
	bool cheap;
} RpcMethod;

/* Records the message the client will see with the status for err. Returns err (negative),
 * so a handler can `return rpc_fail(call, -EINVAL, "volume_id: missing");`. */
int rpc_fail(RpcCall *call, int err, const char *fmt, ...) _printf_(3, 4);

/* Sends one reply of a streaming call and waits until gRPC took it (flow control: at most one
 * message of the call is in the server's hands, however slowly the client reads). Returns 0,
 * or -ECANCELED when the client cancelled, its deadline passed or the connection broke: the
 * handler stops and returns. Blocks; the message stays the caller's. */
int rpc_call_send(RpcCall *call, const ProtobufCMessage *reply);

/* True once the client cancelled or its deadline passed: the handler should stop early. */
bool rpc_call_cancelled(RpcCall *call);

/* The client's deadline on CLOCK_MONOTONIC, or USEC_INFINITY. */
usec_t rpc_call_deadline(RpcCall *call);

/* The method's short name ("CreateVolume"). */
const char *rpc_call_method(RpcCall *call);

/* The method's RpcMethod.data (one handler may serve several methods). */
const void *rpc_call_method_data(RpcCall *call);

/* The pointer given as RpcServerConfig.userdata. */
void *rpc_call_userdata(RpcCall *call);
