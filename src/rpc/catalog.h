/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <protobuf-c/protobuf-c.h>

/* A method of one of the services volplug speaks, as a client sees it. */
typedef struct RpcMethodInfo {
	char path[128]; /* "/csi.v1.Controller/CreateVolume" */
	const ProtobufCMethodDescriptor *method;
	const ProtobufCMessageDescriptor *request, *reply;
	bool server_streaming; /* its replies are a stream of reply messages */
} RpcMethodInfo;

/* Whether the method of a full path ("/csi.v1.SnapshotMetadata/GetMetadataDelta") answers
 * with a stream of messages. */
bool rpc_method_server_streaming(const char *path);

/* Finds a method by its short name ("CreateVolume"), "Service/Method" or full path. Returns
 * 0 or -ENOENT. */
int rpc_catalog_lookup(const char *name, RpcMethodInfo *ret);

/* Calls fn for every method of every service, in order. */
void rpc_catalog_foreach(void (*fn)(const RpcMethodInfo *info, void *userdata), void *userdata);
