/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "aws-http.h"
#include "imds.h"
#include "log.h"

#define IMDS_ATTEMPT_TIMEOUT_DEFAULT USEC_PER_SEC
#define IMDS_TOKEN_TTL_DEFAULT 21600
#define IMDS_ATTEMPTS 3
#define IMDS_RETRY_DELAY (100 * USEC_PER_MSEC)
#define IMDS_MAX_REPLY ((size_t)64 << 10)

struct Imds {
	char *endpoint;
	usec_t attempt_timeout;
	unsigned token_ttl;
	HttpPool *pool;
	pthread_mutex_t lock; /* guards token and token_until */
	char *token;
	usec_t token_until; /* CLOCK_MONOTONIC */
};

Imds *imds_new(const ImdsConfig *config)
{
	Imds *m = xnew0(Imds, 1);
	const char *endpoint = config->endpoint ? config->endpoint : IMDS_ENDPOINT_DEFAULT;
	size_t len = strlen(endpoint);

	while (len > 0 && endpoint[len - 1] == '/')
		len--;
	m->endpoint = xstrndup(endpoint, len);
	m->attempt_timeout =
		config->attempt_timeout ? config->attempt_timeout : IMDS_ATTEMPT_TIMEOUT_DEFAULT;
	m->token_ttl = config->token_ttl && config->token_ttl <= IMDS_TOKEN_TTL_DEFAULT
			       ? config->token_ttl
			       : IMDS_TOKEN_TTL_DEFAULT;
	m->pool = http_pool_new(2);
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

void imds_free(Imds *m)
{
	if (!m)
		return;
	http_pool_free(m->pool);
	pthread_mutex_destroy(&m->lock);
	free(m->endpoint);
	free(m->token);
	free(m);
}

const char *imds_endpoint(const Imds *m)
{
	return m->endpoint;
}

static int status_to_errno(long status)
{
	if (status == 404)
		return -ENOENT;
	if (status == 401 || status == 403)
		return -EACCES;
	if (status >= 500)
		return -EAGAIN;
	return -EPROTO;
}

static void strip_trailing_space(char *s)
{
	size_t len = strlen(s);
	while (len > 0 && isspace((unsigned char)s[len - 1]))
		s[--len] = 0;
}

/* One request, tried again after a transport failure or a 5xx. Returns 0 with the body of a
 * 200 reply, or a negative errno; *ret_status gets the last status seen (0: none). */
static int exchange(Imds *m, const char *method, const char *url, const char *header,
		    usec_t deadline, char **ret, long *ret_status, char **ret_error)
{
	const char *headers[] = {header, NULL};
	HttpRequest req = {
		.method = method,
		.url = url,
		.headers = headers,
		.deadline = deadline,
		.attempt_timeout = m->attempt_timeout,
		.no_proxy = true,
		.max_reply = IMDS_MAX_REPLY,
	};
	int r = -EIO;

	*ret_status = 0;
	for (unsigned attempt = 0; attempt < IMDS_ATTEMPTS; attempt++) {
		HttpReply reply = {};
		_cleanup_free_ char *msg = NULL;

		if (attempt > 0) {
			usec_t now = now_usec(CLOCK_MONOTONIC);
			if (deadline != USEC_INFINITY && now + IMDS_RETRY_DELAY >= deadline)
				break;
			usleep(IMDS_RETRY_DELAY);
		}
		r = http_perform(m->pool, &req, &reply, &msg);
		if (r < 0) {
			if (ret_error) {
				free(*ret_error);
				*ret_error = xasprintf("instance metadata: %s", msg);
			}
			if (!http_error_transient(r))
				return r;
			continue;
		}
		*ret_status = reply.status;
		if (reply.status == 200) {
			strip_trailing_space(reply.body);
			*ret = TAKE_PTR(reply.body);
			http_reply_done(&reply);
			return 0;
		}
		r = status_to_errno(reply.status);
		if (ret_error) {
			free(*ret_error);
			*ret_error = xasprintf("instance metadata: %s %s: HTTP %ld", method, url,
					       reply.status);
		}
		http_reply_done(&reply);
		if (r != -EAGAIN)
			return r;
	}
	return r;
}

/* A token valid for a while yet, cached or new. */
static int get_token(Imds *m, usec_t deadline, char **ret, char **ret_error)
{
	_cleanup_free_ char *url = xasprintf("%s/latest/api/token", m->endpoint);
	_cleanup_free_ char *header =
		xasprintf("X-aws-ec2-metadata-token-ttl-seconds: %u", m->token_ttl);
	usec_t now = now_usec(CLOCK_MONOTONIC);
	char *token = NULL;
	long status;
	int r;

	pthread_mutex_lock(&m->lock);
	if (m->token && now < m->token_until)
		token = xstrdup(m->token);
	pthread_mutex_unlock(&m->lock);
	if (token) {
		*ret = token;
		return 0;
	}
	r = exchange(m, "PUT", url, header, deadline, &token, &status, ret_error);
	if (r < 0)
		return r;
	pthread_mutex_lock(&m->lock);
	free(m->token);
	m->token = xstrdup(token);
	/* A minute early, so a token never expires between our check and the service's. */
	m->token_until = now + (usec_t)(m->token_ttl > 120 ? m->token_ttl - 60 : m->token_ttl / 2) *
				       USEC_PER_SEC;
	pthread_mutex_unlock(&m->lock);
	*ret = token;
	return 0;
}

static void drop_token(Imds *m, const char *token)
{
	pthread_mutex_lock(&m->lock);
	if (m->token && strcmp(m->token, token) == 0) {
		free(m->token);
		m->token = NULL;
	}
	pthread_mutex_unlock(&m->lock);
}

int imds_get(Imds *m, const char *path, usec_t deadline, char **ret, char **ret_error)
{
	_cleanup_free_ char *url = xasprintf("%s/latest/meta-data/%s", m->endpoint, path);
	char *error = NULL;
	int r = -EIO;

	for (unsigned round = 0; round < 2; round++) {
		_cleanup_free_ char *token = NULL, *header = NULL;
		long status;

		free(error);
		error = NULL;
		r = get_token(m, deadline, &token, &error);
		if (r < 0)
			break;
		header = xasprintf("X-aws-ec2-metadata-token: %s", token);
		r = exchange(m, "GET", url, header, deadline, ret, &status, &error);
		if (status != 401)
			break;
		drop_token(m, token); /* expired or revoked: once more with a new one */
	}
	if (r < 0) {
		log_debug("%s", error);
		if (ret_error)
			*ret_error = error;
		else
			free(error);
		return r;
	}
	free(error);
	return 0;
}

void imds_identity_done(ImdsIdentity *id)
{
	free(id->instance_id);
	free(id->availability_zone);
	free(id->instance_type);
	*id = (ImdsIdentity){};
}

int imds_identity(Imds *m, usec_t deadline, ImdsIdentity *ret, char **ret_error)
{
	ImdsIdentity id = {};
	int r;

	r = imds_get(m, "instance-id", deadline, &id.instance_id, ret_error);
	if (r == 0)
		r = imds_get(m, "placement/availability-zone", deadline, &id.availability_zone,
			     ret_error);
	if (r == 0)
		r = imds_get(m, "instance-type", deadline, &id.instance_type, ret_error);
	if (r < 0) {
		imds_identity_done(&id);
		return r;
	}
	*ret = id;
	return 0;
}

char *imds_zone_to_region(const char *zone)
{
	size_t len = strlen(zone);

	if (len < 2 || !islower((unsigned char)zone[len - 1]) ||
	    !isdigit((unsigned char)zone[len - 2]))
		return NULL;
	return xstrndup(zone, len - 1);
}

int imds_region(Imds *m, usec_t deadline, char **ret, char **ret_error)
{
	_cleanup_free_ char *zone = NULL, *error = NULL;
	int r;

	/* Older instance metadata lacks placement/region. */
	r = imds_get(m, "placement/region", deadline, ret, &error);
	if (r != -ENOENT) {
		if (r < 0 && ret_error)
			*ret_error = TAKE_PTR(error);
		return r;
	}
	r = imds_get(m, "placement/availability-zone", deadline, &zone, ret_error);
	if (r < 0)
		return r;
	char *region = imds_zone_to_region(zone);
	if (!region) {
		if (ret_error)
			*ret_error = xasprintf("instance metadata: availability zone '%s' names "
					       "no region",
					       zone);
		return -EPROTO;
	}
	*ret = region;
	return 0;
}
