/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTP exchange on libcurl, for the AWS APIs (EC2, STS, S3) and the instance metadata
 * service: a request with a deadline on CLOCK_MONOTONIC, optionally signed with AWS Signature
 * Version 4 by libcurl itself (CURLOPT_AWS_SIGV4), and the whole reply body up to a cap.
 *
 * Handles come from a small pool so that connections (and TLS sessions) are reused from one
 * call to the next; a pool may be shared by any number of threads. No retries here: the
 * callers know which failures are worth another attempt. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"
#include "strmap.h"
#include "time-util.h"

typedef struct HttpPool HttpPool;

/* A pool keeping at most max_idle handles between calls (0: 8). Initialises libcurl once per
 * process. Never fails (allocation failure aborts). */
HttpPool *http_pool_new(size_t max_idle);
/* Closes the idle handles and their connections; no call may be running. NULL is a no-op. */
void http_pool_free(HttpPool *p);

typedef struct HttpRequest {
	const char *method;	    /* "GET", "HEAD", "POST", "PUT" or "DELETE" */
	const char *url;	    /* http:// or https:// only */
	const char *const *headers; /* "Name: value" each, NULL-terminated; NULL: none */
	const char *body;	    /* POST and PUT: the body (NULL: empty) */
	size_t body_len;
	const char *sigv4;	/* "aws:amz:<region>:<service>" to sign; NULL: unsigned */
	const char *access_key; /* with sigv4 */
	const char *secret_key; /* with sigv4 */
	usec_t deadline;	/* CLOCK_MONOTONIC; USEC_INFINITY: none */
	usec_t attempt_timeout; /* also at most this long from now; 0: no further bound */
	bool no_proxy;		/* ignore http_proxy and friends (link-local services) */
	size_t max_reply;	/* reply body cap in bytes; 0: 16 MiB */
} HttpRequest;

typedef struct HttpReply {
	long status; /* 200, 404, ... */
	char *body;  /* NUL-terminated (the body may hold NULs of its own) */
	size_t body_len;
	Strmap headers; /* the reply's headers, names in lower case (the last of a name kept) */
} HttpReply;

void http_reply_done(HttpReply *r);

/* Performs one exchange and blocks until the reply is complete or the deadline (or the
 * attempt timeout) passes. Returns 0 when a whole reply came, whatever its status, with *ret
 * filled; else -ETIMEDOUT (no time left, or the transfer took too long), -ECONNREFUSED,
 * -ECONNRESET (the peer closed or reset the connection mid-exchange), -EHOSTUNREACH (name not
 * resolved, no route), -EFBIG (reply past the cap), -EPROTO (TLS or HTTP failure), -EINVAL
 * (bad URL or method) or -EIO, with *ret_error (may be NULL) saying what libcurl said. */
int http_perform(HttpPool *p, const HttpRequest *req, HttpReply *ret, char **ret_error);

/* True for the failures of http_perform() after which the same request may well succeed. */
bool http_error_transient(int r);

/* The string with every byte but RFC 3986's unreserved ones (A-Z a-z 0-9 - _ . ~) as %XX,
 * as the AWS Query APIs want form values; a new string. */
char *http_url_encode(const char *s);
/* As http_url_encode(), with a space as '+', as HTML forms and the AWS SDKs encode a form body
 * (application/x-www-form-urlencoded): a peer that checks the signature of the body it decoded
 * and encoded again (moto) computes the same. */
char *http_form_encode(const char *s);
/* Appends "key=value" to a form body, both form-encoded, after a '&' unless b is empty. */
void http_form_add(StrBuf *b, const char *key, const char *value);
