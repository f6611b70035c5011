/* SPDX-License-Identifier: Apache-2.0 */
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "alloc.h"
#include "log.h"
#include "metrics-server.h"
#include "metrics.h"
#include "strbuf.h"

struct MetricsServer {
	MetricsServerConfig config;
	struct MHD_Daemon *mhd;
	int fd;
	char *address;
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
		MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
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

int metrics_server_new(const MetricsServerConfig *config, MetricsServer **ret, char **ret_error)
{
	MetricsServer *s = xnew0(MetricsServer, 1);
	int r;

	s->config = *config;
	s->fd = -EBADF;
	r = listen_on(config->address, &s->fd, &s->address, ret_error);
	if (r < 0) {
		metrics_server_free(s);
		return r;
	}
	s->mhd = MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, s,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, s->fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_SERVER_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_SERVER_TIMEOUT_SEC,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_SERVER_REQUEST_MAX,
		MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	if (!s->mhd) {
		*ret_error = xasprintf("--metrics-address %s: cannot serve HTTP", config->address);
		metrics_server_free(s);
		return -EIO;
	}
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
	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* it does not close a socket it was handed */
	if (s->fd >= 0)
		close(s->fd);
	free(s->address);
	free(s);
}
