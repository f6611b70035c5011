/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl is loaded when the first pool is made, not linked: it and the libraries it needs
 * (Kerberos, LDAP, libssh2, ...) are 2 MiB of the resident set of a daemon that never speaks
 * to AWS. */
#define CURL_DISABLE_TYPECHECK /* its macros name the functions, which are pointers here */
#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "aws-http.h"
#include "dlopen-util.h"
#include "log.h"
#include "strbuf.h"
#include "version.h"

#define HTTP_MAX_REPLY_DEFAULT ((size_t)16 << 20)
#define HTTP_MAX_IDLE_DEFAULT 8

struct HttpPool {
	pthread_mutex_t lock; /* guards idle and n_idle */
	CURL **idle;
	size_t n_idle, max_idle;
};

#define LIBCURL "libcurl.so.4"

static struct {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *easy_init;
	__typeof__(curl_easy_setopt) *easy_setopt;
	__typeof__(curl_easy_perform) *easy_perform;
	__typeof__(curl_easy_getinfo) *easy_getinfo;
	__typeof__(curl_easy_reset) *easy_reset;
	__typeof__(curl_easy_cleanup) *easy_cleanup;
	__typeof__(curl_easy_strerror) *easy_strerror;
	__typeof__(curl_slist_append) *slist_append;
	__typeof__(curl_slist_free_all) *slist_free_all;
} curl;

static const DlSym curl_syms[] = {
	DL_SYM(curl, global_init, "curl_"),  DL_SYM(curl, easy_init, "curl_"),
	DL_SYM(curl, easy_setopt, "curl_"),  DL_SYM(curl, easy_perform, "curl_"),
	DL_SYM(curl, easy_getinfo, "curl_"), DL_SYM(curl, easy_reset, "curl_"),
	DL_SYM(curl, easy_cleanup, "curl_"), DL_SYM(curl, easy_strerror, "curl_"),
	DL_SYM(curl, slist_append, "curl_"), DL_SYM(curl, slist_free_all, "curl_"),
};

static DlLibrary curl_library = DL_LIBRARY(LIBCURL, curl_syms);

#define curl_global_init curl.global_init
#define curl_easy_init curl.easy_init
#undef curl_easy_setopt /* curl.h's pass-through macros */
#undef curl_easy_getinfo
#define curl_easy_setopt curl.easy_setopt
#define curl_easy_perform curl.easy_perform
#define curl_easy_getinfo curl.easy_getinfo
#define curl_easy_reset curl.easy_reset
#define curl_easy_cleanup curl.easy_cleanup
#define curl_easy_strerror curl.easy_strerror
#define curl_slist_append curl.slist_append
#define curl_slist_free_all curl.slist_free_all

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static bool curl_load(void)
{
	_cleanup_free_ char *error = NULL;

	if (dl_library_load(&curl_library, &error) < 0) {
		log_error("%s", error);
		return false;
	}
	return true;
}

static void curl_init_once(void)
{
	curl_init_result = curl_load() ? curl_global_init(CURL_GLOBAL_DEFAULT) : CURLE_FAILED_INIT;
}

HttpPool *http_pool_new(size_t max_idle)
{
	HttpPool *p = xnew0(HttpPool, 1);

	/* curl_global_init() is not thread-safe in every libcurl: once, before any handle. */
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_result != CURLE_OK)
		abort();
	pthread_mutex_init(&p->lock, NULL);
	p->max_idle = max_idle ? max_idle : HTTP_MAX_IDLE_DEFAULT;
	p->idle = xnew0(CURL *, p->max_idle);
	return p;
}

void http_pool_free(HttpPool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_idle; i++)
		curl_easy_cleanup(p->idle[i]);
	pthread_mutex_destroy(&p->lock);
	free(p->idle);
	free(p);
}

static CURL *pool_take(HttpPool *p)
{
	CURL *h = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n_idle > 0)
		h = p->idle[--p->n_idle];
	pthread_mutex_unlock(&p->lock);
	if (h)
		return h;
	h = curl_easy_init();
	if (!h)
		abort(); /* out of memory, as xmalloc would */
	return h;
}

/* Hands h back, forgetting its options but keeping its connections for the next call. */
static void pool_give(HttpPool *p, CURL *h)
{
	curl_easy_reset(h);
	pthread_mutex_lock(&p->lock);
	if (p->n_idle < p->max_idle) {
		p->idle[p->n_idle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	if (h)
		curl_easy_cleanup(h);
}

void http_reply_done(HttpReply *r)
{
	free(r->body);
	strmap_done(&r->headers);
	*r = (HttpReply){};
}

typedef struct Sink {
	StrBuf buf;
	size_t max;
	bool overflow;
} Sink;

static size_t sink_write(char *data, size_t size, size_t n, void *userdata)
{
	Sink *s = userdata;
	size_t len = size * n;

	if (len > s->max - s->buf.len) {
		s->overflow = true;
		return 0; /* libcurl stops with CURLE_WRITE_ERROR */
	}
	strbuf_add(&s->buf, data, len);
	return len;
}

static size_t header_write(char *data, size_t size, size_t n, void *userdata)
{
	Strmap *headers = userdata;
	size_t len = size * n;
	const char *colon = memchr(data, ':', len);

	if (strncmp(data, "HTTP/", MIN(len, (size_t)5)) == 0)
		strmap_done(headers); /* a new reply (after 100 Continue or a redirect) */
	if (!colon)
		return len;
	_cleanup_free_ char *name = xstrndup(data, (size_t)(colon - data));
	const char *v = colon + 1, *end = data + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	for (char *c = name; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	_cleanup_free_ char *value = xstrndup(v, (size_t)(end - v));
	strmap_set(headers, name, value);
	return len;
}

static int curl_code_to_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EINVAL;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_HTTP2:
		return -EPROTO;
	default:
		return -EIO;
	}
}

bool http_error_transient(int r)
{
	return r == -ETIMEDOUT || r == -ECONNREFUSED || r == -ECONNRESET || r == -EHOSTUNREACH;
}

/* The transfer's time budget in ms (>= 1), 0 for none, or -ETIMEDOUT when none is left. */
static long timeout_ms(const HttpRequest *req)
{
	usec_t now = now_usec(CLOCK_MONOTONIC), left = USEC_INFINITY;

	if (req->deadline != USEC_INFINITY) {
		if (req->deadline <= now)
			return -ETIMEDOUT;
		left = req->deadline - now;
	}
	if (req->attempt_timeout > 0 && req->attempt_timeout < left)
		left = req->attempt_timeout;
	if (left == USEC_INFINITY)
		return 0;
	return (long)((left + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

static int set_method(CURL *h, const HttpRequest *req)
{
	const char *body = req->body ? req->body : "";

	if (strcmp(req->method, "GET") == 0)
		return 0;
	if (strcmp(req->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		return 0;
	}
	if (strcmp(req->method, "DELETE") == 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
		return 0;
	}
	if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "PUT") != 0)
		return -EINVAL;
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	if (strcmp(req->method, "PUT") == 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	return 0;
}

static struct curl_slist *make_headers(const HttpRequest *req)
{
	struct curl_slist *list = NULL;

	for (const char *const *hdr = req->headers; hdr && *hdr; hdr++) {
		struct curl_slist *l = curl_slist_append(list, *hdr);
		if (!l)
			abort();
		list = l;
	}
	return list;
}

int http_perform(HttpPool *p, const HttpRequest *req, HttpReply *ret, char **ret_error)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	Sink sink = {.max = req->max_reply ? req->max_reply : HTTP_MAX_REPLY_DEFAULT};
	long timeout = timeout_ms(req), status = 0;
	Strmap reply_headers = {};
	int r;

	if (timeout < 0) {
		if (ret_error)
			*ret_error = xasprintf("%s %s: no time left before the deadline",
					       req->method, req->url);
		return -ETIMEDOUT;
	}

	CURL *h = pool_take(p);
	struct curl_slist *headers = make_headers(req);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_write);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &reply_headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "volplug/" VOLPLUG_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	if (req->no_proxy)
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (req->sigv4) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, req->sigv4);
		curl_easy_setopt(h, CURLOPT_USERNAME, req->access_key);
		curl_easy_setopt(h, CURLOPT_PASSWORD, req->secret_key);
	}
	r = set_method(h, req);
	if (r == 0) {
		CURLcode c = curl_easy_perform(h);
		if (c == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		else if (c == CURLE_WRITE_ERROR && sink.overflow)
			r = -EFBIG;
		else
			r = curl_code_to_errno(c);
		if (r < 0 && ret_error)
			*ret_error =
				r == -EFBIG ? xasprintf("%s %s: reply larger than %zu bytes",
							req->method, req->url, sink.max)
					    : xasprintf("%s %s: %s", req->method, req->url,
							errbuf[0] ? errbuf : curl_easy_strerror(c));
	} else if (ret_error)
		*ret_error = xasprintf("%s %s: unsupported method", req->method, req->url);
	curl_slist_free_all(headers);
	pool_give(p, h);
	if (r < 0) {
		strbuf_done(&sink.buf);
		strmap_done(&reply_headers);
		return r;
	}
	*ret = (HttpReply){.status = status, .body_len = sink.buf.len, .headers = reply_headers};
	ret->body = strbuf_steal(&sink.buf);
	return 0;
}

static char *encode(const char *s, bool form)
{
	static const char hex[] = "0123456789ABCDEF";
	StrBuf b = {};

	strbuf_adds(&b, "");
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		    (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.' || *c == '~') {
			strbuf_add(&b, c, 1);
		} else if (form && *c == ' ') {
			strbuf_adds(&b, "+");
		} else {
			char esc[3] = {'%', hex[*c >> 4], hex[*c & 15]};
			strbuf_add(&b, esc, 3);
		}
	}
	return strbuf_steal(&b);
}

char *http_url_encode(const char *s)
{
	return encode(s, false);
}

char *http_form_encode(const char *s)
{
	return encode(s, true);
}

void http_form_add(StrBuf *b, const char *key, const char *value)
{
	_cleanup_free_ char *k = http_form_encode(key), *v = http_form_encode(value);

	if (b->len > 0)
		strbuf_adds(b, "&");
	strbuf_adds(b, k);
	strbuf_adds(b, "=");
	strbuf_adds(b, v);
}
