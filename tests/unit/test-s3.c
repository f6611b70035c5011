/* SPDX-License-Identifier: Apache-2.0 */
/* The S3 client against the small S3 of the tests (tests/s3sim): objects, ranges, lists over
 * pages, multipart, signatures checked, and faults: 500, 503 SlowDown, dropped connections,
 * slow answers, a wrong key, a missing bucket. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "s3.h"
#include "s3sim.h"
#include "tap.h"

static AwsCredentialsProvider *creds, *wrong;
static const AwsRetry quick = {.base = 10 * USEC_PER_MSEC, .cap = 50 * USEC_PER_MSEC};

static usec_t in(usec_t d)
{
	return now_usec(CLOCK_MONOTONIC) + d;
}

static S3Client *client_with(const char *bucket, AwsCredentialsProvider *p, bool path_style,
			     bool unsigned_payload)
{
	_cleanup_free_ char *endpoint = NULL;
	S3Client *c = NULL;

	/* Virtual-hosted: bucket.localhost resolves to 127.0.0.1 (RFC 6761). */
	endpoint = path_style ? xstrdup(s3sim.url)
			      : xasprintf("http://localhost:%s", strrchr(s3sim.url, ':') + 1);
	if (s3_client_new(&(S3Config){.endpoint = endpoint,
				      .bucket = bucket,
				      .region = "us-east-1",
				      .path_style = path_style,
				      .unsigned_payload = unsigned_payload,
				      .credentials = p,
				      .retry = quick},
			  &c, NULL) < 0) {
		printf("Bail out! s3_client_new\n");
		exit(1);
	}
	return c;
}

static void test_objects(bool path_style, bool unsigned_payload)
{
	_cleanup_(s3_client_freep) S3Client *c =
		client_with("snaps", creds, path_style, unsigned_payload);
	_cleanup_free_ char *err = NULL, *data = NULL;
	const char *style = path_style ? "path-style" : "virtual-hosted";
	size_t len = 0;
	uint64_t size = 0;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	is_int(s3_put(c, "p/chunks/ab", "hello world", 11, true, in(5 * USEC_PER_SEC), &err), 0,
	       "%s%s: PutObject signed", style, unsigned_payload ? ", UNSIGNED-PAYLOAD" : "");
	is_int(s3_put(c, "p/chunks/ab", "other", 5, true, in(5 * USEC_PER_SEC), &err), -EEXIST,
	       "...again with If-None-Match: -EEXIST");
	ok(err && strstr(err, "s3://snaps/p/chunks/ab at ") && strstr(err, "PreconditionFailed"),
	   "...the message names the object and the code: %s", err);
	is_int(s3_get(c, "p/chunks/ab", 6, 5, 0, in(5 * USEC_PER_SEC), &data, &len, NULL), 0,
	       "...GetObject with a range");
	ok(len == 5 && memcmp(data, "world", 5) == 0, "...the range's bytes");
	is_int(s3_head(c, "p/chunks/ab", in(5 * USEC_PER_SEC), &size, NULL), 0, "...HeadObject");
	is_int((long long)size, 11, "...its size");
	free(err);
	err = NULL;
	is_int(s3_head(c, "p/chunks/none", in(5 * USEC_PER_SEC), &size, &err), -ENOENT,
	       "...HeadObject of nothing: -ENOENT");
	ok(err && strstr(err, "s3://snaps/p/chunks/none"), "...naming the object: %s", err);
	is_int(s3_delete(c, "p/chunks/ab", in(5 * USEC_PER_SEC), NULL), 0, "...DeleteObject");
	free(data);
	data = NULL;
	free(err);
	err = NULL;
	is_int(s3_get(c, "p/chunks/ab", 0, 0, 0, in(5 * USEC_PER_SEC), &data, &len, &err), -ENOENT,
	       "...GetObject of a deleted object: -ENOENT");
	ok(err && strstr(err, "NoSuchKey"), "...NoSuchKey: %s", err);
}

static int count_key(const S3Object *o, void *userdata)
{
	size_t *n = userdata;
	(*n)++;
	return o->size == 1 ? 0 : -EBADMSG;
}

static void test_list_and_delete_many(void)
{
	_cleanup_(s3_client_freep) S3Client *c = client_with("snaps", creds, true, false);
	char *keys[25];
	size_t n = 0;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}, \"page\": 7}");
	for (int i = 0; i < 25; i++) {
		keys[i] = xasprintf("p/chunks/%02d", i);
		s3_put(c, keys[i], "x", 1, false, in(5 * USEC_PER_SEC), NULL);
	}
	s3_put(c, "q/other", "x", 1, false, in(5 * USEC_PER_SEC), NULL);
	is_int(s3_list(c, "p/chunks/", count_key, &n, in(5 * USEC_PER_SEC), NULL), 0,
	       "ListObjectsV2 over pages of 7");
	is_int((long long)n, 25, "...every object under the prefix, once");
	is_int(s3sim_requests("GET"), 4, "...in 4 requests (continuation tokens)");
	is_int(s3_delete_many(c, (const char *const *)keys, 25, in(5 * USEC_PER_SEC), NULL), 0,
	       "DeleteObjects");
	is_int((long long)s3sim_objects(), 1, "...only the other prefix's object is left");
	for (int i = 0; i < 25; i++)
		free(keys[i]);
}

static void test_multipart(void)
{
	_cleanup_(s3_client_freep) S3Client *c = client_with("snaps", creds, true, true);
	_cleanup_free_ char *id = NULL, *e1 = NULL, *e2 = NULL, *data = NULL, *id2 = NULL;
	size_t len = 0;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	is_int(s3_multipart_create(c, "big", in(5 * USEC_PER_SEC), &id, NULL), 0,
	       "CreateMultipartUpload");
	is_int(s3_multipart_put(c, "big", id, 1, "abc", 3, in(5 * USEC_PER_SEC), &e1, NULL), 0,
	       "...UploadPart 1");
	is_int(s3_multipart_put(c, "big", id, 2, "def", 3, in(5 * USEC_PER_SEC), &e2, NULL), 0,
	       "...UploadPart 2");
	const char *etags[] = {e1, e2};
	is_int(s3_multipart_complete(c, "big", id, etags, 2, in(5 * USEC_PER_SEC), NULL), 0,
	       "...CompleteMultipartUpload");
	s3_get(c, "big", 0, 0, 0, in(5 * USEC_PER_SEC), &data, &len, NULL);
	ok(len == 6 && memcmp(data, "abcdef", 6) == 0, "...the object is the parts in order");
	is_int(s3_multipart_create(c, "big2", in(5 * USEC_PER_SEC), &id2, NULL), 0,
	       "another upload");
	is_int(s3_multipart_abort(c, "big2", id2, in(5 * USEC_PER_SEC), NULL), 0, "...aborted");
	json_t *j = s3sim_stats();
	is_int(json_integer_value(json_object_get(j, "uploads")), 0, "...no upload left open");
	json_decref(j);
}

static void test_faults(void)
{
	_cleanup_(s3_client_freep) S3Client *c = client_with("snaps", creds, true, false);
	_cleanup_(s3_client_freep) S3Client *bad = client_with("snaps", wrong, true, false);
	_cleanup_(s3_client_freep) S3Client *nob = client_with("nobucket", creds, true, false);
	_cleanup_free_ char *err = NULL, *data = NULL;
	size_t len = 0;
	S3Stats st;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	s3sim_faults("[{\"method\": \"PUT\", \"status\": 503, \"code\": \"SlowDown\", "
		     "\"times\": 2}, {\"method\": \"PUT\", \"status\": 500, \"times\": 1}]");
	is_int(s3_put(c, "k", "v", 1, false, in(10 * USEC_PER_SEC), NULL), 0,
	       "two 503 SlowDown and a 500, then success: retried");
	s3_client_stats(c, &st);
	is_int((long long)st.retries, 3, "...three retries");
	is_int((long long)st.throttled, 2, "...two of them throttled");

	s3sim_faults("[{\"method\": \"GET\", \"drop\": true, \"times\": 1}]");
	is_int(s3_get(c, "k", 0, 0, 0, in(10 * USEC_PER_SEC), &data, &len, NULL), 0,
	       "a connection dropped mid-reply: retried");
	ok(len == 1 && data[0] == 'v', "...and the whole object came");

	s3sim_faults("[{\"method\": \"PUT\", \"status\": 503, \"code\": \"SlowDown\"}]");
	usec_t start = now_usec(CLOCK_MONOTONIC);
	is_int(s3_put(c, "k2", "v", 1, false, in(300 * USEC_PER_MSEC), &err), -ETIMEDOUT,
	       "SlowDown until the deadline: -ETIMEDOUT");
	ok(now_usec(CLOCK_MONOTONIC) - start < 600 * USEC_PER_MSEC, "...within the deadline");
	ok(err && strstr(err, "s3://snaps/k2 at ") && strstr(err, "SlowDown") &&
		   strstr(err, "retries"),
	   "...naming the object, SlowDown and the retries: %s", err);

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	s3sim_faults("[{\"method\": \"HEAD\", \"delay\": 2}]");
	start = now_usec(CLOCK_MONOTONIC);
	is_int(s3_head(c, "k", in(400 * USEC_PER_MSEC), NULL, NULL), -ETIMEDOUT,
	       "a store that does not answer: -ETIMEDOUT at the deadline");
	ok(now_usec(CLOCK_MONOTONIC) - start < 900 * USEC_PER_MSEC, "...not later");

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	free(err);
	err = NULL;
	is_int(s3_put(bad, "k", "v", 1, false, in(5 * USEC_PER_SEC), &err), -EACCES,
	       "a wrong secret: -EACCES");
	ok(err && strstr(err, "SignatureDoesNotMatch") && strstr(err, "s3://snaps/k"),
	   "...SignatureDoesNotMatch, naming the object: %s", err);
	is_int(s3sim_requests("PUT"), 1, "...not retried");
	free(err);
	err = NULL;
	is_int(s3_put(nob, "k", "v", 1, false, in(5 * USEC_PER_SEC), &err), -ENXIO,
	       "a missing bucket: -ENXIO");
	ok(err && strstr(err, "NoSuchBucket") && strstr(err, "s3://nobucket/k"),
	   "...NoSuchBucket, naming the bucket: %s", err);
	free(err);
	err = NULL;
	is_int(s3_put(c, "../x y", "v", 1, false, in(5 * USEC_PER_SEC), &err), -EINVAL,
	       "a key out of the alphabet: -EINVAL, nothing sent");
}

static void test_config(void)
{
	S3Client *c = NULL;
	_cleanup_free_ char *err = NULL;

	is_int(s3_client_new(&(S3Config){.bucket = "vp", .region = "us-east-1"}, &c, &err), -EINVAL,
	       "a bucket name of 2 characters: -EINVAL");
	ok(err && strstr(err, "\"vp\""), "...naming it: %s", err);
	free(err);
	err = NULL;
	is_int(s3_client_new(
		       &(S3Config){.bucket = "snaps", .region = "us-east-1", .endpoint = "ftp://x"},
		       &c, &err),
	       -EINVAL, "an endpoint that is not http(s): -EINVAL");
	is_int(s3_client_new(&(S3Config){.bucket = "snaps", .region = "eu-west-1"}, &c, NULL), 0,
	       "AWS by default");
	is_str(s3_client_name(c), "s3://snaps at https://s3.eu-west-1.amazonaws.com",
	       "...the name messages use");
	s3_client_free(c);
}

static void moto_checks(int port, const char *key, const char *secret)
{
	char env_key[160], env_secret[160];
	_cleanup_free_ char *endpoint = NULL, *err = NULL, *data = NULL, *id = NULL, *e1 = NULL;
	_cleanup_free_ char *big = xmalloc((size_t)5 << 20);
	size_t len = 0, n = 0;
	S3Client *c = NULL, *bad = NULL;

	snprintf(env_key, sizeof(env_key), "AWS_ACCESS_KEY_ID=%s", key);
	snprintf(env_secret, sizeof(env_secret), "AWS_SECRET_ACCESS_KEY=%s", secret);
	char *env[] = {env_key, env_secret, "AWS_EC2_METADATA_DISABLED=true", NULL};
	char *env_wrong[] = {env_key, "AWS_SECRET_ACCESS_KEY=not-the-secret",
			     "AWS_EC2_METADATA_DISABLED=true", NULL};
	_cleanup_(aws_credentials_provider_freep) AwsCredentialsProvider *mc =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	_cleanup_(aws_credentials_provider_freep) AwsCredentialsProvider *mw =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env_wrong});
	endpoint = xasprintf("http://127.0.0.1:%d", port);
	S3Config cfg = {.endpoint = endpoint,
			.bucket = "volplug-snaps",
			.region = "us-east-1",
			.path_style = true,
			.credentials = mc,
			.retry = quick};
	s3_client_new(&cfg, &c, NULL);
	cfg.credentials = mw;
	s3_client_new(&cfg, &bad, NULL);
	is_int(s3_put(c, "p/chunks/ab", "hello world", 11, true, in(20 * USEC_PER_SEC), &err), 0,
	       "moto: PutObject signed with the body's hash: %s", err ? err : "ok");
	is_int(s3_get(c, "p/chunks/ab", 6, 5, 0, in(20 * USEC_PER_SEC), &data, &len, NULL), 0,
	       "moto: GetObject with a range");
	ok(len == 5 && memcmp(data, "world", 5) == 0, "moto: ...the range's bytes");
	is_int(s3_head(c, "p/chunks/none", in(20 * USEC_PER_SEC), NULL, NULL), -ENOENT,
	       "moto: HeadObject of nothing: -ENOENT");
	for (int i = 0; i < 3; i++) {
		char k[32];
		snprintf(k, sizeof(k), "p/list/%d", i);
		s3_put(c, k, "x", 1, false, in(20 * USEC_PER_SEC), NULL);
	}
	is_int(s3_list(c, "p/list/", count_key, &n, in(20 * USEC_PER_SEC), NULL), 0,
	       "moto: ListObjectsV2 (the query signed)");
	is_int((long long)n, 3, "moto: ...3 objects");
	memset(big, 'm', (size_t)5 << 20);
	is_int(s3_multipart_create(c, "big", in(20 * USEC_PER_SEC), &id, NULL), 0,
	       "moto: CreateMultipartUpload");
	is_int(s3_multipart_put(c, "big", id, 1, big, (size_t)5 << 20, in(60 * USEC_PER_SEC), &e1,
				NULL),
	       0, "moto: UploadPart of 5 MiB");
	const char *etags[] = {e1};
	is_int(s3_multipart_complete(c, "big", id, etags, 1, in(20 * USEC_PER_SEC), NULL), 0,
	       "moto: CompleteMultipartUpload");
	const char *keys[] = {"p/list/0", "p/list/1", "p/list/2"};
	is_int(s3_delete_many(c, keys, 3, in(20 * USEC_PER_SEC), NULL), 0, "moto: DeleteObjects");
	n = 0;
	s3_list(c, "p/list/", count_key, &n, in(20 * USEC_PER_SEC), NULL);
	is_int((long long)n, 0, "moto: ...none left");
	free(err);
	err = NULL;
	is_int(s3_put(bad, "k", "v", 1, false, in(20 * USEC_PER_SEC), &err), -EACCES,
	       "moto: a wrong secret: -EACCES");
	ok(err && strstr(err, "SignatureDoesNotMatch") && strstr(err, "s3://volplug-snaps/k"),
	   "moto: ...naming the object: %s", err);
	s3_client_free(c);
	s3_client_free(bad);
}

/* The same client against moto's S3 (by others), signatures checked: skipped, saying why,
 * when moto is absent. */
static void test_moto(void)
{
	char line[256], key[128] = "", secret[128] = "";
	int port = 0, control = -1;
	pid_t pid = 0;

	s3sim_spawn(SOURCE_ROOT "/tests/s3sim/moto-peer.py", &pid, &control, line, sizeof(line));
	if (sscanf(line, "PORT %d KEY %127s SECRET %127s", &port, key, secret) == 3)
		moto_checks(port, key, secret);
	else
		printf("ok %d - moto's S3 # SKIP %s\n", ++tap_n,
		       strncmp(line, "SKIP ", 5) == 0 ? line + 5 : line);
	close(control);
	(void)waitpid(pid, NULL, 0);
}

int main(void)
{
	char *env[] = {"AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=secret",
		       "AWS_EC2_METADATA_DISABLED=true", NULL};
	char *env_wrong[] = {"AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=wrong",
			     "AWS_EC2_METADATA_DISABLED=true", NULL};

	s3sim_start();
	creds = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	wrong = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env_wrong});
	test_config();
	test_objects(true, false);
	test_objects(true, true);
	test_objects(false, false);
	test_list_and_delete_many();
	test_multipart();
	test_faults();
	test_moto();
	aws_credentials_provider_free(creds);
	aws_credentials_provider_free(wrong);
	return tap_done();
}
