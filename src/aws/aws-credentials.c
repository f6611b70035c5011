/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <string.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "aws-request.h"
#include "aws-xml.h"
#include "fileio.h"
#include "log.h"
#include "random-util.h"
#include "strbuf.h"
#include "strmap.h"

#define REFRESH_BEFORE_DEFAULT (5 * 60 * USEC_PER_SEC)
#define RETRY_AFTER_FAILED_REFRESH (10 * USEC_PER_SEC)
#define STS_API_VERSION "2011-06-15"
#define FILE_MAX ((size_t)1 << 20)

extern char **environ;

struct AwsCredentialsProvider {
	/* Settings, read once at creation; not changed after. */
	char *env_key, *env_secret, *env_token;
	char *shared_file; /* NULL: no home directory to find it in */
	char *profile;
	bool profile_explicit;
	char *token_file, *role_arn, *session_name;
	char *sts_url;	    /* with token_file; NULL: not an http(s) URL */
	HttpPool *sts_pool; /* with token_file */
	Imds *imds;	    /* NULL: instance metadata disabled */
	usec_t refresh_before;

	pthread_mutex_t lock;	/* guards the fields below */
	pthread_cond_t done;	/* a fetch ended; on CLOCK_MONOTONIC */
	AwsCredentials current; /* access_key_id NULL: none */
	bool fetching;
	usec_t retry_after; /* CLOCK_MONOTONIC: no refresh before, after one failed */
	unsigned fetches;
};

/* The value of name in env, NULL when unset or empty (as the SDKs treat it). */
static const char *env_get(char *const *env, const char *name)
{
	size_t len = strlen(name);

	for (char *const *e = env; e && *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return (*e)[len + 1] ? *e + len + 1 : NULL;
	return NULL;
}

static char *env_dup(char *const *env, const char *name)
{
	const char *v = env_get(env, name);
	return v ? xstrdup(v) : NULL;
}

static char *home_dir(char *const *env)
{
	const char *home = env_get(env, "HOME");
	struct passwd pw, *found = NULL;
	char buf[4096];

	if (home)
		return xstrdup(home);
	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &found) == 0 && found && pw.pw_dir)
		return xstrdup(pw.pw_dir);
	return NULL;
}

static char *sts_endpoint(const AwsCredentialsConfig *config, char *const *env, const char *region)
{
	const char *e =
		config->sts_endpoint ? config->sts_endpoint : env_get(env, "AWS_STS_ENDPOINT");
	if (e)
		return xstrdup(e);
	/* Regional, as the SDKs now default to; the global endpoint lives in us-east-1. */
	return region ? xasprintf("https://sts.%s.amazonaws.com/", region)
		      : xstrdup("https://sts.amazonaws.com/");
}

static void setup_web_identity(AwsCredentialsProvider *p, const AwsCredentialsConfig *config,
			       char *const *env)
{
	const char *region = config->region ? config->region : env_get(env, "AWS_REGION");
	if (!region)
		region = env_get(env, "AWS_DEFAULT_REGION");
	_cleanup_free_ char *endpoint = sts_endpoint(config, env, region);

	p->token_file = env_dup(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
	p->role_arn = env_dup(env, "AWS_ROLE_ARN");
	p->session_name = env_dup(env, "AWS_ROLE_SESSION_NAME");
	if (!p->session_name)
		p->session_name = xasprintf("volplug-%016" PRIx64, random_u64());
	if (!p->token_file)
		return;
	/* A bad AWS_STS_ENDPOINT is said when used. */
	if (strncmp(endpoint, "https://", 8) == 0 || strncmp(endpoint, "http://", 7) == 0)
		p->sts_url = xstrdup(endpoint);
	p->sts_pool = http_pool_new(1);
}

AwsCredentialsProvider *aws_credentials_provider_new(const AwsCredentialsConfig *config)
{
	AwsCredentialsProvider *p = xnew0(AwsCredentialsProvider, 1);
	char *const *env = config->environment ? config->environment : environ;
	pthread_condattr_t attr;

	p->env_key = env_dup(env, "AWS_ACCESS_KEY_ID");
	p->env_secret = env_dup(env, "AWS_SECRET_ACCESS_KEY");
	p->env_token = env_dup(env, "AWS_SESSION_TOKEN");
	p->shared_file = env_dup(env, "AWS_SHARED_CREDENTIALS_FILE");
	if (!p->shared_file) {
		_cleanup_free_ char *home = home_dir(env);
		p->shared_file = home ? xasprintf("%s/.aws/credentials", home) : NULL;
	}
	p->profile = env_dup(env, "AWS_PROFILE");
	p->profile_explicit = p->profile;
	if (!p->profile)
		p->profile = xstrdup("default");
	setup_web_identity(p, config, env);
	const char *disabled = env_get(env, "AWS_EC2_METADATA_DISABLED");
	if (!disabled || strcasecmp(disabled, "true") != 0) {
		ImdsConfig ic = {
			.endpoint = config->imds_endpoint
					    ? config->imds_endpoint
					    : env_get(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT"),
			.attempt_timeout = config->imds_attempt_timeout,
		};
		p->imds = imds_new(&ic);
	}
	p->refresh_before =
		config->refresh_before ? config->refresh_before : REFRESH_BEFORE_DEFAULT;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->done, &attr);
	pthread_condattr_destroy(&attr);
	return p;
}

void aws_credentials_done(AwsCredentials *c)
{
	free(c->access_key_id);
	free(c->secret_access_key);
	free(c->session_token);
	*c = (AwsCredentials){};
}

void aws_credentials_provider_free(AwsCredentialsProvider *p)
{
	if (!p)
		return;
	aws_credentials_done(&p->current);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->lock);
	http_pool_free(p->sts_pool);
	free(p->sts_url);
	imds_free(p->imds);
	free(p->env_key);
	free(p->env_secret);
	free(p->env_token);
	free(p->shared_file);
	free(p->profile);
	free(p->token_file);
	free(p->role_arn);
	free(p->session_name);
	free(p);
}

static void credentials_copy(AwsCredentials *dst, const AwsCredentials *src)
{
	*dst = (AwsCredentials){
		.access_key_id = xstrdup(src->access_key_id),
		.secret_access_key = xstrdup(src->secret_access_key),
		.session_token = src->session_token ? xstrdup(src->session_token) : NULL,
		.expiration = src->expiration,
		.source = src->source,
	};
}

static void credentials_set(AwsCredentials *c, const char *source, const char *key,
			    const char *secret, const char *token, usec_t expiration)
{
	*c = (AwsCredentials){
		.access_key_id = xstrdup(key),
		.secret_access_key = xstrdup(secret),
		.session_token = token && *token ? xstrdup(token) : NULL,
		.expiration = expiration,
		.source = source,
	};
}

/* ---- time ---- */

int aws_parse_time(const char *s, usec_t *ret)
{
	struct tm tm = {};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	usec_t frac = 0, scale = USEC_PER_SEC;

	if (!rest)
		return -EINVAL;
	if (*rest == '.') {
		for (rest++; isdigit((unsigned char)*rest); rest++)
			if (scale > 1) {
				scale /= 10;
				frac += (usec_t)(*rest - '0') * scale;
			}
	}
	if (strcmp(rest, "Z") != 0 && strcmp(rest, "+00:00") != 0)
		return -EINVAL;
	time_t t = timegm(&tm);
	if (t < 0)
		return -EINVAL;
	*ret = (usec_t)t * USEC_PER_SEC + frac;
	return 0;
}

/* ---- the sources: each returns 0 (found), 1 (not configured: *ret_note says so) or a
 * negative errno (configured, but broken: *ret_error says why) ---- */

static int from_environment(AwsCredentialsProvider *p, AwsCredentials *ret, char **ret_note,
			    char **ret_error)
{
	if (!p->env_key && !p->env_secret) {
		*ret_note = xstrdup("AWS_ACCESS_KEY_ID not set");
		return 1;
	}
	if (!p->env_key || !p->env_secret) {
		*ret_error = xasprintf("environment: %s is set but %s is not",
				       p->env_key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
				       p->env_key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
		return -EINVAL;
	}
	credentials_set(ret, "environment", p->env_key, p->env_secret, p->env_token, 0);
	return 0;
}

static int sts_credentials(const XmlNode *creds, AwsCredentials *ret, char **ret_error)
{
	const char *key = xml_text(creds, "AccessKeyId"),
		   *secret = xml_text(creds, "SecretAccessKey");
	const char *token = xml_text(creds, "SessionToken"),
		   *expiration = xml_text(creds, "Expiration");
	usec_t until;

	if (!key || !*key || !secret || !*secret || !expiration ||
	    aws_parse_time(expiration, &until) < 0) {
		*ret_error = xstrdup("web identity: STS reply without complete credentials");
		return -EPROTO;
	}
	credentials_set(ret, "web-identity", key, secret, token, until);
	return 0;
}

/* STS's answer to a refused AssumeRoleWithWebIdentity, as an errno. */
static int sts_code_to_errno(const char *code, int http_status)
{
	static const char *const refused[] = {"InvalidIdentityToken", "ExpiredTokenException",
					      "IDPRejectedClaim",     "InvalidClientTokenId",
					      "ExpiredToken",	      "SignatureDoesNotMatch"};

	for (size_t i = 0; code && i < ELEMENTSOF(refused); i++)
		if (strcmp(code, refused[i]) == 0)
			return -EACCES;
	if (code && strcmp(code, "AccessDenied") == 0)
		return -EPERM;
	if (http_status == 401 || http_status == 403)
		return -EACCES;
	if (http_status == 400)
		return -EINVAL;
	if (http_status == 404)
		return -ENOENT;
	return -EPROTO;
}

/* STS AssumeRoleWithWebIdentity, unsigned (the token is the proof); the Credentials element
 * of its reply in *ret_reply. */
static int sts_assume_role(AwsCredentialsProvider *p, const char *token, usec_t deadline,
			   XmlNode **ret_reply, AwsError *ret_error)
{
	_cleanup_free_ char *body = NULL, *msg = NULL;
	const char *headers[] = {"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
				 NULL};
	StrBuf b = {};
	HttpReply reply = {};
	int r;

	http_form_add(&b, "Action", "AssumeRoleWithWebIdentity");
	http_form_add(&b, "Version", STS_API_VERSION);
	http_form_add(&b, "RoleArn", p->role_arn);
	http_form_add(&b, "RoleSessionName", p->session_name);
	http_form_add(&b, "WebIdentityToken", token);
	body = strbuf_steal(&b);
	HttpRequest req = {.method = "POST",
			   .url = p->sts_url,
			   .headers = headers,
			   .body = body,
			   .body_len = strlen(body)};
	r = aws_request(p->sts_pool, NULL, &(AwsRetry){.max_retries = 3}, &req, deadline, &reply,
			NULL, ret_error);
	if (r < 0)
		return r;
	if (reply.status != 200) {
		aws_error_from_reply((int)reply.status, reply.body, reply.body_len, ret_error);
		http_reply_done(&reply);
		return sts_code_to_errno(ret_error->code, ret_error->http_status);
	}
	r = xml_parse(reply.body, reply.body_len, ret_reply, &msg);
	http_reply_done(&reply);
	if (r < 0) {
		*ret_error = (AwsError){.message = xasprintf("unreadable reply: %s", msg)};
		return -EPROTO;
	}
	return 0;
}

static int from_web_identity(AwsCredentialsProvider *p, usec_t deadline, AwsCredentials *ret,
			     char **ret_note, char **ret_error)
{
	_cleanup_free_ char *token = NULL;
	_cleanup_xml_free_ XmlNode *reply = NULL;
	AwsError err = {};
	int r;

	if (!p->token_file) {
		*ret_note = xstrdup("AWS_WEB_IDENTITY_TOKEN_FILE not set");
		return 1;
	}
	if (!p->role_arn) {
		*ret_error = xstrdup("web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set but "
				     "AWS_ROLE_ARN is not");
		return -EINVAL;
	}
	if (!p->sts_url) {
		*ret_error = xstrdup("web identity: the STS endpoint is not an http(s) URL");
		return -EINVAL;
	}
	/* Read each time: the kubelet rotates the token in place. */
	r = read_file(p->token_file, FILE_MAX, &token, NULL);
	if (r < 0) {
		*ret_error =
			xasprintf("web identity: token file %s: %s", p->token_file, strerror(-r));
		return r;
	}
	for (size_t n = strlen(token); n > 0 && isspace((unsigned char)token[n - 1]); n--)
		token[n - 1] = 0;
	r = sts_assume_role(p, token, deadline, &reply, &err);
	if (r < 0) {
		*ret_error = xasprintf("web identity: STS AssumeRoleWithWebIdentity for %s: %s",
				       p->role_arn, err.message);
		aws_error_done(&err);
		return r;
	}
	return sts_credentials(xml_find(reply, "AssumeRoleWithWebIdentityResult/Credentials"), ret,
			       ret_error);
}

/* The key = value lines of section [name] of an ini text, in *ret. Returns 0, or -ENOENT when
 * the text has no such section. */
static int ini_section(char *text, const char *name, Strmap *ret)
{
	bool inside = false, found = false;

	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		while (isspace((unsigned char)*line))
			line++;
		size_t len = strlen(line);
		while (len > 0 && isspace((unsigned char)line[len - 1]))
			line[--len] = 0;
		if (len == 0 || *line == '#' || *line == ';')
			continue;
		if (*line == '[') {
			char *end = strchr(line, ']');
			if (!end)
				continue;
			*end = 0;
			char *section = line + 1;
			while (isspace((unsigned char)*section))
				section++;
			for (char *e = section + strlen(section);
			     e > section && isspace((unsigned char)e[-1]); e--)
				e[-1] = 0;
			inside = strcmp(section, name) == 0;
			found |= inside;
			continue;
		}
		char *eq = strchr(line, '=');
		if (!inside || !eq)
			continue;
		char *value = eq + 1;
		while (isspace((unsigned char)*value))
			value++;
		while (eq > line && isspace((unsigned char)eq[-1]))
			eq--;
		*eq = 0;
		strmap_set(ret, line, value);
	}
	return found ? 0 : -ENOENT;
}

static int from_shared_file(AwsCredentialsProvider *p, AwsCredentials *ret, char **ret_note,
			    char **ret_error)
{
	_cleanup_free_ char *text = NULL;
	Strmap kv = {};
	int r;

	if (!p->shared_file) {
		*ret_note = xstrdup("no home directory for ~/.aws/credentials");
		return 1;
	}
	r = read_file(p->shared_file, FILE_MAX, &text, NULL);
	if (r == -ENOENT && !p->profile_explicit) {
		*ret_note = xasprintf("%s: not found", p->shared_file);
		return 1;
	}
	if (r < 0) {
		*ret_error =
			xasprintf("shared credentials file %s: %s", p->shared_file, strerror(-r));
		return r;
	}
	r = ini_section(text, p->profile, &kv);
	const char *key = strmap_get(&kv, "aws_access_key_id");
	const char *secret = strmap_get(&kv, "aws_secret_access_key");
	if (!p->profile_explicit && (r < 0 || (!key && !secret))) {
		*ret_note = xasprintf("%s: no keys in profile %s", p->shared_file, p->profile);
		strmap_done(&kv);
		return 1;
	}
	if (r < 0 || !key || !*key || !secret || !*secret) {
		*ret_error = xasprintf("shared credentials file %s: profile %s %s", p->shared_file,
				       p->profile,
				       r < 0 ? "not found"
					     : "lacks aws_access_key_id or "
					       "aws_secret_access_key");
		strmap_done(&kv);
		return r < 0 ? r : -EINVAL;
	}
	credentials_set(ret, "shared-file", key, secret, strmap_get(&kv, "aws_session_token"), 0);
	strmap_done(&kv);
	return 0;
}

static int imds_credentials(const char *text, AwsCredentials *ret, char **ret_error)
{
	json_auto_t *j = json_loads(text, 0, NULL);
	const char *code = json_string_value(json_object_get(j, "Code"));
	const char *key = json_string_value(json_object_get(j, "AccessKeyId"));
	const char *secret = json_string_value(json_object_get(j, "SecretAccessKey"));
	const char *token = json_string_value(json_object_get(j, "Token"));
	const char *expiration = json_string_value(json_object_get(j, "Expiration"));
	usec_t until;

	if (code && strcmp(code, "Success") != 0) {
		*ret_error = xasprintf("instance profile: the metadata service says %s", code);
		return -EACCES;
	}
	if (!key || !*key || !secret || !*secret || !expiration ||
	    aws_parse_time(expiration, &until) < 0) {
		*ret_error = xstrdup("instance profile: credentials incomplete");
		return -EPROTO;
	}
	credentials_set(ret, "instance-profile", key, secret, token, until);
	return 0;
}

static int from_instance_profile(AwsCredentialsProvider *p, usec_t deadline, AwsCredentials *ret,
				 char **ret_note, char **ret_error)
{
	_cleanup_free_ char *roles = NULL, *path = NULL, *text = NULL, *msg = NULL;
	int r;

	if (!p->imds) {
		*ret_note = xstrdup("instance metadata disabled");
		return 1;
	}
	r = imds_get(p->imds, "iam/security-credentials/", deadline, &roles, &msg);
	if (r == -ENOENT) {
		*ret_note = xstrdup("instance metadata: no instance profile");
		return 1;
	}
	if (r < 0) {
		/* Off EC2 nothing answers: the usual end of a chain with nothing configured. */
		*ret_note = TAKE_PTR(msg);
		return 1;
	}
	roles[strcspn(roles, "\n")] = 0;
	path = xasprintf("iam/security-credentials/%s", roles);
	r = imds_get(p->imds, path, deadline, &text, &msg);
	if (r < 0) {
		*ret_error = xasprintf("instance profile %s: %s", roles, msg);
		return r;
	}
	return imds_credentials(text, ret, ret_error);
}

/* Walks the chain: 0 and *ret from the first source configured, or its error. */
static int fetch(AwsCredentialsProvider *p, usec_t deadline, AwsCredentials *ret, char **ret_error)
{
	char *notes[4] = {};
	int r;

	r = from_environment(p, ret, &notes[0], ret_error);
	if (r == 1)
		r = from_web_identity(p, deadline, ret, &notes[1], ret_error);
	if (r == 1)
		r = from_shared_file(p, ret, &notes[2], ret_error);
	if (r == 1)
		r = from_instance_profile(p, deadline, ret, &notes[3], ret_error);
	if (r == 1) {
		*ret_error = xasprintf("no credentials: %s; %s; %s; %s", notes[0], notes[1],
				       notes[2], notes[3]);
		r = -ENOKEY;
	}
	for (size_t i = 0; i < ELEMENTSOF(notes); i++)
		free(notes[i]);
	if (r == 0)
		log_debug("credentials: %s, key %s", ret->source, ret->access_key_id);
	return r;
}

/* ---- the cache ---- */

static bool is_valid(const AwsCredentials *c, usec_t now_rt)
{
	return c->access_key_id && (c->expiration == 0 || now_rt < c->expiration);
}

static bool is_fresh(const AwsCredentialsProvider *p, usec_t now_rt)
{
	const AwsCredentials *c = &p->current;
	return c->access_key_id &&
	       (c->expiration == 0 || now_rt + p->refresh_before < c->expiration);
}

/* Waits for the running fetch to end; -ETIMEDOUT when the deadline comes first. */
static int wait_fetch(AwsCredentialsProvider *p, usec_t deadline)
{
	struct timespec ts = {.tv_sec = (time_t)(deadline / USEC_PER_SEC),
			      .tv_nsec = (long)(deadline % USEC_PER_SEC * NSEC_PER_USEC)};

	if (deadline == USEC_INFINITY)
		return -pthread_cond_wait(&p->done, &p->lock);
	int r = pthread_cond_timedwait(&p->done, &p->lock, &ts);
	return r == ETIMEDOUT ? -ETIMEDOUT : 0;
}

int aws_credentials_get(AwsCredentialsProvider *p, usec_t deadline, AwsCredentials *ret,
			char **ret_error)
{
	int r;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		usec_t now_rt = now_usec(CLOCK_REALTIME), now = now_usec(CLOCK_MONOTONIC);
		bool valid = is_valid(&p->current, now_rt);
		if (is_fresh(p, now_rt) || (valid && (p->fetching || now < p->retry_after))) {
			credentials_copy(ret, &p->current);
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
		if (!p->fetching)
			break;
		r = wait_fetch(p, deadline);
		if (r < 0) {
			pthread_mutex_unlock(&p->lock);
			if (ret_error)
				*ret_error = xstrdup("waiting for credentials: deadline reached");
			return r;
		}
	}
	p->fetching = true;
	p->fetches++;
	pthread_mutex_unlock(&p->lock);

	AwsCredentials fresh = {};
	char *error = NULL;
	r = fetch(p, deadline, &fresh, &error);

	pthread_mutex_lock(&p->lock);
	p->fetching = false;
	pthread_cond_broadcast(&p->done);
	if (r == 0) {
		aws_credentials_done(&p->current);
		p->current = fresh;
		p->retry_after = 0;
	} else if (is_valid(&p->current, now_usec(CLOCK_REALTIME))) {
		/* Still good for a while: keep them, and do not ask again at every call. */
		log_debug("credentials: refresh failed, keeping the current ones: %s", error);
		p->retry_after = now_usec(CLOCK_MONOTONIC) + RETRY_AFTER_FAILED_REFRESH;
		r = 0;
	}
	if (r == 0) {
		credentials_copy(ret, &p->current);
		free(error);
	} else if (ret_error)
		*ret_error = error;
	else
		free(error);
	pthread_mutex_unlock(&p->lock);
	return r;
}

void aws_credentials_invalidate(AwsCredentialsProvider *p)
{
	pthread_mutex_lock(&p->lock);
	if (!p->fetching)
		aws_credentials_done(&p->current);
	p->retry_after = 0;
	pthread_mutex_unlock(&p->lock);
}

unsigned aws_credentials_fetches(AwsCredentialsProvider *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->fetches;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* ---- region ---- */

int aws_region_discover(char *const *environment, Imds *imds, usec_t deadline, char **ret,
			char **ret_error)
{
	char *const *env = environment ? environment : environ;
	const char *region = env_get(env, "AWS_REGION");

	if (!region)
		region = env_get(env, "AWS_DEFAULT_REGION");
	if (region) {
		*ret = xstrdup(region);
		return 0;
	}
	if (!imds) {
		if (ret_error)
			*ret_error =
				xstrdup("no region: AWS_REGION not set and no instance metadata");
		return -ENOENT;
	}
	return imds_region(imds, deadline, ret, ret_error);
}
