/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "aws-http.h"
#include "ec2.h"
#include "log.h"
#include "metrics.h"
#include "random-util.h"
#include "strbuf.h"

#define RETRY_BASE_DEFAULT (100 * USEC_PER_MSEC)
#define RETRY_CAP_DEFAULT (20 * USEC_PER_SEC)
#define ATTEMPT_TIMEOUT_DEFAULT (60 * USEC_PER_SEC)

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

char *ec2_params_encode(const Ec2Params *p, const char *action, const char *version)
{
	StrBuf b = {};

	http_form_add(&b, "Action", action);
	http_form_add(&b, "Version", version);
	for (size_t i = 0; p && i < p->kv.n; i++)
		http_form_add(&b, p->kv.keys[i], p->kv.values[i]);
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
	aws_error_done(e);
}

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

bool ec2_code_is_throttle(const char *code)
{
	return aws_code_is_throttle(code);
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

int ec2_code_to_errno(const char *code, int http_status)
{
	if (aws_code_is_throttle(code) || aws_code_is_transient(code))
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
	return aws_error_retryable(code, http_status);
}

void ec2_error_from_reply(int http_status, const char *body, size_t len, Ec2Error *ret)
{
	aws_error_from_reply(http_status, body, len, ret);
}

/* ---- the client ---- */

struct Ec2Client {
	char *region;
	char *endpoint;
	char *api_version;
	char *sigv4; /* "aws:amz:<region>:<service>" */
	AwsCredentialsProvider *credentials;
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

/* Gives the error to the caller, saying how the call ended. */
static int call_fail(Ec2Client *c, const char *action, int r, Ec2Error *e, Ec2Error *ret_error)
{
	atomic_fetch_add(&c->failed, 1);
	metric_inc(&ec2_calls, action,
		   e->code
			   ?: r == -ETIMEDOUT ? "DeadlineExceeded"
					      : "Transport");
	log_debug("EC2 %s: %s", action, e->message);
	if (ret_error)
		*ret_error = *e;
	else
		ec2_error_done(e);
	return r;
}

static int call_retrying(Ec2Client *c, const char *action, const Ec2Params *params, usec_t deadline,
			 XmlNode **ret_reply, Ec2Error *ret_error)
{
	_cleanup_free_ char *body = ec2_params_encode(params, action, c->api_version);
	_cleanup_free_ char *msg = NULL;
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
				 NULL};
	HttpRequest req = {
		.method = "POST",
		.url = c->endpoint,
		.headers = headers,
		.body = body,
		.body_len = strlen(body),
	};
	AwsSigning signing = {.credentials = c->credentials, .sigv4 = c->sigv4};
	AwsRetry retry = {.base = c->retry_base,
			  .cap = c->retry_cap,
			  .max_retries = c->max_retries,
			  .attempt_timeout = c->attempt_timeout};
	AwsRequestStats stats = {};
	HttpReply reply = {};
	Ec2Error e = {};
	int r;

	atomic_fetch_add(&c->calls, 1);
	r = aws_request(c->pool, &signing, &retry, &req, deadline, &reply, &stats, &e);
	atomic_fetch_add(&c->attempts, stats.attempts);
	atomic_fetch_add(&c->retries, stats.retries);
	atomic_fetch_add(&c->throttled, stats.throttled);
	for (unsigned i = 0; i < stats.retries; i++)
		metric_inc(&ec2_retries, action);
	for (unsigned i = 0; i < stats.throttled; i++)
		metric_inc(&ec2_throttles, action);
	if (r < 0)
		return call_fail(c, action, r, &e, ret_error);
	if (reply.status != 200) {
		ec2_error_from_reply((int)reply.status, reply.body, reply.body_len, &e);
		e.retries = stats.retries;
		http_reply_done(&reply);
		return call_fail(c, action, ec2_code_to_errno(e.code, e.http_status), &e,
				 ret_error);
	}
	r = xml_parse(reply.body, reply.body_len, ret_reply, &msg);
	http_reply_done(&reply);
	if (r < 0) {
		e.message = xasprintf("unreadable reply: %s", msg);
		return call_fail(c, action, -EPROTO, &e, ret_error);
	}
	metric_inc(&ec2_calls, action, "Success");
	return 0;
}

int ec2_call(Ec2Client *c, const char *action, const Ec2Params *params, usec_t deadline,
	     XmlNode **ret_reply, Ec2Error *ret_error)
{
	usec_t start = now_usec(CLOCK_MONOTONIC);
	int r = call_retrying(c, action, params, deadline, ret_reply, ret_error);
	metric_observe(&ec2_seconds, metric_seconds_since(start), action);
	return r;
}
