/* SPDX-License-Identifier: Apache-2.0 */
/* The EC2 client against a local stand-in (aws-standin.py): the request as EC2 would receive
 * it, its SigV4 signature recomputed by botocore, errors, retries with backoff bounded by the
 * deadline, credentials refused as expired, many threads at once, and the cost of a call. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc.h"
#include "aws-standin.h"
#include "aws-credentials.h"
#include "ec2.h"
#include "metrics.h"
#include "tap.h"

#define KEY "AKIDSTANDIN0000001"
#define S(s) ((s) ? (s) : "(null)")
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

static const char volumes_reply[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<DescribeVolumesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	"<requestId>req-1</requestId><volumeSet><item><volumeId>vol-1</volumeId>"
	"<status>available</status></item></volumeSet></DescribeVolumesResponse>";

static AwsCredentialsProvider *creds;
static Ec2Client *client;
static char endpoint[96];

static char *rule(const char *action, int status, const char *body, int count)
{
	_cleanup_free_ char *b = json_quote(body);
	return xasprintf("{\"action\": \"%s\", \"status\": %d, \"body\": %s, \"count\": %d}",
			 action, status, b, count);
}

static char *error_body(const char *code, const char *message)
{
	return xasprintf("<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error>"
			 "</Errors><RequestID>rid-%s</RequestID></Response>",
			 code, message, code);
}

/* Rules: an error reply n times (-1: forever), then (ok) a DescribeVolumes reply. */
static void script(int status, const char *code, int n, bool ok_after)
{
	_cleanup_free_ char *err = error_body(code, "try again"),
			    *r1 = rule("DescribeVolumes", status, err, n);
	_cleanup_free_ char *r2 = rule("DescribeVolumes", 200, volumes_reply, 1);
	_cleanup_free_ char *rules =
		xasprintf("[%s%s%s]", r1, ok_after ? ", " : "", ok_after ? r2 : "");
	standin_rules(rules);
}

static usec_t in(usec_t t)
{
	return now_usec(CLOCK_MONOTONIC) + t;
}

static int describe(Ec2Client *c, usec_t deadline, Ec2Error *e)
{
	_cleanup_xml_free_ XmlNode *reply = NULL;
	*e = (Ec2Error){};
	return ec2_call(c, "DescribeVolumes", NULL, deadline, &reply, e);
}

/* The value of one series as /metrics shows it ("name{labels}"), 0 when absent. */
static double sample(const char *series)
{
	StrBuf b = {};
	double v = 0;

	metrics_render(&b);
	_cleanup_free_ char *text = strbuf_steal(&b);
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		if (strncmp(line, series, strlen(series)) == 0 && line[strlen(series)] == ' ')
			v = strtod(line + strlen(series) + 1, NULL);
	return v;
}

#define EC2_SERIES(name, code) "volplug_ec2_" name "{action=\"DescribeVolumes\"" code "}"

static void test_signed_request(void)
{
	Ec2Params p = {};
	char id[32], today[16];
	const char *ids[80], *values[] = {"ünïcödé & spaces/+="};
	_cleanup_xml_free_ XmlNode *reply = NULL;
	Ec2Error e = {};
	time_t now = time(NULL);
	struct tm tm;

	standin_reset(KEY, SECRET);
	standin_rules("[{\"action\": \"DescribeVolumes\", \"body\": " /* */
		      "\"<DescribeVolumesResponse><volumeSet><item><volumeId>vol-1</volumeId>"
		      "</item></volumeSet></DescribeVolumesResponse>\"}]");
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		snprintf(id, sizeof(id), "vol-%016zx", i);
		ids[i] = xstrdup(id);
	}
	ec2_params_add_list(&p, "VolumeId", ids, ELEMENTSOF(ids));
	ec2_params_add_filter(&p, "tag:note", values, 1);
	int r = ec2_call(client, "DescribeVolumes", &p, in(10 * USEC_PER_SEC), &reply, &e);
	is_int(r, 0, "DescribeVolumes: succeeded (%s)", e.message ? e.message : "no error");
	is_str(xml_text(reply, "volumeSet/item/volumeId"), "vol-1", "...with the reply read");

	json_auto_t *j = standin_requests();
	_cleanup_free_ char *body = ec2_params_encode(&p, "DescribeVolumes", EC2_API_VERSION);
	is_int(json_array_size(j), 1, "one request sent");
	is_str(standin_field(j, 0, "method"), "POST", "POST");
	is_str(standin_field(j, 0, "path"), "/", "to the endpoint's path");
	is_str(standin_field(j, 0, "body"), body, "the body is the encoded form (%zu bytes)",
	       strlen(body));
	is_str(standin_field(j, 0, "params.Filter.1.Value.1"),
	       "ünïcödé & spaces/+=", "a value with UTF-8 and reserved bytes arrives intact");
	is_str(standin_field(j, 0, "params.VolumeId.80"), "vol-000000000000004f",
	       "the 80th list item arrives");
	is_str(standin_field(j, 0, "headers.content-type"),
	       "application/x-www-form-urlencoded; charset=utf-8", "form content type");
	is_str(standin_field(j, 0, "headers.x-amz-security-token"), "session/token+1",
	       "the session token in X-Amz-Security-Token");
	ok(!standin_field(j, 0, "headers.expect"), "no Expect: 100-continue round trip");

	gmtime_r(&now, &tm);
	strftime(today, sizeof(today), "%Y%m%d", &tm);
	_cleanup_free_ char *scope = xasprintf(
		"AWS4-HMAC-SHA256 Credential=" KEY "/%s/us-east-1/ec2/aws4_request, ", today);
	const char *auth = standin_field(j, 0, "headers.authorization");
	ok(auth && strncmp(auth, scope, strlen(scope)) == 0,
	   "Authorization: AWS4-HMAC-SHA256, scope <date>/us-east-1/ec2: %s", S(auth));
	ok(auth && strstr(auth, "SignedHeaders=") && strstr(auth, "x-amz-security-token"),
	   "the session token is signed");
	const char *verdict = standin_field(j, 0, "sigv4");
	if (verdict && strncmp(verdict, "unverified", 10) == 0)
		printf("ok %d - # SKIP signature not checked: %s\n", ++tap_n, verdict);
	else
		is_str(verdict, "ok", "botocore computes the same SigV4 signature");

	/* The check can fail: the stand-in now expects another secret for the key. */
	standin_reset(KEY, "another-secret");
	standin_rules("[{\"action\": \"DescribeVolumes\", \"body\": \"<R/>\"}]");
	xml_free(reply);
	reply = NULL;
	r = ec2_call(client, "DescribeVolumes", &p, in(10 * USEC_PER_SEC), &reply, &e);
	json_t *j2 = standin_requests();
	verdict = standin_field(j2, 0, "sigv4");
	if (!verdict || strncmp(verdict, "unverified", 10) != 0)
		ok(verdict && strncmp(verdict, "bad: signature differs", 22) == 0,
		   "signed with a secret the peer does not expect: botocore disagrees");
	json_decref(j2);
	ec2_params_done(&p);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++)
		free((char *)ids[i]);
}

static void test_errors(void)
{
	Ec2Error e;
	int r;

	double not_found = sample(EC2_SERIES("requests_total", ",code=\"InvalidVolume.NotFound\""));
	standin_reset(KEY, SECRET);
	_cleanup_free_ char *nf =
		error_body("InvalidVolume.NotFound", "The volume 'vol-1' does not exist.");
	_cleanup_free_ char *r1 = rule("DescribeVolumes", 400, nf, 1);
	_cleanup_free_ char *rules = xasprintf("[%s]", r1);
	standin_rules(rules);
	r = describe(client, in(10 * USEC_PER_SEC), &e);
	is_int(r, -ENOENT, "InvalidVolume.NotFound: -ENOENT");
	is_str(e.code, "InvalidVolume.NotFound", "...the EC2 code kept");
	is_str(e.message, "InvalidVolume.NotFound: The volume 'vol-1' does not exist.",
	       "...the message keeps code and EC2's words");
	is_str(e.request_id, "rid-InvalidVolume.NotFound", "...and EC2's request ID");
	is_int(e.http_status, 400, "...and the HTTP status");
	is_int(standin_count(), 1, "...not retried");
	ok(sample(EC2_SERIES("requests_total", ",code=\"InvalidVolume.NotFound\"")) ==
		   not_found + 1,
	   "...counted once in volplug_ec2_requests_total by action and EC2's code");
	ec2_error_done(&e);

	standin_reset(KEY, SECRET);
	script(400, "VolumeInUse", 1, true);
	is_int(describe(client, in(10 * USEC_PER_SEC), &e), -ENOTEMPTY,
	       "VolumeInUse: -ENOTEMPTY (FAILED_PRECONDITION), not retried");
	is_int(standin_count(), 1, "...one request");
	ec2_error_done(&e);

	standin_reset(KEY, SECRET);
	standin_rules("[{\"action\": \"DescribeVolumes\", \"body\": \"this is no XML\"}]");
	is_int(describe(client, in(10 * USEC_PER_SEC), &e), -EPROTO, "200 without XML: -EPROTO");
	ok(e.message && strstr(e.message, "unreadable reply"), "...saying so: %s", S(e.message));
	ec2_error_done(&e);
}

static void test_retries(void)
{
	Ec2Stats before, after;
	Ec2Error e;
	int r;

	double throttles = sample(EC2_SERIES("throttles_total", ""));
	double retries = sample(EC2_SERIES("retries_total", ""));
	double successes = sample(EC2_SERIES("requests_total", ",code=\"Success\""));
	double timed = sample(EC2_SERIES("request_duration_seconds_count", ""));
	standin_reset(KEY, SECRET);
	script(503, "RequestLimitExceeded", 3, true);
	ec2_client_stats(client, &before);
	r = describe(client, in(10 * USEC_PER_SEC), &e);
	ec2_client_stats(client, &after);
	is_int(r, 0, "throttled 3 times, then served: success");
	is_int(standin_count(), 4, "...after 4 requests");
	is_int(after.retries - before.retries, 3, "...3 retries counted");
	is_int(after.throttled - before.throttled, 3, "...3 throttles counted");
	is_int(after.calls - before.calls, 1, "...in 1 call");
	ok(sample(EC2_SERIES("throttles_total", "")) == throttles + 3 &&
		   sample(EC2_SERIES("retries_total", "")) == retries + 3,
	   "...3 throttles and 3 retries in the metrics, by action");
	ok(sample(EC2_SERIES("requests_total", ",code=\"Success\"")) == successes + 1 &&
		   sample(EC2_SERIES("request_duration_seconds_count", "")) == timed + 1,
	   "...one successful call, timed once");

	standin_reset(KEY, SECRET);
	script(500, "InternalError", 2, true);
	is_int(describe(client, in(10 * USEC_PER_SEC), &e), 0, "500 InternalError twice: retried");
	is_int(standin_count(), 3, "...3 requests");

	standin_reset(KEY, SECRET);
	standin_rules("[{\"action\": \"DescribeVolumes\", \"status\": 502, \"body\": \"<html>bad "
		      "gateway</html>\"}, {\"action\": \"DescribeVolumes\", \"body\": \"<R/>\"}]");
	is_int(describe(client, in(10 * USEC_PER_SEC), &e), 0, "502 with HTML: retried");

	/* Throttled forever: the deadline ends it, and is never slept past. */
	standin_reset(KEY, SECRET);
	script(503, "RequestLimitExceeded", -1, false);
	usec_t start = now_usec(CLOCK_MONOTONIC), deadline = start + 400 * USEC_PER_MSEC;
	r = describe(client, deadline, &e);
	usec_t end = now_usec(CLOCK_MONOTONIC);
	is_int(r, -ETIMEDOUT, "throttled without end: -ETIMEDOUT");
	ok(end <= deadline + 50 * USEC_PER_MSEC,
	   "...returned by the deadline, give or take 50 ms (%+.1f ms)",
	   ((double)end - (double)deadline) / USEC_PER_MSEC);
	ok(end + 150 * USEC_PER_MSEC >= deadline,
	   "...and kept trying until near it (%.0f ms of 400)",
	   (double)(end - start) / USEC_PER_MSEC);
	ok(e.retries >= 3, "...after %u retries", e.retries);
	/* The attempt the deadline cut may not have reached the server. */
	size_t sent = standin_count();
	ok(sent == e.retries + 1 || sent == e.retries,
	   "...each retry one request (%zu sent, %u retries; the last may be cut by the deadline)",
	   sent, e.retries);
	is_str(e.code, "RequestLimitExceeded", "...the last EC2 code kept (for metrics)");
	ok(e.message && strstr(e.message, "RequestLimitExceeded: try again (deadline reached"),
	   "...the message says why: %s", S(e.message));
	ec2_error_done(&e);

	/* A reply slower than the deadline. */
	standin_reset(KEY, SECRET);
	standin_rules("[{\"action\": \"DescribeVolumes\", \"body\": \"<R/>\", \"delay\": 3}]");
	start = now_usec(CLOCK_MONOTONIC);
	r = describe(client, start + 300 * USEC_PER_MSEC, &e);
	end = now_usec(CLOCK_MONOTONIC);
	is_int(r, -ETIMEDOUT, "a reply slower than the deadline: -ETIMEDOUT");
	ok(end - start < 450 * USEC_PER_MSEC, "...after %.0f ms (deadline 300 ms)",
	   (double)(end - start) / USEC_PER_MSEC);
	ec2_error_done(&e);
}

static void test_retry_limit_and_transport(void)
{
	Ec2Client *limited = NULL, *nowhere = NULL;
	char url[64];
	Ec2Error e;
	int r;

	ec2_client_new(&(Ec2Config){.region = "us-east-1",
				    .endpoint = endpoint,
				    .credentials = creds,
				    .retry_base = 1000,
				    .retry_cap = 5000,
				    .max_retries = 2},
		       &limited, NULL);
	standin_reset(KEY, SECRET);
	script(503, "RequestLimitExceeded", -1, false);
	r = describe(limited, in(10 * USEC_PER_SEC), &e);
	is_int(r, -EAGAIN, "max_retries 2, throttled throughout: -EAGAIN (UNAVAILABLE)");
	is_int(standin_count(), 3, "...after 3 requests");
	ok(e.message && strstr(e.message, "(gave up after 2 retries)"), "...saying so: %s",
	   e.message);
	ec2_error_done(&e);
	ec2_client_free(limited);

	/* A port nobody listens on (bound, never listened to). */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", ntohs(sa.sin_port));
	ec2_client_new(&(Ec2Config){.region = "us-east-1",
				    .endpoint = url,
				    .credentials = creds,
				    .retry_base = 1000,
				    .retry_cap = 5000,
				    .max_retries = 3},
		       &nowhere, NULL);
	r = describe(nowhere, in(10 * USEC_PER_SEC), &e);
	is_int(r, -ECONNREFUSED, "connection refused 4 times: -ECONNREFUSED");
	is_int(e.retries, 3, "...after 3 retries");
	ok(e.http_status == 0 && !e.code, "...no HTTP status, no EC2 code");
	ok(e.message && strstr(e.message, url), "...the message names the endpoint: %s",
	   S(e.message));
	ec2_error_done(&e);
	ec2_client_free(nowhere);
	close(fd);
}

static char *imds_creds_rule(const char *key)
{
	time_t t = time(NULL) + 3600;
	struct tm tm;
	char exp[32];

	gmtime_r(&t, &tm);
	strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	_cleanup_free_ char *json = xasprintf(
		"{\"Code\": \"Success\", \"Type\": \"AWS-HMAC\", \"AccessKeyId\": \"%s\", "
		"\"SecretAccessKey\": \"" SECRET "\", \"Token\": \"tok-%s\", \"Expiration\": "
		"\"%s\"}",
		key, key, exp);
	_cleanup_free_ char *quoted = json_quote(json);
	return xasprintf("{\"path\": \"/latest/meta-data/iam/security-credentials/role-a\", "
			 "\"body\": %s}",
			 quoted);
}

static void test_expired_token(void)
{
	_cleanup_free_ char *imds = xasprintf("AWS_EC2_METADATA_SERVICE_ENDPOINT=%s", standin.url);
	char *env[] = {imds, NULL};
	AwsCredentialsProvider *profile =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	Ec2Client *c = NULL;
	Ec2Error e;

	ec2_client_new(&(Ec2Config){.region = "us-east-1",
				    .endpoint = endpoint,
				    .credentials = profile,
				    .retry_base = 1000},
		       &c, NULL);
	standin_reset(NULL, NULL);
	_cleanup_free_ char *k1 = imds_creds_rule("AKIDFIRST"), *k2 = imds_creds_rule("AKIDSECOND");
	_cleanup_free_ char *expired = error_body("ExpiredToken", "The security token included "
								  "in the request is expired");
	_cleanup_free_ char *r1 = rule("DescribeVolumes", 400, expired, 1);
	_cleanup_free_ char *r2 = rule("DescribeVolumes", 200, volumes_reply, 1);
	_cleanup_free_ char *rules = xasprintf(
		"[{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"body\": \"T\", "
		"\"count\": -1}, {\"path\": \"/latest/meta-data/iam/security-credentials/\", "
		"\"body\": \"role-a\\n\", \"count\": -1}, %s, %s, %s, %s]",
		k1, k2, r1, r2);
	standin_rules(rules);
	is_int(describe(c, in(10 * USEC_PER_SEC), &e), 0,
	       "ExpiredToken: new credentials fetched, the call repeated and served");
	is_int(aws_credentials_fetches(profile), 2, "...credentials fetched twice");
	json_auto_t *j = standin_requests();
	const char *first = NULL, *second = NULL;
	for (size_t i = 0; i < json_array_size(j); i++)
		if (standin_field(j, i, "params.Action")) {
			const char *a = standin_field(j, i, "headers.authorization");
			*(first ? &second : &first) = a;
		}
	ok(first && strstr(first, "Credential=AKIDFIRST/"), "...first signed with the old key");
	ok(second && strstr(second, "Credential=AKIDSECOND/"), "...then with the new one");
	ec2_client_free(c);
	aws_credentials_provider_free(profile);
}

#define THREADS 8
#define CALLS_PER_THREAD 25

static void *worker(void *arg)
{
	int *failures = arg;
	Ec2Error e;

	for (int i = 0; i < CALLS_PER_THREAD; i++)
		if (describe(client, in(30 * USEC_PER_SEC), &e) < 0) {
			(*failures)++;
			ec2_error_done(&e);
		}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	int failures[THREADS] = {};

	standin_reset(KEY, SECRET);
	_cleanup_free_ char *r = rule("DescribeVolumes", 200, volumes_reply, -1);
	_cleanup_free_ char *rules = xasprintf("[%s]", r);
	standin_rules(rules);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, &failures[i]);
	int failed = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		failed += failures[i];
	}
	is_int(failed, 0, "%d threads x %d calls on one client: none failed", THREADS,
	       CALLS_PER_THREAD);
	json_auto_t *j = standin_requests();
	size_t good = 0;
	for (size_t i = 0; i < json_array_size(j); i++) {
		const char *v = standin_field(j, i, "sigv4");
		good += v && (strcmp(v, "ok") == 0 || strncmp(v, "unverified", 10) == 0);
	}
	is_int(json_array_size(j), THREADS * CALLS_PER_THREAD, "...each sent once");
	is_int(good, THREADS * CALLS_PER_THREAD, "...each with a valid signature");
}

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void test_overhead(void)
{
	const int n = 300;
	Ec2Error e;
	int failed = 0;

	standin_reset(KEY, SECRET);
	_cleanup_free_ char *r = rule("DescribeVolumes", 200, volumes_reply, -1);
	_cleanup_free_ char *rules = xasprintf("[%s]", r);
	standin_rules(rules);
	describe(client, in(10 * USEC_PER_SEC), &e); /* connection made */
	usec_t start = now_usec(CLOCK_MONOTONIC);
	double cpu = cpu_ms();
	for (int i = 0; i < n; i++)
		if (describe(client, in(10 * USEC_PER_SEC), &e) < 0) {
			failed++;
			ec2_error_done(&e);
		}
	double wall = (double)(now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_MSEC / n;
	cpu = (cpu_ms() - cpu) / n;
	is_int(failed, 0, "%d calls in a row: none failed", n);
	printf("# per call against the local stand-in: %.2f ms wall, %.3f ms CPU in the client "
	       "(signing, HTTP, XML)\n",
	       wall, cpu);
	ok(cpu < 2.0, "client CPU per call under 2 ms (%.3f ms)", cpu);
}

int main(void)
{
	standin_start();
	snprintf(endpoint, sizeof(endpoint), "%s/", standin.url);
	char *env[] = {"AWS_ACCESS_KEY_ID=" KEY, "AWS_SECRET_ACCESS_KEY=" SECRET,
		       "AWS_SESSION_TOKEN=session/token+1", "AWS_EC2_METADATA_DISABLED=true", NULL};
	creds = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	/* Short backoff: the tests count retries, not wait for them. */
	if (ec2_client_new(&(Ec2Config){.region = "us-east-1",
					.endpoint = endpoint,
					.credentials = creds,
					.retry_base = 5 * USEC_PER_MSEC,
					.retry_cap = 40 * USEC_PER_MSEC},
			   &client, NULL) < 0) {
		printf("Bail out! no client\n");
		return 1;
	}
	test_signed_request();
	test_errors();
	test_retries();
	test_retry_limit_and_transport();
	test_expired_token();
	test_threads();
	test_overhead();
	ec2_client_free(client);
	aws_credentials_provider_free(creds);
	return tap_done();
}
