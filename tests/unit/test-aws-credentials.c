/* SPDX-License-Identifier: Apache-2.0 */
/* Where the EC2 client finds its credentials and region, against files written here and a
 * local stand-in (aws-standin.py) for STS and the instance metadata service: each source of
 * the chain, their order, broken sources, refresh before expiry, many threads asking at once,
 * the region and the instance's identity. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc.h"
#include "aws-standin.h"
#include "aws-credentials.h"
#include "imds.h"
#include "scratch.h"
#include "tap.h"

#define S(s) ((s) ? (s) : "(null)")
#define ROLE "arn:aws:iam::123456789012:role/ebs-csi"

static char *sts_env, *imds_env, *file_env, *token_env;

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* An AWS time t seconds from now. */
static char *iso_in(long t)
{
	time_t when = time(NULL) + t;
	struct tm tm;
	char buf[32];

	gmtime_r(&when, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

static char *sts_reply(const char *key, long expires_in)
{
	_cleanup_free_ char *exp = iso_in(expires_in);
	return xasprintf("<AssumeRoleWithWebIdentityResponse "
			 "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
			 "<AssumeRoleWithWebIdentityResult><Credentials>"
			 "<AccessKeyId>%s</AccessKeyId><SecretAccessKey>secret-%s</SecretAccessKey>"
			 "<SessionToken>token-%s</SessionToken><Expiration>%s</Expiration>"
			 "</Credentials><SubjectFromWebIdentityToken>system:serviceaccount:kube-"
			 "system:ebs-csi-controller-sa</SubjectFromWebIdentityToken>"
			 "</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>sts-1"
			 "</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>",
			 key, key, key, exp);
}

/* A rule for STS answering with key, valid expires_in seconds; delay in seconds. */
static char *sts_rule(const char *key, long expires_in, double delay)
{
	_cleanup_free_ char *reply = sts_reply(key, expires_in), *q = json_quote(reply);
	return xasprintf("{\"action\": \"AssumeRoleWithWebIdentity\", \"body\": %s, "
			 "\"delay\": %g}",
			 q, delay);
}

static void rules1(char *rule)
{
	_cleanup_free_ char *list = xasprintf("[%s]", rule);
	free(rule);
	standin_rules(list);
}

static const char imds_token_rule[] =
	"{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"body\": \"TOKEN-1\"}";

static char *imds_rules(const char *key)
{
	_cleanup_free_ char *exp = iso_in(6 * 3600);
	_cleanup_free_ char *json = xasprintf(
		"{\"Code\": \"Success\", \"LastUpdated\": \"2024-05-01T12:00:00Z\", \"Type\": "
		"\"AWS-HMAC\", \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"secret-%s\", "
		"\"Token\": \"token-%s\", \"Expiration\": \"%s\"}",
		key, key, key, exp);
	_cleanup_free_ char *q = json_quote(json);
	return xasprintf("%s, {\"path\": \"/latest/meta-data/iam/security-credentials/\", "
			 "\"body\": \"node-role\\n\"}, {\"path\": "
			 "\"/latest/meta-data/iam/security-credentials/node-role\", \"body\": %s}",
			 imds_token_rule, q);
}

typedef struct Got {
	int r;
	AwsCredentials c;
	char *error;
} Got;

static void got_done(Got *g)
{
	aws_credentials_done(&g->c);
	free(g->error);
	*g = (Got){};
}

static Got get(AwsCredentialsProvider *p)
{
	Got g = {};
	g.r = aws_credentials_get(p, now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC, &g.c, &g.error);
	return g;
}

/* The provider's answer for an environment, in one go. */
static Got get_with(char **env)
{
	AwsCredentialsProvider *p = aws_credentials_provider_new(
		&(AwsCredentialsConfig){.environment = env, .imds_attempt_timeout = 200000});
	Got g = get(p);
	aws_credentials_provider_free(p);
	return g;
}

static void test_environment(void)
{
	char *env[] = {"AWS_ACCESS_KEY_ID=AKIDENV", "AWS_SECRET_ACCESS_KEY=secret-env",
		       "AWS_SESSION_TOKEN=token-env", NULL};
	Got g = get_with(env);
	is_int(g.r, 0, "environment: found");
	is_str(g.c.source, "environment", "...source environment");
	is_str(g.c.access_key_id, "AKIDENV", "...key id");
	is_str(g.c.secret_access_key, "secret-env", "...secret");
	is_str(g.c.session_token, "token-env", "...session token");
	is_int(g.c.expiration, 0, "...never expire");
	got_done(&g);

	char *half[] = {"AWS_ACCESS_KEY_ID=AKIDENV", file_env, NULL};
	g = get_with(half);
	is_int(g.r, -EINVAL, "only AWS_ACCESS_KEY_ID: -EINVAL, not the next source");
	is_str(g.error, "environment: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
	       "...saying what is missing");
	got_done(&g);
}

static void test_shared_file(void)
{
	_cleanup_free_ char *dir = scratch_mkdir("home"), *aws = xasprintf("%s/.aws", dir);
	_cleanup_free_ char *path = xasprintf("%s/credentials", aws);
	_cleanup_free_ char *home = xasprintf("HOME=%s", dir);

	mkdir(aws, 0700);
	write_text(path, "# comment\n[default]\naws_access_key_id = AKIDHOME\n"
			 "aws_secret_access_key=secret-home\n");
	char *env_home[] = {home, NULL};
	Got g = get_with(env_home);
	is_int(g.r, 0, "~/.aws/credentials from HOME: found");
	is_str(g.c.source, "shared-file", "...source shared-file");
	is_str(g.c.access_key_id, "AKIDHOME", "...profile default");
	ok(!g.c.session_token, "...no session token");
	got_done(&g);

	char *env_default[] = {file_env, NULL};
	g = get_with(env_default);
	is_int(g.r, 0, "AWS_SHARED_CREDENTIALS_FILE: found");
	is_str(g.c.access_key_id, "AKIDFILE", "...profile default");
	is_str(g.c.secret_access_key, "secret/file+=", "...values trimmed, = kept");
	got_done(&g);

	char *env_other[] = {file_env, "AWS_PROFILE=other", NULL};
	g = get_with(env_other);
	is_str(g.c.access_key_id, "AKIDOTHER", "AWS_PROFILE=other: that profile");
	is_str(g.c.session_token, "token-other", "...with its session token");
	got_done(&g);

	char *env_missing[] = {file_env, "AWS_PROFILE=missing", NULL};
	g = get_with(env_missing);
	is_int(g.r, -ENOENT, "AWS_PROFILE names a profile the file lacks: -ENOENT");
	ok(g.error && strstr(g.error, "profile missing not found"), "...saying so: %s", S(g.error));
	got_done(&g);

	char *env_nokeys[] = {file_env, "AWS_PROFILE=nokeys", NULL};
	g = get_with(env_nokeys);
	is_int(g.r, -EINVAL, "AWS_PROFILE names a profile without keys: -EINVAL");
	got_done(&g);

	/* Kubernetes mounts secrets as symlinks into a ..data directory. */
	_cleanup_free_ char *link = scratch_path("linked-credentials");
	_cleanup_free_ char *link_env = xasprintf("AWS_SHARED_CREDENTIALS_FILE=%s", link);
	if (symlink(strchr(file_env, '=') + 1, link) < 0)
		printf("Bail out! symlink\n");
	char *env_link[] = {link_env, NULL};
	g = get_with(env_link);
	is_str(g.c.access_key_id, "AKIDFILE", "a credentials file that is a symlink is followed");
	got_done(&g);
}

static void test_web_identity(void)
{
	char *env[] = {token_env, "AWS_ROLE_ARN=" ROLE, "AWS_ROLE_SESSION_NAME=sess-1", sts_env,
		       NULL};
	usec_t before = now_usec(CLOCK_REALTIME);

	standin_reset(NULL, NULL);
	rules1(sts_rule("ASIAWEB", 3600, 0));
	Got g = get_with(env);
	is_int(g.r, 0, "web identity: found (%s)", g.error ? g.error : "no error");
	is_str(g.c.source, "web-identity", "...source web-identity");
	is_str(g.c.access_key_id, "ASIAWEB", "...key id from STS");
	is_str(g.c.secret_access_key, "secret-ASIAWEB", "...secret");
	is_str(g.c.session_token, "token-ASIAWEB", "...session token");
	ok(g.c.expiration > before + 3590 * USEC_PER_SEC &&
		   g.c.expiration < before + 3610 * USEC_PER_SEC,
	   "...expiration read");
	got_done(&g);

	json_auto_t *j = standin_requests();
	is_int(json_array_size(j), 1, "one STS request");
	is_str(standin_field(j, 0, "method"), "POST", "...POST");
	is_str(standin_field(j, 0, "params.Version"), "2011-06-15", "...STS's API version");
	is_str(standin_field(j, 0, "params.RoleArn"), ROLE, "...RoleArn");
	is_str(standin_field(j, 0, "params.RoleSessionName"), "sess-1",
	       "...RoleSessionName from AWS_ROLE_SESSION_NAME");
	is_str(standin_field(j, 0, "params.WebIdentityToken"), "eyJhbGciOiJSUzI1NiJ9.e30.sig",
	       "...the token file's content, without its newline");
	is_str(standin_field(j, 0, "sigv4"), "unsigned",
	       "...unsigned (STS takes the token as the proof)");

	standin_reset(NULL, NULL);
	standin_rules("[{\"action\": \"AssumeRoleWithWebIdentity\", \"status\": 400, \"body\": "
		      "\"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken"
		      "</Code><Message>No OpenIDConnect provider found in your account"
		      "</Message></Error><RequestId>x</RequestId></ErrorResponse>\"}]");
	g = get_with(env);
	is_int(g.r, -EACCES, "STS refuses the token: -EACCES");
	is_str(g.error,
	       "web identity: STS AssumeRoleWithWebIdentity for " ROLE
	       ": InvalidIdentityToken: No OpenIDConnect provider found in your account",
	       "...the message names the source, the role and STS's code");
	got_done(&g);

	char *env_no_file[] = {"AWS_WEB_IDENTITY_TOKEN_FILE=/nonexistent/token",
			       "AWS_ROLE_ARN=" ROLE, sts_env, file_env, NULL};
	g = get_with(env_no_file);
	is_int(g.r, -ENOENT, "a token file that is not there: -ENOENT, not the shared file");
	ok(g.error && strstr(g.error, "/nonexistent/token"), "...naming it: %s", S(g.error));
	got_done(&g);

	char *env_no_role[] = {token_env, sts_env, NULL};
	g = get_with(env_no_role);
	is_int(g.r, -EINVAL, "a token file without AWS_ROLE_ARN: -EINVAL");
	got_done(&g);
}

static void test_instance_profile(void)
{
	char *env[] = {imds_env, "HOME=/nonexistent", NULL};

	standin_reset(NULL, NULL);
	_cleanup_free_ char *rules = imds_rules("ASIANODE");
	_cleanup_free_ char *list = xasprintf("[%s]", rules);
	standin_rules(list);
	Got g = get_with(env);
	is_int(g.r, 0, "instance profile: found (%s)", g.error ? g.error : "no error");
	is_str(g.c.source, "instance-profile", "...source instance-profile");
	is_str(g.c.access_key_id, "ASIANODE", "...key of the instance's role");
	is_str(g.c.session_token, "token-ASIANODE", "...session token");
	ok(g.c.expiration > 0, "...they expire");
	got_done(&g);

	json_auto_t *j = standin_requests();
	is_int(json_array_size(j), 3, "IMDSv2: three requests");
	ok(strcmp(S(standin_field(j, 0, "method")), "PUT") == 0 &&
		   strcmp(S(standin_field(j, 0, "path")), "/latest/api/token") == 0,
	   "...PUT /latest/api/token first");
	is_str(standin_field(j, 0, "headers.x-aws-ec2-metadata-token-ttl-seconds"), "21600",
	       "...asking for a 6 h token");
	is_str(standin_field(j, 1, "path"), "/latest/meta-data/iam/security-credentials/",
	       "...then the role");
	is_str(standin_field(j, 2, "path"), "/latest/meta-data/iam/security-credentials/node-role",
	       "...then its credentials");
	ok(strcmp(S(standin_field(j, 1, "headers.x-aws-ec2-metadata-token")), "TOKEN-1") == 0 &&
		   strcmp(S(standin_field(j, 2, "headers.x-aws-ec2-metadata-token")), "TOKEN-1") ==
			   0,
	   "...each GET with the token");

	/* No instance profile: the service answers 404 for the role list. */
	standin_reset(NULL, NULL);
	standin_rules("[{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"body\": \"T\"}, "
		      "{\"path\": \"/latest/meta-data/iam/security-credentials/\", \"status\": "
		      "404, \"body\": \"\"}]");
	char *env_plain[] = {imds_env, "HOME=/nonexistent", NULL};
	g = get_with(env_plain);
	is_int(g.r, -ENOKEY, "nothing configured, no instance profile: -ENOKEY");
	is_str(g.error,
	       "no credentials: AWS_ACCESS_KEY_ID not set; AWS_WEB_IDENTITY_TOKEN_FILE not set; "
	       "/nonexistent/.aws/credentials: not found; instance metadata: no instance profile",
	       "...saying what each source lacked");
	got_done(&g);
}

static void test_chain_order(void)
{
	char *all[] = {"AWS_ACCESS_KEY_ID=AKIDENV",
		       "AWS_SECRET_ACCESS_KEY=s",
		       token_env,
		       "AWS_ROLE_ARN=" ROLE,
		       sts_env,
		       file_env,
		       "HOME=/nonexistent",
		       imds_env,
		       NULL};
	_cleanup_free_ char *imds = imds_rules("ASIANODE"), *sts = sts_rule("ASIAWEB", 3600, 0);
	_cleanup_free_ char *rules = xasprintf("[%s, %s]", sts, imds);
	static const char *const want[] = {"environment", "web-identity", "shared-file",
					   "instance-profile"};

	for (size_t skip = 0; skip < 4; skip++) {
		standin_reset(NULL, NULL);
		standin_rules(rules);
		/* Leave out the first `skip` sources (environment: 2 entries, web identity: 3,
		 * file: 1; HOME points nowhere). */
		char **env = all + (skip >= 1 ? 2 : 0) + (skip >= 2 ? 3 : 0) + (skip >= 3 ? 1 : 0);
		Got g = get_with(env);
		is_str(g.c.source, want[skip], "chain with %s and what follows it: %s wins",
		       want[skip], want[skip]);
		got_done(&g);
	}
}

static void test_refresh(void)
{
	char *env[] = {token_env, "AWS_ROLE_ARN=" ROLE, sts_env, NULL};
	AwsCredentialsProvider *p =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	Got g;

	standin_reset(NULL, NULL);
	rules1(sts_rule("ASIAHOUR", 3600, 0));
	g = get(p);
	got_done(&g);
	g = get(p);
	is_str(g.c.access_key_id, "ASIAHOUR", "valid for an hour: the same key again");
	is_int(aws_credentials_fetches(p), 1, "...fetched once");
	got_done(&g);
	aws_credentials_provider_free(p);

	/* Within 5 minutes of expiry: fetched anew. */
	p = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	standin_reset(NULL, NULL);
	_cleanup_free_ char *a = sts_rule("ASIAOLD", 240, 0), *b = sts_rule("ASIANEW", 3600, 0);
	_cleanup_free_ char *both = xasprintf("[%s, %s]", a, b);
	standin_rules(both);
	g = get(p);
	is_str(g.c.access_key_id, "ASIAOLD", "credentials expiring in 4 minutes");
	got_done(&g);
	g = get(p);
	is_str(g.c.access_key_id, "ASIANEW", "...are refreshed at the next use");
	is_int(aws_credentials_fetches(p), 2, "...two fetches");
	got_done(&g);
	aws_credentials_provider_free(p);

	/* The refresh fails while they are still valid: kept, and not asked for at every use. */
	p = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	standin_reset(NULL, NULL);
	rules1(sts_rule("ASIAOLD", 240, 0));
	g = get(p);
	got_done(&g);
	g = get(p);
	is_int(g.r, 0, "refresh failed, credentials still valid: no error");
	is_str(g.c.access_key_id, "ASIAOLD", "...the current ones kept");
	got_done(&g);
	g = get(p);
	is_int(aws_credentials_fetches(p), 2, "...and no new try right after the failed one");
	got_done(&g);
	aws_credentials_provider_free(p);

	/* Expired, and the refresh fails: an error. */
	p = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	standin_reset(NULL, NULL);
	rules1(sts_rule("ASIABRIEF", 1, 0));
	g = get(p);
	got_done(&g);
	usleep(2100000);
	g = get(p);
	is_int(g.r, -EINVAL, "expired, and the refresh fails: the refresh's error");
	ok(g.error && strstr(g.error, "StandinNoRule"), "...with its message: %s", S(g.error));
	got_done(&g);
	aws_credentials_provider_free(p);
}

#define THREADS 8

static AwsCredentialsProvider *shared;

static void *getter(void *arg)
{
	*(Got *)arg = get(shared);
	return NULL;
}

static void test_threads(void)
{
	char *env[] = {token_env, "AWS_ROLE_ARN=" ROLE, sts_env, NULL};
	AwsCredentialsProvider *p =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	pthread_t t[THREADS];

	shared = p;
	Got g[THREADS];

	standin_reset(NULL, NULL);
	_cleanup_free_ char *one = sts_rule("ASIASLOW", 3600, 0.3),
			    *two = sts_rule("ASIAX", 3600, 0);
	_cleanup_free_ char *rules = xasprintf("[%s, %s]", one, two);
	standin_rules(rules);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, getter, &g[i]);
	int same = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		same += g[i].r == 0 && strcmp(S(g[i].c.access_key_id), "ASIASLOW") == 0;
		got_done(&g[i]);
	}
	is_int(same, THREADS, "%d threads asking during a slow fetch all get its result", THREADS);
	is_int(aws_credentials_fetches(p), 1, "...from one fetch");
	is_int(standin_count(), 1, "...one STS request");
	aws_credentials_provider_free(p);
}

static void test_no_io_until_used(void)
{
	char *env[] = {"AWS_SHARED_CREDENTIALS_FILE=/nonexistent/broken",
		       "AWS_PROFILE=x",
		       token_env,
		       "AWS_ROLE_ARN=" ROLE,
		       sts_env,
		       imds_env,
		       NULL};

	standin_reset(NULL, NULL);
	AwsCredentialsProvider *p =
		aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	aws_credentials_provider_free(p);
	is_int(standin_count(), 0,
	       "a provider never asked for credentials sends no request (node mode)");
}

static void test_region_and_identity(void)
{
	Imds *m = imds_new(&(ImdsConfig){.endpoint = standin.url});
	usec_t deadline = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
	char *region = NULL, *error = NULL;

	char *both[] = {"AWS_REGION=eu-west-1", "AWS_DEFAULT_REGION=us-west-2", NULL};
	ok(aws_region_discover(both, m, deadline, &region, NULL) == 0 &&
		   strcmp(region, "eu-west-1") == 0,
	   "AWS_REGION first");
	free(region);
	char *dflt[] = {"AWS_DEFAULT_REGION=us-west-2", NULL};
	ok(aws_region_discover(dflt, m, deadline, &region, NULL) == 0 &&
		   strcmp(region, "us-west-2") == 0,
	   "then AWS_DEFAULT_REGION");
	free(region);

	char *none[] = {NULL};
	standin_reset(NULL, NULL);
	standin_rules("[{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"body\": \"T\", "
		      "\"count\": -1}, {\"path\": \"/latest/meta-data/placement/region\", "
		      "\"body\": \"ap-southeast-2\"}]");
	ok(aws_region_discover(none, m, deadline, &region, NULL) == 0 &&
		   strcmp(region, "ap-southeast-2") == 0,
	   "then the instance metadata's placement/region");
	free(region);
	standin_rules("[{\"path\": \"/latest/meta-data/placement/region\", \"status\": 404}, "
		      "{\"path\": \"/latest/meta-data/placement/availability-zone\", \"body\": "
		      "\"sa-east-1c\\n\"}]");
	ok(aws_region_discover(none, m, deadline, &region, NULL) == 0 &&
		   strcmp(region, "sa-east-1") == 0,
	   "without placement/region: the zone without its letter");
	free(region);
	is_int(aws_region_discover(none, NULL, deadline, &region, &error), -ENOENT,
	       "no variable, no metadata service: -ENOENT");
	free(error);

	standin_rules(
		"[{\"path\": \"/latest/meta-data/instance-id\", \"body\": "
		"\"i-0123456789abcdef0\"}, {\"path\": "
		"\"/latest/meta-data/placement/availability-zone\", \"body\": \"us-east-1b\"}, "
		"{\"path\": \"/latest/meta-data/instance-type\", \"body\": \"m5.large\"}]");
	ImdsIdentity id = {};
	is_int(imds_identity(m, deadline, &id, NULL), 0, "instance identity read");
	is_str(id.instance_id, "i-0123456789abcdef0", "...instance ID");
	is_str(id.availability_zone, "us-east-1b", "...zone");
	is_str(id.instance_type, "m5.large", "...type");
	imds_identity_done(&id);
	is_int(standin_count(), 7, "...one token for all the reads");

	/* A token the service no longer takes: one new token, then the read. */
	standin_reset(NULL, NULL);
	standin_rules("[{\"path\": \"/latest/meta-data/instance-type\", \"status\": 401}, "
		      "{\"path\": \"/latest/api/token\", \"method\": \"PUT\", \"body\": \"T2\"}, "
		      "{\"path\": \"/latest/meta-data/instance-type\", \"body\": \"c5.large\"}]");
	char *type = NULL;
	is_int(imds_get(m, "instance-type", deadline, &type, NULL), 0,
	       "token refused (401): a new one, then the read succeeds");
	is_str(type, "c5.large", "...with its answer");
	free(type);
	json_auto_t *j = standin_requests();
	is_str(standin_field(j, 2, "headers.x-aws-ec2-metadata-token"), "T2",
	       "...sent with the new token");
	imds_free(m);

	/* Off EC2: nothing listens. Fails at once, within the deadline. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	char url[64];
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
	m = imds_new(&(ImdsConfig){.endpoint = url});
	usec_t start = now_usec(CLOCK_MONOTONIC);
	error = NULL;
	is_int(imds_region(m, start + 5 * USEC_PER_SEC, &region, &error), -ECONNREFUSED,
	       "no metadata service: -ECONNREFUSED");
	ok(now_usec(CLOCK_MONOTONIC) - start < USEC_PER_SEC, "...within a second");
	ok(error && strstr(error, "instance metadata: "), "...saying where: %s", S(error));
	free(error);
	imds_free(m);
	close(fd);
}

int main(void)
{
	standin_start();
	scratch_init("ec2-credentials");
	_cleanup_free_ char *token = scratch_path("token"), *file = scratch_path("credentials");
	write_text(token, "eyJhbGciOiJSUzI1NiJ9.e30.sig\n");
	write_text(file, "[default]\n  aws_access_key_id =  AKIDFILE  \r\n"
			 "aws_secret_access_key = secret/file+=\n\n; other\n[ other ]\n"
			 "aws_access_key_id=AKIDOTHER\naws_secret_access_key=secret-other\n"
			 "aws_session_token=token-other\n[nokeys]\nregion=us-east-1\n");
	sts_env = xasprintf("AWS_STS_ENDPOINT=%s/", standin.url);
	imds_env = xasprintf("AWS_EC2_METADATA_SERVICE_ENDPOINT=%s", standin.url);
	file_env = xasprintf("AWS_SHARED_CREDENTIALS_FILE=%s", file);
	token_env = xasprintf("AWS_WEB_IDENTITY_TOKEN_FILE=%s", token);

	test_environment();
	test_shared_file();
	test_web_identity();
	test_instance_profile();
	test_chain_order();
	test_refresh();
	test_threads();
	test_no_io_until_used();
	test_region_and_identity();
	free(sts_env);
	free(imds_env);
	free(file_env);
	free(token_env);
	return tap_done();
}
