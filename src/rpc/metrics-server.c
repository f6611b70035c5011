/* SPDX-License-Identifier: Apache-2.0 */
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "alloc.h"
#include "dlopen-util.h"
#include "log.h"
#include "metrics-server.h"
#include "metrics.h"
#include "strbuf.h"
#include "time-util.h"

/* libmicrohttpd and gnutls with what it needs are 2.5 MiB of an idle daemon's resident set:
 * loaded when the endpoint is asked for (--metrics-address), not linked. */
#define LIBMICROHTTPD "libmicrohttpd.so.12"

static struct {
	__typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
	__typeof__(MHD_add_response_header) *add_response_header;
	__typeof__(MHD_queue_response) *queue_response;
	__typeof__(MHD_destroy_response) *destroy_response;
	__typeof__(MHD_get_connection_info) *get_connection_info;
	__typeof__(MHD_add_connection) *add_connection;
	__typeof__(MHD_get_daemon_info) *get_daemon_info;
	__typeof__(MHD_get_timeout) *get_timeout;
	__typeof__(MHD_run) *run;
	__typeof__(MHD_start_daemon) *start_daemon;
	__typeof__(MHD_stop_daemon) *stop_daemon;
} mhd;

static const DlSym mhd_syms[] = {
	DL_SYM(mhd, create_response_from_buffer, "MHD_"),
	DL_SYM(mhd, add_response_header, "MHD_"),
	DL_SYM(mhd, queue_response, "MHD_"),
	DL_SYM(mhd, destroy_response, "MHD_"),
	DL_SYM(mhd, get_connection_info, "MHD_"),
	DL_SYM(mhd, add_connection, "MHD_"),
	DL_SYM(mhd, get_daemon_info, "MHD_"),
	DL_SYM(mhd, get_timeout, "MHD_"),
	DL_SYM(mhd, run, "MHD_"),
	DL_SYM(mhd, start_daemon, "MHD_"),
	DL_SYM(mhd, stop_daemon, "MHD_"),
};

static DlLibrary mhd_library = DL_LIBRARY(LIBMICROHTTPD, mhd_syms);

METRIC_DEFINE(dropped, METRIC_COUNTER, "volplug_metrics_connections_dropped_total",
	      "Connections to the metrics endpoint it closed: a request not in or an answer not "
	      "taken in time, or evicted for a new client",
	      "reason");

/* One connection libmicrohttpd holds, from its accept to its close. */
typedef struct Conn Conn;
struct Conn {
	Conn *prev, *next; /* in the order of accept */
	int fd;
	usec_t since;	/* CLOCK_MONOTONIC: its accept or last answer (waiting), its request */
	bool answering; /* its request is in, its answer going out */
	bool dropped;	/* shut down: libmicrohttpd closes it at its next turn */
};

struct MetricsServer {
	MetricsServerConfig config;
	struct MHD_Daemon *mhd;
	int fd;	     /* listening; the server's thread accepts */
	int stop_fd; /* eventfd: metrics_server_free() asks the thread to end */
	pthread_t thread;
	bool started;
	char *address;
	/* The connections, touched only on the server's thread (every libmicrohttpd callback runs
	 * there) once it has started, and by metrics_server_free() after it has ended. */
	Conn *head, *tail;
	unsigned n_live;	    /* connections not dropped */
	usec_t accept_paused_until; /* out of fds: let the listen queue wait a moment */
};

/* "HOST:PORT" -> host (NULL for every address) and port; "[::1]:9808" too. */
static int address_split(const char *address, char **ret_host, char **ret_port)
{
	const char *colon = strrchr(address, ':');
	const char *host = address;
	size_t host_len;

	if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -EINVAL;
	host_len = (size_t)(colon - address);
	if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
		host++;
		host_len -= 2;
	} else if (memchr(host, ':', host_len))
		return -EINVAL; /* an IPv6 address without brackets */
	*ret_host = host_len ? xstrndup(host, host_len) : NULL;
	*ret_port = xstrdup(colon + 1);
	return 0;
}

static char *sockaddr_to_string(const struct sockaddr *sa, socklen_t len)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		return xstrdup("?");
	return sa->sa_family == AF_INET6 ? xasprintf("[%s]:%s", host, port)
					 : xasprintf("%s:%s", host, port);
}

/* A listening socket on the address, and the address as bound. */
static int listen_on(const char *address, int *ret_fd, char **ret_bound, char **ret_error)
{
	_cleanup_free_ char *host = NULL, *port = NULL;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	struct sockaddr_storage bound;
	socklen_t len = sizeof(bound);
	int r;

	if (address_split(address, &host, &port) < 0) {
		*ret_error = xasprintf("--metrics-address '%s': want HOST:PORT", address);
		return -EINVAL;
	}
	r = getaddrinfo(host, port, &hints, &ai);
	if (r != 0) {
		*ret_error = xasprintf("--metrics-address %s: %s", address, gai_strerror(r));
		return -EADDRNOTAVAIL;
	}
	_cleanup_close_ int fd =
		socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, METRICS_SERVER_BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&bound, &len) < 0) {
		r = negative_errno();
		freeaddrinfo(ai);
		*ret_error = xasprintf("--metrics-address %s: %s", address, strerror(-r));
		return r;
	}
	freeaddrinfo(ai);
	*ret_bound = sockaddr_to_string((struct sockaddr *)&bound, len);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body)
{
	struct MHD_Response *resp =
		mhd.create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		mhd.add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result r = mhd.queue_response(conn, status, resp);
	mhd.destroy_response(resp);
	return r;
}

static enum MHD_Result serve_metrics(struct MHD_Connection *conn)
{
	StrBuf b = {};
	metrics_render(&b);
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		     strbuf_steal(&b));
}

static enum MHD_Result serve_health(MetricsServer *s, struct MHD_Connection *conn)
{
	_cleanup_free_ char *error = NULL;
	int r = s->config.health ? s->config.health(s->config.userdata, &error) : 0;

	if (r < 0)
		return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
			     xasprintf("not ready: %s\n", error ?: strerror(-r)));
	return reply(conn, MHD_HTTP_OK, "text/plain; charset=utf-8", xstrdup("ok\n"));
}

static Conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
		mhd.get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return info ? info->socket_context : NULL;
}

static usec_t conn_deadline(const Conn *c)
{
	usec_t sec = c->answering ? METRICS_SERVER_ANSWER_SEC : METRICS_SERVER_REQUEST_SEC;
	return c->since + sec * USEC_PER_SEC;
}

/* From when the connection may be evicted for a new one: a client that has not sent its
 * request by then is slow, as is one that has not taken its answer within a second. */
static usec_t conn_evictable(const Conn *c)
{
	return c->since + (c->answering ? USEC_PER_SEC : METRICS_SERVER_GRACE_MSEC * USEC_PER_MSEC);
}

/* The request is in: from now on the connection has METRICS_SERVER_ANSWER_SEC to take its
 * answer. */
static void conn_answering(struct MHD_Connection *conn)
{
	Conn *c = conn_of(conn);
	if (!c)
		return;
	c->answering = true;
	c->since = now_usec(CLOCK_MONOTONIC);
}

/* The answer is out (or the request was cut short): a connection kept alive has
 * METRICS_SERVER_REQUEST_SEC for its next request, as a new one has. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
			 enum MHD_RequestTerminationCode toe)
{
	Conn *c = conn_of(conn);
	(void)cls;
	(void)state;
	(void)toe;
	if (!c)
		return;
	c->answering = false;
	c->since = now_usec(CLOCK_MONOTONIC);
}

/* libmicrohttpd calls this once the request line and headers are in, and again when the body
 * has been read. A GET is answered at the second call, so the connection can serve the next
 * scrape; any other method at the first, without reading its body: the answer goes out at
 * once and the connection is closed. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **state)
{
	static int seen;
	MetricsServer *s = cls;
	(void)version;
	(void)upload_data;

	if (!*state)
		conn_answering(conn);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
			     xstrdup("only GET and HEAD\n"));
	if (!*state) {
		*state = &seen;
		return MHD_YES;
	}
	*upload_data_size = 0; /* a body sent with a GET is dropped */
	if (strcmp(url, "/metrics") == 0)
		return serve_metrics(conn);
	if (strcmp(url, "/healthz") == 0)
		return serve_health(s, conn);
	return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8",
		     xstrdup("not found: try /metrics or /healthz\n"));
}

/* libmicrohttpd's own complaints (a malformed request, the connection limit): debug only, or
 * a flood of garbage would flood the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	log_debug("metrics endpoint: %s", buf);
}

/* A connection libmicrohttpd took (in MHD_add_connection()) or let go of. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	MetricsServer *s = cls;
	Conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info =
			mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		c = xnew0(Conn, 1);
		c->fd = info ? info->connect_fd : -EBADF;
		c->since = now_usec(CLOCK_MONOTONIC);
		c->prev = s->tail;
		if (s->tail)
			s->tail->next = c;
		else
			s->head = c;
		s->tail = c;
		s->n_live++;
		*socket_context = c;
		return;
	}
	if (!c)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;
	if (!c->dropped)
		s->n_live--;
	free(c);
	*socket_context = NULL;
}

/* Ends a connection from outside libmicrohttpd, which has no call for it: a shutdown() makes
 * its socket hang up, and libmicrohttpd closes it at its next turn. Only on the server's
 * thread, where the socket cannot be closed (and its number reused) under us. */
static void conn_drop(MetricsServer *s, Conn *c, const char *reason, const char *why)
{
	log_debug("metrics endpoint: dropping a connection: %s", why);
	metric_inc(&dropped, reason);
	if (c->fd >= 0)
		(void)shutdown(c->fd, SHUT_RDWR);
	c->dropped = true;
	s->n_live--;
}

/* The connection to make room with when every slot is taken: the oldest that has not sent its
 * whole request within the grace, else the oldest too slow to take its answer; NULL when
 * there is none (yet). */
static Conn *conn_to_evict(MetricsServer *s, usec_t now)
{
	Conn *slow = NULL;

	for (Conn *c = s->head; c; c = c->next) {
		if (c->dropped || now < conn_evictable(c))
			continue;
		if (!c->answering)
			return c;
		if (!slow)
			slow = c;
	}
	return slow;
}

/* Takes what the listen queue holds, a few at a time so that the connections just taken are
 * read before more come; when every slot is taken, one evicted for each. With none to evict,
 * clients wait in the listen queue: a new one is never evicted before its grace is over, so
 * that a flood of new connections cannot push out the probe that came among them. */
static void accept_some(MetricsServer *s)
{
	for (unsigned i = 0; i < METRICS_SERVER_ACCEPT_BATCH; i++) {
		usec_t now = now_usec(CLOCK_MONOTONIC);
		bool full = s->n_live >= METRICS_SERVER_CONNECTIONS;
		if (full && !conn_to_evict(s, now))
			return;
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int fd = accept4(s->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				log_debug_errno(-errno, "metrics endpoint: accept: %m");
				s->accept_paused_until = now + 100 * USEC_PER_MSEC;
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			continue; /* ECONNABORTED and the like: that client is gone */
		}
		if (full) {
			Conn *victim = conn_to_evict(s, now);
			conn_drop(s, victim, "evicted",
				  victim->answering
					  ? "too slow to take its answer, and a client came"
					  : "its request is unfinished, and a client came");
		}
		/* It closes the socket when it cannot take it. */
		if (mhd.add_connection(s->mhd, fd, (struct sockaddr *)&sa, len) != MHD_YES)
			log_debug_errno(-errno, "metrics endpoint: cannot serve a connection: %m");
	}
}

/* Drops every connection past its deadline; returns when to look again: the next deadline,
 * or, when every slot is taken, the moment one becomes evictable. */
static usec_t drop_late(MetricsServer *s, usec_t now)
{
	bool full = s->n_live >= METRICS_SERVER_CONNECTIONS;
	usec_t next = USEC_INFINITY;

	for (Conn *c = s->head; c; c = c->next) {
		if (c->dropped)
			continue;
		usec_t deadline = conn_deadline(c);
		if (deadline <= now) {
			if (c->answering)
				conn_drop(s, c, "answer_timeout",
					  "its answer is not taken in time");
			else
				conn_drop(s, c, "request_timeout", "its request is not in in time");
			continue;
		}
		next = MIN(next, deadline);
		if (full && conn_evictable(c) > now)
			next = MIN(next, conn_evictable(c));
	}
	return next;
}

/* The server's thread: libmicrohttpd's epoll set, the listen socket and the stop eventfd in
 * one poll(), woken as well at the next deadline. */
static void *serve(void *userdata)
{
	MetricsServer *s = userdata;
	const union MHD_DaemonInfo *info = mhd.get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);

	for (;;) {
		usec_t now = now_usec(CLOCK_MONOTONIC);
		usec_t until = drop_late(s, now);
		MHD_UNSIGNED_LONG_LONG ms;
		bool accepting = now >= s->accept_paused_until &&
				 (s->n_live < METRICS_SERVER_CONNECTIONS || conn_to_evict(s, now));

		if (mhd.get_timeout(s->mhd, &ms) == MHD_YES)
			until = MIN(until, now + (usec_t)ms * USEC_PER_MSEC);
		if (now < s->accept_paused_until)
			until = MIN(until, s->accept_paused_until);
		struct pollfd p[] = {
			{.fd = s->stop_fd, .events = POLLIN},
			{.fd = info->epoll_fd, .events = POLLIN},
			{.fd = accepting ? s->fd : -1, .events = POLLIN},
		};
		if (poll(p, ELEMENTSOF(p), poll_timeout_ms(now, until)) < 0 && errno != EINTR) {
			log_error_errno(-errno, "metrics endpoint: poll: %m");
			break;
		}
		if (p[0].revents)
			break;
		mhd.run(s->mhd);
		if (p[2].revents)
			accept_some(s);
	}
	return NULL;
}

int metrics_server_new(const MetricsServerConfig *config, MetricsServer **ret, char **ret_error)
{
	MetricsServer *s = xnew0(MetricsServer, 1);
	int r;

	s->config = *config;
	s->fd = -EBADF;
	s->stop_fd = -EBADF;
	_cleanup_free_ char *error = NULL;
	r = dl_library_load(&mhd_library, &error);
	if (r < 0) {
		*ret_error = xasprintf("--metrics-address %s: %s", config->address, error);
		metrics_server_free(s);
		return r;
	}
	r = listen_on(config->address, &s->fd, &s->address, ret_error);
	if (r < 0) {
		metrics_server_free(s);
		return r;
	}
	/* The accepts are ours (accept_some()), and so is the loop: libmicrohttpd has no deadline
	 * for a whole request (its timeout is per idle moment, which a trickle resets) and no call
	 * to end a connection, and never evicts one to let a new client in. Its limit is above
	 * ours: dropped connections count there until its next turn. */
	s->mhd = mhd.start_daemon(
		MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)(2 * METRICS_SERVER_CONNECTIONS + METRICS_SERVER_ACCEPT_BATCH),
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_SERVER_REQUEST_MAX,
		MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	if (!s->mhd) {
		*ret_error = xasprintf("--metrics-address %s: cannot serve HTTP", config->address);
		metrics_server_free(s);
		return -EIO;
	}
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r = s->stop_fd < 0 ? negative_errno() : -pthread_create(&s->thread, NULL, serve, s);
	if (r < 0) {
		*ret_error = xasprintf("--metrics-address %s: cannot start serving: %s",
				       config->address, strerror(-r));
		metrics_server_free(s);
		return r;
	}
	s->started = true;
	*ret = s;
	return 0;
}

const char *metrics_server_address(const MetricsServer *s)
{
	return s->address;
}

void metrics_server_free(MetricsServer *s)
{
	if (!s)
		return;
	if (s->started) {
		uint64_t one = 1;
		if (write(s->stop_fd, &one, sizeof(one)) < 0)
			log_debug_errno(-errno, "metrics endpoint: cannot wake its thread: %m");
		pthread_join(s->thread, NULL);
	}
	if (s->mhd)
		mhd.stop_daemon(s->mhd); /* closes every connection: on_connection() frees each */
	while (s->head) { /* none is left; this is for a libmicrohttpd that forgot one */
		Conn *c = s->head;
		s->head = c->next;
		free(c);
	}
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	free(s->address);
	free(s);
}
