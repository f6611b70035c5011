/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

#include "rpc-call.h"

typedef struct RpcServer RpcServer;

typedef struct RpcServerConfig {
	const char *socket_path; /* absolute path of the unix socket */
	mode_t socket_mode;	 /* 0600 unless told otherwise */
	unsigned workers;	 /* handler threads */
	const RpcMethod *methods;
	size_t n_methods;
	void *userdata;	       /* handed to handlers through rpc_call_userdata() */
	usec_t shutdown_grace; /* in-flight calls get this long after stop, then are cancelled */
} RpcServerConfig;

/* Binds the socket and starts the worker threads. A stale socket file is replaced; a live
 * server on the path gives -EADDRINUSE. grpc_init() must have been called. The config's
 * method table must outlive the server. */
int rpc_server_new(const RpcServerConfig *config, RpcServer **ret);

/* Serves until rpc_server_stop() and every in-flight call has finished: no new call is taken
 * once stopping; the calls still running after the grace period are cancelled, and their
 * handlers are waited for all the same (one that ignores rpc_call_cancelled() holds the
 * exit up). Blocks; call it from one thread only. */
int rpc_server_run(RpcServer *s);

/* Asks a running server to stop: thread-safe, returns at once. */
void rpc_server_stop(RpcServer *s);

/* Stops the workers, removes the socket file and frees the server. */
void rpc_server_free(RpcServer *s);

/* Tells whether a server answers on a unix socket path: 1 yes, 0 no (stale or absent),
 * negative errno when the path is not a socket. */
int unix_socket_alive(const char *path);
