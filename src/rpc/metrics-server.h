/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's HTTP endpoint: GET /metrics (the metrics registry in the Prometheus text
 * format) and GET /healthz (200 "ok" when ready, 503 with the reason when not), on
 * libmicrohttpd: one thread of ours accepts and runs its epoll loop, so that no number of
 * clients makes threads, at most METRICS_SERVER_CONNECTIONS at once, each with a bounded buffer
 * and deadlines for its whole request and its whole answer; when every slot is taken, a new
 * client evicts a slow one. It serves nothing else and reads no request body. */
#pragma once

#define METRICS_SERVER_CONNECTIONS 64
/* Connections the kernel queues until the thread takes them: beyond it, a client's SYN is
 * retried with backoff, seconds later. */
#define METRICS_SERVER_BACKLOG 1024
#define METRICS_SERVER_REQUEST_MAX (16 * 1024) /* request line and headers */
/* A connection is dropped when its request is not all in this long after its accept (or after
 * its previous answer), however it trickles: a slowloris client holds a slot for no longer. */
#define METRICS_SERVER_REQUEST_SEC 5
#define METRICS_SERVER_ANSWER_SEC 5 /* ... or when it has not taken its answer this long after */
/* When every slot is taken, a new client evicts the oldest connection that has not sent its
 * request within this grace (a client sends it at once), or one that has not taken its answer
 * within a second. */
#define METRICS_SERVER_GRACE_MSEC 100
/* Connections taken from the listen queue at once, before those are read. */
#define METRICS_SERVER_ACCEPT_BATCH 8

typedef struct MetricsServer MetricsServer;

/* Whether the process is ready: 0, or a negative errno with *ret_error (malloc'ed) saying why
 * not. Runs on the server's thread. */
typedef int (*MetricsHealthFunc)(void *userdata, char **ret_error);

typedef struct MetricsServerConfig {
	const char *address; /* "HOST:PORT", "[V6]:PORT" or ":PORT" (every address); port 0: any */
	MetricsHealthFunc health;
	void *userdata;
} MetricsServerConfig;

/* Binds the address and starts serving on a thread of its own. Returns 0, or a negative errno
 * with *ret_error naming the address and the reason (-EINVAL: not HOST:PORT, -EADDRINUSE,
 * -ENOENT: libmicrohttpd cannot be loaded, ...). The first call loads libmicrohttpd.
 * Block the process's signals first: the thread inherits the mask. */
int metrics_server_new(const MetricsServerConfig *config, MetricsServer **ret, char **ret_error);

/* "HOST:PORT" as bound (the port chosen when 0 was asked). */
const char *metrics_server_address(const MetricsServer *s);

/* Stops serving (connections in progress are closed) and frees the server; NULL is a no-op. */
void metrics_server_free(MetricsServer *s);
