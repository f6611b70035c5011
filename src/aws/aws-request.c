/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "aws-request.h"
#include "aws-xml.h"
#include "log.h"
#include "random-util.h"

#define RETRY_BASE_DEFAULT (100 * USEC_PER_MSEC)
#define RETRY_CAP_DEFAULT (20 * USEC_PER_SEC)
#define ATTEMPT_TIMEOUT_DEFAULT (60 * USEC_PER_SEC)
#define MAX_RETRIES_NO_DEADLINE 10
/* A retry must leave the answer time to reach the caller before its deadline (the client's,
 * whose clock started before ours): none is made that would wake closer to it than a 20th of
 * the time the request was given, at most this. */
#define ANSWER_MARGIN_MAX (250 * USEC_PER_MSEC)
#define ERROR_EXCERPT_MAX 200

void aws_error_done(AwsError *e)
{
	free(e->code);
	free(e->message);
	free(e->request_id);
	*e = (AwsError){};
}

static const char *const throttle_codes[] = {
	"RequestLimitExceeded",
	"Throttling",
	"ThrottlingException",
	"ThrottledException",
	"RequestThrottled",
	"RequestThrottledException",
	"TooManyRequestsException",
	"EC2ThrottledException",
	"SlowDown",
	"PriorRequestNotComplete",
	"BandwidthLimitExceeded",
};

/* Failures on the service's side that a later attempt may not meet. */
static const char *const transient_codes[] = {
	"InternalError",
	"InternalFailure",
	"Unavailable",
	"ServiceUnavailable",
	"ServiceUnavailableException",
	"IDPCommunicationError",
	"RequestTimeout",
};

static bool code_in(const char *code, const char *const *list, size_t n)
{
	for (size_t i = 0; code && i < n; i++)
		if (strcmp(code, list[i]) == 0)
			return true;
	return false;
}

bool aws_code_is_throttle(const char *code)
{
	return code_in(code, throttle_codes, ELEMENTSOF(throttle_codes));
}

bool aws_code_is_transient(const char *code)
{
	return code_in(code, transient_codes, ELEMENTSOF(transient_codes));
}

bool aws_error_retryable(const char *code, int http_status)
{
	if (aws_code_is_throttle(code) || aws_code_is_transient(code))
		return true;
	return http_status == 429 || http_status >= 500;
}

/* The first bytes of a reply that is not AWS's XML, printable, for a message. */
static char *excerpt(const char *body, size_t len)
{
	size_t n = MIN(len, (size_t)ERROR_EXCERPT_MAX);
	char *s = xstrndup(body ? body : "", n);

	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
			*c = ' ';
	return s;
}

void aws_error_from_reply(int http_status, const char *body, size_t len, AwsError *ret)
{
	_cleanup_xml_free_ XmlNode *root = NULL;
	const XmlNode *err = NULL;

	*ret = (AwsError){.http_status = http_status};
	if (len > 0 && xml_parse(body, len, &root, NULL) == 0)
		err = xml_search(root, "Error");
	const char *code = xml_text(err, "Code"), *message = xml_text(err, "Message");
	if (code && *code) {
		ret->code = xstrdup(code);
		ret->message =
			message && *message ? xasprintf("%s: %s", code, message) : xstrdup(code);
		const char *id = xml_text(root, "RequestID");
		if (!id)
			id = xml_text(root, "RequestId");
		if (!id)
			id = xml_text(err, "RequestId");
		ret->request_id = id ? xstrdup(id) : NULL;
		return;
	}
	_cleanup_free_ char *text = excerpt(body, len);
	ret->message = *text ? xasprintf("HTTP %d: %s", http_status, text)
			     : xasprintf("HTTP %d", http_status);
}

usec_t aws_backoff(usec_t base, usec_t cap, unsigned retry)
{
	usec_t bound = base;

	for (unsigned i = 0; i < retry && bound < cap; i++)
		bound *= 2;
	bound = MIN(bound, cap);
	return random_u64() % (bound + 1);
}

void aws_sleep_until(usec_t when)
{
	struct timespec ts = {.tv_sec = (time_t)(when / USEC_PER_SEC),
			      .tv_nsec = (long)(when % USEC_PER_SEC * NSEC_PER_USEC)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* What one attempt came to. */
typedef struct Attempt {
	int r;		  /* 0: the reply is the answer */
	bool retryable;	  /* another attempt may do better */
	bool expired_key; /* the credentials were refused as expired */
	AwsError error;	  /* when r < 0 */
} Attempt;

static void attempt_fail(Attempt *a, int r, char *message)
{
	a->r = r;
	a->error.message = message;
}

static void attempt_once(HttpPool *pool, const AwsSigning *signing, usec_t attempt_timeout,
			 const HttpRequest *req, usec_t deadline, HttpReply *ret,
			 AwsRequestStats *stats, Attempt *a)
{
	AwsCredentials creds = {};
	HttpReply reply = {};
	_cleanup_free_ char *token_header = NULL, *msg = NULL;
	_cleanup_free_ const char **headers = NULL;
	size_t n = 0;
	int r;

	*a = (Attempt){};
	if (signing && signing->credentials) {
		r = aws_credentials_get(signing->credentials, deadline, &creds, &msg);
		if (r < 0)
			return attempt_fail(a, r, xasprintf("credentials: %s", msg));
		if (creds.session_token)
			token_header = xasprintf("X-Amz-Security-Token: %s", creds.session_token);
	}
	for (const char *const *h = req->headers; h && *h; h++)
		n++;
	headers = xnew0(const char *, n + 2);
	for (size_t i = 0; i < n; i++)
		headers[i] = req->headers[i];
	headers[n] = token_header;
	HttpRequest signed_req = *req;
	signed_req.headers = headers;
	signed_req.sigv4 = creds.access_key_id ? signing->sigv4 : NULL;
	signed_req.access_key = creds.access_key_id;
	signed_req.secret_key = creds.secret_access_key;
	signed_req.deadline = deadline;
	signed_req.attempt_timeout = attempt_timeout;
	stats->attempts++;
	r = http_perform(pool, &signed_req, &reply, &msg);
	aws_credentials_done(&creds);
	if (r < 0) {
		a->retryable = http_error_transient(r);
		return attempt_fail(a, r, TAKE_PTR(msg));
	}
	/* A HEAD reply has no body to say why: its status alone decides. */
	if (!aws_error_retryable(NULL, (int)reply.status) &&
	    (reply.status < 400 || reply.status == 404 || strcmp(req->method, "HEAD") == 0)) {
		*ret = reply;
		return;
	}
	AwsError e;
	aws_error_from_reply((int)reply.status, reply.body, reply.body_len, &e);
	a->retryable = aws_error_retryable(e.code, e.http_status);
	a->expired_key = e.code && strcmp(e.code, "ExpiredToken") == 0;
	if (aws_code_is_throttle(e.code) || reply.status == 503 || reply.status == 429)
		stats->throttled++;
	if (!a->retryable && !a->expired_key) {
		aws_error_done(&e);
		*ret = reply; /* the caller's to judge */
		return;
	}
	http_reply_done(&reply);
	a->r = -EAGAIN;
	a->error = e;
}

static int request_fail(Attempt *a, int r, const char *why, unsigned retries, AwsError *ret_error)
{
	if (!ret_error) {
		aws_error_done(&a->error);
		return r;
	}
	*ret_error = a->error;
	ret_error->retries = retries;
	if (why) {
		char *m = xasprintf("%s%s", ret_error->message, why);
		free(ret_error->message);
		ret_error->message = m;
	}
	return r;
}

int aws_request(HttpPool *pool, const AwsSigning *signing, const AwsRetry *retry,
		const HttpRequest *req, usec_t deadline, HttpReply *ret, AwsRequestStats *stats,
		AwsError *ret_error)
{
	AwsRetry policy = retry ? *retry : (AwsRetry){};
	AwsRequestStats own = {};
	unsigned retries = 0, limit = policy.max_retries;
	bool refreshed = false;
	AwsError last = {}; /* the last reply that said "later" */
	char why[96];
	Attempt a;

	if (!stats)
		stats = &own;
	*stats = (AwsRequestStats){};
	if (!policy.base)
		policy.base = RETRY_BASE_DEFAULT;
	if (!policy.cap)
		policy.cap = RETRY_CAP_DEFAULT;
	if (!policy.attempt_timeout)
		policy.attempt_timeout = ATTEMPT_TIMEOUT_DEFAULT;
	if (limit == 0 && deadline == USEC_INFINITY)
		limit = MAX_RETRIES_NO_DEADLINE;
	usec_t start = now_usec(CLOCK_MONOTONIC);
	usec_t margin = deadline == USEC_INFINITY || deadline <= start
				? 0
				: MIN(ANSWER_MARGIN_MAX, (deadline - start) / 20);
	for (;;) {
		attempt_once(pool, signing, policy.attempt_timeout, req, deadline, ret, stats, &a);
		if (a.r == 0) {
			aws_error_done(&last);
			return 0;
		}
		if (a.expired_key && !refreshed && signing && signing->credentials) {
			/* Keys revoked or rotated early: fetch new ones once, right away. */
			aws_credentials_invalidate(signing->credentials);
			refreshed = true;
			aws_error_done(&a.error);
			continue;
		}
		if (!a.retryable) {
			aws_error_done(&last);
			if (a.expired_key)
				a.r = -EACCES;
			return request_fail(&a, a.r, NULL, retries, ret_error);
		}
		usec_t now = now_usec(CLOCK_MONOTONIC);
		if (deadline != USEC_INFINITY && now >= deadline) {
			/* Cut short by the deadline: what the service said before tells more. */
			if (last.message) {
				aws_error_done(&a.error);
				a.error = last;
			}
			snprintf(why, sizeof(why), " (deadline reached after %u retries)", retries);
			return request_fail(&a, -ETIMEDOUT, retries > 0 ? why : NULL, retries,
					    ret_error);
		}
		if (limit > 0 && retries >= limit) {
			/* A reply said "later"; a transport failure keeps its own errno. */
			aws_error_done(&last);
			snprintf(why, sizeof(why), " (gave up after %u retries)", retries);
			return request_fail(&a, a.error.http_status ? -EAGAIN : a.r, why, retries,
					    ret_error);
		}
		usec_t delay = aws_backoff(policy.base, policy.cap, retries);
		if (deadline != USEC_INFINITY && delay + margin >= deadline - now) {
			aws_error_done(&last);
			snprintf(why, sizeof(why), " (deadline reached after %u retries)", retries);
			return request_fail(&a, -ETIMEDOUT, why, retries, ret_error);
		}
		log_debug("%s %s: %s; retrying in %.0f ms", req->method, req->url, a.error.message,
			  (double)delay / USEC_PER_MSEC);
		if (a.error.http_status) {
			aws_error_done(&last);
			last = a.error;
			a.error = (AwsError){};
		}
		aws_error_done(&a.error);
		aws_sleep_until(now + delay);
		retries++;
		stats->retries++;
	}
}
