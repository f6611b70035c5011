/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "ec2-credentials.h"
#include "ec2-http.h"
#include "ec2.h"
#include "log.h"
#include "metrics.h"
#include "random-util.h"
#include "strbuf.h"

#define RETRY_BASE_DEFAULT (100 * USEC_PER_MSEC)
#define RETRY_CAP_DEFAULT (20 * USEC_PER_SEC)
#define ATTEMPT_TIMEOUT_DEFAULT (60 * USEC_PER_SEC)
#define MAX_RETRIES_NO_DEADLINE 10
#define ERROR_EXCERPT_MAX 200

/* ---- parameters ---- */

void ec2_params_add(Ec2Params *p, const char *key, const char *value)
{
	strmap_set(&p->kv, key, value);
}

void ec2_params_addf(Ec2Params *p, const char *key, const char *fmt, ...)
{
	_cleanup_free_ char *value = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&value, fmt, ap) < 0)
		abort();
	va_end(ap);
	ec2_params_add(p, key, value);
}

void ec2_params_add_list(Ec2Params *p, const char *name, const char *const *values, size_t n)
{
	char key[256];

	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s.%zu", name, i + 1);
		ec2_params_add(p, key, values[i]);
	}
}

void ec2_params_add_filter(Ec2Params *p, const char *name, const char *const *values, size_t n)
{
	char key[256];
	unsigned f = ++p->n_filters;

	snprintf(key, sizeof(key), "Filter.%u.Name", f);
	ec2_params_add(p, key, name);
	snprintf(key, sizeof(key), "Filter.%u.Value", f);
	ec2_params_add_list(p, key, values, n);
}

void ec2_params_add_tags(Ec2Params *p, const char *prefix, const Strmap *tags)
{
	char key[256];

	for (size_t i = 0; i < tags->n; i++) {
		snprintf(key, sizeof(key), "%s.%zu.Key", prefix, i + 1);
		ec2_params_add(p, key, tags->keys[i]);
		snprintf(key, sizeof(key), "%s.%zu.Value", prefix, i + 1);
		ec2_params_add(p, key, tags->values[i]);
	}
}

void ec2_params_add_tag_spec(Ec2Params *p, const char *resource_type, const Strmap *tags)
{
	char key[256];

	if (tags->n == 0)
		return; /* EC2 refuses a TagSpecification without tags */
	unsigned s = ++p->n_tag_specs;
	snprintf(key, sizeof(key), "TagSpecification.%u.ResourceType", s);
	ec2_params_add(p, key, resource_type);
	snprintf(key, sizeof(key), "TagSpecification.%u.Tag", s);
	ec2_params_add_tags(p, key, tags);
}

static void add_pair(StrBuf *b, const char *key, const char *value)
{
	_cleanup_free_ char *k = http_form_encode(key), *v = http_form_encode(value);

	if (b->len > 0)
		strbuf_adds(b, "&");
	strbuf_adds(b, k);
	strbuf_adds(b, "=");
	strbuf_adds(b, v);
}

char *ec2_params_encode(const Ec2Params *p, const char *action, const char *version)
{
	StrBuf b = {};

	add_pair(&b, "Action", action);
	add_pair(&b, "Version", version);
	for (size_t i = 0; p && i < p->kv.n; i++)
		add_pair(&b, p->kv.keys[i], p->kv.values[i]);
	return strbuf_steal(&b);
}

void ec2_params_done(Ec2Params *p)
{
	strmap_done(&p->kv);
	*p = (Ec2Params){};
}

/* ---- errors ---- */

void ec2_error_done(Ec2Error *e)
{
	free(e->code);
	free(e->message);
	free(e->request_id);
	*e = (Ec2Error){};
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

/* Failures on EC2's side that a later attempt may not meet. */
static const char *const transient_codes[] = {
	"InternalError",
	"InternalFailure",
	"Unavailable",
	"ServiceUnavailable",
	"ServiceUnavailableException",
	"IDPCommunicationError",
};

static const struct {
	const char *code;
	int err;
} code_table[] = {
	/* CSI: an attached volume cannot be deleted (FAILED_PRECONDITION)... */
	{"VolumeInUse", -ENOTEMPTY},
	{"InvalidSnapshot.InUse", -ENOTEMPTY},
	/* ...but a volume or instance on its way to a state is worth asking again (ABORTED). */
	{"IncorrectState", -EBUSY},
	{"IncorrectInstanceState", -EBUSY},
	{"IncorrectModificationState", -EBUSY},
	/* At most 4 per volume in 24 hours (once in 6 hours before 2026): later, not now. */
	{"VolumeModificationRateExceeded", -EAGAIN},
	{"IdempotentParameterMismatch", -EEXIST},
	{"AttachmentLimitExceeded", -EMLINK},
	{"VolumeLimitExceeded", -ENOSPC},
	{"MaxIOPSLimitExceeded", -ENOSPC},
	{"SnapshotLimitExceeded", -ENOSPC},
	{"ResourceLimitExceeded", -ENOSPC},
	{"InsufficientVolumeCapacity", -ENOSPC},
	/* The request names what the region lacks: the request is at fault. */
	{"InvalidZone.NotFound", -EINVAL},
	{"InvalidVolume.ZoneMismatch", -EINVAL},
	{"InvalidParameterValue", -EINVAL},
	{"InvalidParameterCombination", -EINVAL},
	{"InvalidParameter", -EINVAL},
	{"MissingParameter", -EINVAL},
	{"UnknownParameter", -EINVAL},
	{"ValidationError", -EINVAL},
	{"InvalidAction", -EOPNOTSUPP},
	{"UnsupportedOperation", -EOPNOTSUPP},
	{"AuthFailure", -EACCES},
	{"InvalidClientTokenId", -EACCES},
	{"SignatureDoesNotMatch", -EACCES},
	{"ExpiredToken", -EACCES},
	{"RequestExpired", -EACCES},
	{"InvalidIdentityToken", -EACCES},
	{"UnauthorizedOperation", -EPERM},
	{"AccessDenied", -EPERM},
	{"OptInRequired", -EPERM},
	{"Blocked", -EPERM},
};

static const struct {
	const char *suffix;
	int err;
} suffix_table[] = {
	{".NotFound", -ENOENT},
	{".Malformed", -EINVAL},
	{".Duplicate", -EEXIST},
	{".InUse", -ENOTEMPTY},
};

static bool code_in(const char *code, const char *const *list, size_t n)
{
	for (size_t i = 0; code && i < n; i++)
		if (strcmp(code, list[i]) == 0)
			return true;
	return false;
}

bool ec2_code_is_throttle(const char *code)
{
	return code_in(code, throttle_codes, ELEMENTSOF(throttle_codes));
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

int ec2_code_to_errno(const char *code, int http_status)
{
	if (ec2_code_is_throttle(code) ||
	    code_in(code, transient_codes, ELEMENTSOF(transient_codes)))
		return -EAGAIN;
	for (size_t i = 0; code && i < ELEMENTSOF(code_table); i++)
		if (strcmp(code, code_table[i].code) == 0)
			return code_table[i].err;
	for (size_t i = 0; code && i < ELEMENTSOF(suffix_table); i++)
		if (has_suffix(code, suffix_table[i].suffix))
			return suffix_table[i].err;
	if (http_status == 400)
		return -EINVAL;
	if (http_status == 401 || http_status == 403)
		return -EACCES;
	if (http_status == 404)
		return -ENOENT;
	if (http_status == 409)
		return -EBUSY;
	if (http_status == 429 || http_status >= 500)
		return -EAGAIN;
	return -EPROTO;
}

bool ec2_error_retryable(const char *code, int http_status)
{
	if (ec2_code_is_throttle(code) ||
	    code_in(code, transient_codes, ELEMENTSOF(transient_codes)))
		return true;
	return http_status == 429 || http_status >= 500;
}

/* The first bytes of a reply that is not AWS's XML, printable, for a message. */
static char *excerpt(const char *body, size_t len)
{
	size_t n = MIN(len, (size_t)ERROR_EXCERPT_MAX);
	char *s = xstrndup(body, n);

	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
			*c = ' ';
	return s;
}

void ec2_error_from_reply(int http_status, const char *body, size_t len, Ec2Error *ret)
{
	_cleanup_xml_free_ XmlNode *root = NULL;
	const XmlNode *err = NULL;

	*ret = (Ec2Error){.http_status = http_status};
	if (xml_parse(body, len, &root, NULL) == 0)
		err = xml_search(root, "Error");
	const char *code = xml_text(err, "Code"), *message = xml_text(err, "Message");
	if (code && *code) {
		ret->code = xstrdup(code);
		ret->message =
			message && *message ? xasprintf("%s: %s", code, message) : xstrdup(code);
		const char *id = xml_text(root, "RequestID");
		if (!id)
			id = xml_text(root, "RequestId");
		ret->request_id = id ? xstrdup(id) : NULL;
		return;
	}
	_cleanup_free_ char *text = excerpt(body, len);
	ret->message = *text ? xasprintf("HTTP %d: %s", http_status, text)
			     : xasprintf("HTTP %d", http_status);
}

/* ---- the client ---- */

struct Ec2Client {
	char *region;
	char *endpoint;
	char *api_version;
	char *sigv4; /* "aws:amz:<region>:<service>" */
	Ec2CredentialsProvider *credentials;
	usec_t retry_base, retry_cap, attempt_timeout;
	unsigned max_retries;
	HttpPool *pool;
	_Atomic uint64_t calls, attempts, retries, throttled, failed;
};

static bool endpoint_valid(const char *url)
{
	return strncmp(url, "https://", 8) == 0 || strncmp(url, "http://", 7) == 0;
}

int ec2_client_new(const Ec2Config *config, Ec2Client **ret, char **ret_error)
{
	if (!config->region || !*config->region) {
		if (ret_error)
			*ret_error = xstrdup("EC2: no region");
		return -EINVAL;
	}
	if (config->endpoint && !endpoint_valid(config->endpoint)) {
		if (ret_error)
			*ret_error = xasprintf("EC2 endpoint %s: not an http:// or https:// URL",
					       config->endpoint);
		return -EINVAL;
	}
	Ec2Client *c = xnew0(Ec2Client, 1);
	c->region = xstrdup(config->region);
	/* China's regions live under their own domain. */
	c->endpoint = config->endpoint ? xstrdup(config->endpoint)
		      : strncmp(c->region, "cn-", 3) == 0
			      ? xasprintf("https://ec2.%s.amazonaws.com.cn/", c->region)
			      : xasprintf("https://ec2.%s.amazonaws.com/", c->region);
	c->api_version = xstrdup(config->api_version ? config->api_version : EC2_API_VERSION);
	c->sigv4 = xasprintf("aws:amz:%s:%s", c->region, config->service ? config->service : "ec2");
	c->credentials = config->credentials;
	c->retry_base = config->retry_base ? config->retry_base : RETRY_BASE_DEFAULT;
	c->retry_cap = config->retry_cap ? config->retry_cap : RETRY_CAP_DEFAULT;
	c->attempt_timeout =
		config->attempt_timeout ? config->attempt_timeout : ATTEMPT_TIMEOUT_DEFAULT;
	c->max_retries = config->max_retries;
	c->pool = http_pool_new(0);
	*ret = c;
	return 0;
}

void ec2_client_free(Ec2Client *c)
{
	if (!c)
		return;
	http_pool_free(c->pool);
	free(c->region);
	free(c->endpoint);
	free(c->api_version);
	free(c->sigv4);
	free(c);
}

const char *ec2_client_endpoint(const Ec2Client *c)
{
	return c->endpoint;
}

void ec2_client_stats(Ec2Client *c, Ec2Stats *ret)
{
	*ret = (Ec2Stats){
		.calls = atomic_load(&c->calls),
		.attempts = atomic_load(&c->attempts),
		.retries = atomic_load(&c->retries),
		.throttled = atomic_load(&c->throttled),
		.failed = atomic_load(&c->failed),
	};
}

METRIC_DEFINE(ec2_calls, METRIC_COUNTER, "volplug_ec2_requests_total",
	      "EC2 calls by action and outcome: Success, EC2's error code, Transport or "
	      "DeadlineExceeded (one per call, whatever its retries)",
	      "action", "code");
METRIC_DEFINE(ec2_seconds, METRIC_HISTOGRAM, "volplug_ec2_request_duration_seconds",
	      "Time EC2 calls took, retries and backoff included, by action", "action");
METRIC_DEFINE(ec2_retries, METRIC_COUNTER, "volplug_ec2_retries_total",
	      "EC2 requests sent again after a backoff, by action", "action");
METRIC_DEFINE(
	ec2_throttles, METRIC_COUNTER, "volplug_ec2_throttles_total",
	"EC2 replies that said to slow down (RequestLimitExceeded and the like, HTTP 503), by "
	"action",
	"action");

/* What one attempt came to. */
typedef struct Attempt {
	int r;		  /* 0: *reply is the answer */
	bool retryable;	  /* another attempt may do better */
	bool expired_key; /* the credentials were refused as expired */
	Ec2Error error;	  /* when r < 0 */
} Attempt;

static void attempt_fail(Attempt *a, int r, char *message)
{
	a->r = r;
	a->error.message = message;
}

/* Signs (or not) and sends one request; fills *a, and *ret_reply on success. */
static void attempt_once(Ec2Client *c, const char *action, const char *body, usec_t deadline,
			 XmlNode **ret_reply, Attempt *a)
{
	Ec2Credentials creds = {};
	HttpReply reply = {};
	_cleanup_free_ char *token_header = NULL, *msg = NULL;
	int r;

	*a = (Attempt){};
	if (c->credentials) {
		r = ec2_credentials_get(c->credentials, deadline, &creds, &msg);
		if (r < 0)
			return attempt_fail(a, r, xasprintf("credentials: %s", msg));
		if (creds.session_token)
			token_header = xasprintf("X-Amz-Security-Token: %s", creds.session_token);
	}
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
				 token_header, NULL};
	HttpRequest req = {
		.method = "POST",
		.url = c->endpoint,
		.headers = headers,
		.body = body,
		.body_len = strlen(body),
		.sigv4 = c->credentials ? c->sigv4 : NULL,
		.access_key = creds.access_key_id,
		.secret_key = creds.secret_access_key,
		.deadline = deadline,
		.attempt_timeout = c->attempt_timeout,
	};
	atomic_fetch_add(&c->attempts, 1);
	r = http_perform(c->pool, &req, &reply, &msg);
	ec2_credentials_done(&creds);
	if (r < 0) {
		a->retryable = http_error_transient(r);
		return attempt_fail(a, r, TAKE_PTR(msg));
	}
	if (reply.status == 200) {
		r = xml_parse(reply.body, reply.body_len, ret_reply, &msg);
		if (r < 0)
			attempt_fail(a, -EPROTO, xasprintf("unreadable reply: %s", msg));
		http_reply_done(&reply);
		return;
	}
	ec2_error_from_reply((int)reply.status, reply.body, reply.body_len, &a->error);
	http_reply_done(&reply);
	a->r = ec2_code_to_errno(a->error.code, a->error.http_status);
	a->retryable = ec2_error_retryable(a->error.code, a->error.http_status);
	a->expired_key = a->error.code && strcmp(a->error.code, "ExpiredToken") == 0;
	if (ec2_code_is_throttle(a->error.code) || reply.status == 503) {
		atomic_fetch_add(&c->throttled, 1);
		metric_inc(&ec2_throttles, action);
	}
}

/* Full jitter: uniform in [0, min(cap, base * 2^retry)]. */
static usec_t backoff(const Ec2Client *c, unsigned retry)
{
	usec_t bound = c->retry_base;

	for (unsigned i = 0; i < retry && bound < c->retry_cap; i++)
		bound *= 2;
	bound = MIN(bound, c->retry_cap);
	return random_u64() % (bound + 1);
}

static void sleep_until(usec_t when)
{
	struct timespec ts = {.tv_sec = (time_t)(when / USEC_PER_SEC),
			      .tv_nsec = (long)(when % USEC_PER_SEC * NSEC_PER_USEC)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Gives the attempt's error to the caller, saying how it ended. */
static int call_fail(Ec2Client *c, const char *action, Attempt *a, int r, const char *why,
		     unsigned retries, Ec2Error *ret_error)
{
	atomic_fetch_add(&c->failed, 1);
	metric_inc(&ec2_calls, action,
		   a->error.code
			   ?: r == -ETIMEDOUT ? "DeadlineExceeded"
					      : "Transport");
	log_debug("EC2 %s: %s%s", action, a->error.message, why ? why : "");
	if (!ret_error) {
		ec2_error_done(&a->error);
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

static int call_retrying(Ec2Client *c, const char *action, const Ec2Params *params, usec_t deadline,
			 XmlNode **ret_reply, Ec2Error *ret_error)
{
	_cleanup_free_ char *body = ec2_params_encode(params, action, c->api_version);
	unsigned retries = 0, limit = c->max_retries;
	bool refreshed = false;
	Ec2Error last = {}; /* the last reply that said "later" */
	char why[96];
	Attempt a;

	if (limit == 0 && deadline == USEC_INFINITY)
		limit = MAX_RETRIES_NO_DEADLINE;
	atomic_fetch_add(&c->calls, 1);
	for (;;) {
		attempt_once(c, action, body, deadline, ret_reply, &a);
		if (a.r == 0) {
			ec2_error_done(&last);
			metric_inc(&ec2_calls, action, "Success");
			return 0;
		}
		if (a.expired_key && !refreshed && c->credentials) {
			/* Keys revoked or rotated early: fetch new ones once, right away. */
			ec2_credentials_invalidate(c->credentials);
			refreshed = true;
			ec2_error_done(&a.error);
			continue;
		}
		if (!a.retryable) {
			ec2_error_done(&last);
			return call_fail(c, action, &a, a.r, NULL, retries, ret_error);
		}
		usec_t now = now_usec(CLOCK_MONOTONIC);
		if (deadline != USEC_INFINITY && now >= deadline) {
			/* Cut short by the deadline: what EC2 said before tells more. */
			if (last.message) {
				ec2_error_done(&a.error);
				a.error = last;
			}
			snprintf(why, sizeof(why), " (deadline reached after %u retries)", retries);
			return call_fail(c, action, &a, -ETIMEDOUT, retries > 0 ? why : NULL,
					 retries, ret_error);
		}
		if (limit > 0 && retries >= limit) {
			/* A reply said "later"; a transport failure keeps its own errno. */
			ec2_error_done(&last);
			snprintf(why, sizeof(why), " (gave up after %u retries)", retries);
			return call_fail(c, action, &a, a.error.http_status ? -EAGAIN : a.r, why,
					 retries, ret_error);
		}
		usec_t delay = backoff(c, retries);
		if (deadline != USEC_INFINITY && delay >= deadline - now) {
			ec2_error_done(&last);
			snprintf(why, sizeof(why), " (deadline reached after %u retries)", retries);
			return call_fail(c, action, &a, -ETIMEDOUT, why, retries, ret_error);
		}
		log_debug("EC2 %s: %s; retrying in %.0f ms", action, a.error.message,
			  (double)delay / USEC_PER_MSEC);
		if (a.error.http_status) {
			ec2_error_done(&last);
			last = a.error;
			a.error = (Ec2Error){};
		}
		ec2_error_done(&a.error);
		sleep_until(now + delay);
		retries++;
		atomic_fetch_add(&c->retries, 1);
		metric_inc(&ec2_retries, action);
	}
}

int ec2_call(Ec2Client *c, const char *action, const Ec2Params *params, usec_t deadline,
	     XmlNode **ret_reply, Ec2Error *ret_error)
{
	usec_t start = now_usec(CLOCK_MONOTONIC);
	int r = call_retrying(c, action, params, deadline, ret_reply, ret_error);
	metric_observe(&ec2_seconds, metric_seconds_since(start), action);
	return r;
}
