/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rpc-call.h"
#include "inflight.h"
#include "backend.h"

typedef enum {
	DRIVER_MODE_ALL,
	DRIVER_MODE_CONTROLLER,
	DRIVER_MODE_NODE,
} DriverMode;

/* Everything a CSI handler needs, shared by all worker threads. Fields are set before the
 * server starts and read-only afterwards; mutable state lives in the objects pointed to,
 * each with its own lock. */
typedef struct Driver {
	DriverMode mode;
	const char *name;
	const char *version;
	const char *node_id;
	usec_t coalesce_window;
	int fs_group_policy; /* OwnershipPolicy when a volume names none */
	/* Every node runs its own controller (--distributed): Kubernetes cannot route a publish,
	 * an expand or a modify to a volume's node, so none is advertised, and NodeExpandVolume
	 * grows the volume. */
	bool distributed;
	usec_t started; /* CLOCK_MONOTONIC; set by driver_init() */

	Backend **backends;	     /* the default first (backend.h); owned */
	Inflight *inflight;	     /* keys of the calls being served */
	struct Coalescer *coalescer; /* controller: expand + modify merging */
	struct FlexRegistry *flex;   /* Flexvolume drivers (the prober's); NULL: Flexvolume off */
} Driver;

/* Sets up the driver's shared state for its mode. */
int driver_init(Driver *d);
void driver_done(Driver *d);

/* Whether every backend can serve requests now (each one's probe): 0, or the first failure's
 * errno with *ret_error (malloc'ed) saying why. What Probe answers and /healthz serves. */
int driver_probe(Driver *d, char **ret_error);

/* A BackendReportFunc: warns once about each problem a backend found as it started (a damaged
 * volume once per process, whoever finds it). */
void driver_backend_report(const char *volume_id, const char *message, void *userdata);

static inline bool driver_has_controller(const Driver *d)
{
	return d->mode == DRIVER_MODE_ALL || d->mode == DRIVER_MODE_CONTROLLER;
}

static inline bool driver_has_node(const Driver *d)
{
	return d->mode == DRIVER_MODE_ALL || d->mode == DRIVER_MODE_NODE;
}

/* A CSI handler: the request as decoded (protobuf-c structs are plain C), the reply in *ret
 * (heap: the server frees it), or a negative errno and *ret_error, a message for the user that
 * names the field or object at fault. It never sees the RPC itself, so it runs in a unit test
 * as well as on the server. */
typedef int (*CsiHandler)(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  char **ret_error);

/* Where a streaming handler sends its replies: send() returns 0 or -ECANCELED (the client is
 * gone: stop); cancelled() says so without sending (may be NULL). The server's adapter sends
 * on the wire; a unit test collects. */
typedef struct CsiStream {
	int (*send)(const ProtobufCMessage *reply, void *userdata);
	bool (*cancelled)(void *userdata);
	void *userdata;
} CsiStream;

/* A CSI handler whose replies are a stream: sends them through out, then returns 0 or a
 * negative errno with *ret_error (replies sent before stay sent). */
typedef int (*CsiStreamHandler)(Driver *d, const ProtobufCMessage *req, const CsiStream *out,
				char **ret_error);

/* csi_call() for a streaming handler. */
int csi_call_stream(Driver *d, CsiStreamHandler handler, const ProtobufCMessage *req,
		    const CsiStream *out, char **ret_error);

/* Runs handler on req as the server does: csi_request_check() first (maps within their
 * limits, strings UTF-8), then the handler. Returns what the handler returns. */
int csi_call(Driver *d, CsiHandler handler, const ProtobufCMessage *req, ProtobufCMessage **ret,
	     char **ret_error);

/* The method table the running mode serves; static storage. */
const RpcMethod *csi_methods(DriverMode mode, size_t *ret_n);

const char *driver_mode_to_string(DriverMode m);
int driver_mode_from_string(const char *s);

/* Identity handlers. */
int identity_get_plugin_info(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error);
int identity_get_plugin_capabilities(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				     char **ret_error);
int identity_probe(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		   char **ret_error);
