/* SPDX-License-Identifier: Apache-2.0 */
/* One AWS request, signed and retried: what every AWS client of the project shares (the EC2
 * Query API, STS, S3).
 *
 * aws_request() signs a request with AWS Signature Version 4 (libcurl's, with the keys of a
 * credentials provider and a session token in X-Amz-Security-Token) and sends it until an
 * answer comes that is not worth asking again. Throttling (RequestLimitExceeded, SlowDown, ...,
 * HTTP 429 and 503), other 5xx replies and transient transport failures (a refused or dropped
 * connection, an attempt that took too long) are retried with exponential backoff and full
 * jitter, never sleeping past the caller's deadline. An ExpiredToken reply makes it drop its
 * credentials and try once more with fresh ones right away.
 *
 * Errors keep the service's code and message ("SlowDown: Please reduce your request rate.") in
 * an AwsError; each service maps codes to errnos itself. */
#pragma once

#include <stdbool.h>

#include "aws-credentials.h"
#include "aws-http.h"
#include "time-util.h"

typedef struct AwsError {
	int http_status;  /* 0: no HTTP reply came */
	char *code;	  /* the service's error code; NULL when there was none */
	char *message;	  /* "Code: Message" (or what went wrong), for the user */
	char *request_id; /* the service's, when it gave one */
	unsigned retries; /* retries made before giving up */
} AwsError;

void aws_error_done(AwsError *e);

/* Reads an AWS error reply (EC2's <Response><Errors><Error>, STS's <ErrorResponse><Error>,
 * S3's <Error>, or anything else: then an excerpt of the body) into *ret. */
void aws_error_from_reply(int http_status, const char *body, size_t len, AwsError *ret);

/* True for the codes that mean "too many requests, slow down". */
bool aws_code_is_throttle(const char *code);
/* True for the codes of a failure on the service's side that a later attempt may not meet. */
bool aws_code_is_transient(const char *code);
/* True when the same request may succeed if sent again a little later (throttling, 5xx). */
bool aws_error_retryable(const char *code, int http_status);

/* Full jitter: uniform in [0, min(cap, base * 2^retry)]. */
usec_t aws_backoff(usec_t base, usec_t cap, unsigned retry);
/* Sleeps until when (CLOCK_MONOTONIC). */
void aws_sleep_until(usec_t when);

typedef struct AwsRetry {
	usec_t base;		/* first backoff bound; 0: 100 ms */
	usec_t cap;		/* backoff bound cap; 0: 20 s */
	unsigned max_retries;	/* 0: until the deadline (10 without one) */
	usec_t attempt_timeout; /* one exchange at most; 0: 60 s */
} AwsRetry;

typedef struct AwsSigning {
	AwsCredentialsProvider *credentials; /* borrowed; NULL: unsigned */
	const char *sigv4;		     /* "aws:amz:<region>:<service>" */
} AwsSigning;

/* What a call saw, for the caller's counters. */
typedef struct AwsRequestStats {
	unsigned attempts;
	unsigned retries;
	unsigned throttled; /* replies that said to slow down */
} AwsRequestStats;

/* Sends req (its sigv4, keys, deadline and attempt timeout are set here) until a reply comes
 * that is not worth retrying, and blocks until then or the deadline (CLOCK_MONOTONIC;
 * USEC_INFINITY: none). Returns 0 with *ret that reply, whatever its status (the caller judges a
 * 404 or a 412), or a negative errno with *ret_error (may be NULL; caller calls
 * aws_error_done()) saying why: -ETIMEDOUT when the deadline ran out first (the message is the
 * last reply's, with the retries counted), -EAGAIN when max_retries ran out on replies that
 * said "later", a transport errno (http_perform()), or the credentials' error. stats may be
 * NULL. Thread-safe as the pool and provider are. */
int aws_request(HttpPool *pool, const AwsSigning *signing, const AwsRetry *retry,
		const HttpRequest *req, usec_t deadline, HttpReply *ret, AwsRequestStats *stats,
		AwsError *ret_error);
