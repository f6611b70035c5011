/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's snapshot store: its settings, one Store per set of credentials, the IDs of store
 * snapshots, and the collector thread. The uploads are in pool-store-snapshot.c. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "log.h"
#include "pool-internal.h"
#include "pool-store.h"
#include "strbuf.h"
#include "strv.h"

struct StoreCreds {
	char *key; /* "" for the default chain, else the secrets' variables, one a line */
	AwsCredentialsProvider *provider;
	S3Client *s3;
	Store *store;
};

static const char *const secret_keys[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
					  "AWS_SESSION_TOKEN"};

const char *pool_store_id_of(const char *snapshot_id)
{
	size_t n = strlen(POOL_STORE_ID_PREFIX);

	if (!snapshot_id || strncmp(snapshot_id, POOL_STORE_ID_PREFIX, n) != 0 ||
	    !pool_snapshot_id_valid(snapshot_id + n))
		return NULL;
	return snapshot_id + n;
}

usec_t pool_store_deadline(void)
{
	usec_t d = now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC;

	return MIN(d, call_deadline());
}

/* A secret's value goes into a header: printable ASCII, no space. */
static bool secret_value_valid(const char *v)
{
	for (const char *c = v; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			return false;
	return *v != 0;
}

/* The variables of the credentials the secrets give (NULL: none, the default chain). */
static int secrets_env(const Strmap *secrets, char ***ret, char **ret_error)
{
	const char *v[ELEMENTSOF(secret_keys)];
	bool any = false;
	char **env = NULL;

	for (size_t i = 0; i < ELEMENTSOF(secret_keys); i++) {
		v[i] = secrets ? strmap_get(secrets, secret_keys[i]) : NULL;
		any = any || v[i];
	}
	for (size_t i = 0; any && i < ELEMENTSOF(secret_keys); i++) {
		if (!v[i] && i < 2)
			return errorf(ret_error, -EINVAL, "secrets: %s is missing (%s is given)",
				      secret_keys[i], secret_keys[v[0] ? 0 : 1]);
		if (v[i] && !secret_value_valid(v[i]))
			return errorf(ret_error, -EINVAL,
				      "secrets: %s: empty, or not printable ASCII without spaces",
				      secret_keys[i]);
	}
	for (size_t i = 0; any && i < ELEMENTSOF(secret_keys); i++)
		if (v[i])
			strv_append(&env, xasprintf("%s=%s", secret_keys[i], v[i]));
	*ret = env;
	return 0;
}

static void creds_done(StoreCreds *c)
{
	store_free(c->store);
	s3_client_free(c->s3);
	aws_credentials_provider_free(c->provider);
	free(c->key);
}

/* Makes the store of the credentials env gives (NULL: the default chain). No I/O. */
static int creds_make(PoolStore *st, char **env, StoreCreds *ret, char **ret_error)
{
	AwsCredentialsConfig cc = {.environment = env, .region = st->region};
	StoreCreds c = {.provider = aws_credentials_provider_new(&cc)};
	S3Config sc = {
		.endpoint = st->endpoint,
		.bucket = st->bucket,
		.region = st->region,
		.path_style = st->path_style,
		.credentials = c.provider,
	};
	_cleanup_free_ char *err = NULL;

	int r = s3_client_new(&sc, &c.s3, &err);
	if (r < 0) {
		creds_done(&c);
		return errorf(ret_error, r, "--store-bucket/--store-endpoint/--store-region: %s",
			      err);
	}
	StoreConfig config = {.s3 = c.s3,
			      .prefix = st->prefix,
			      .node = st->node_id,
			      .chunk_size = st->chunk_size};
	if ((r = store_new(&config, &c.store, &err)) < 0) {
		creds_done(&c);
		return errorf(ret_error, r, "--store-prefix: %s", err);
	}
	*ret = c;
	return 0;
}

/* The store of env's credentials, made on first use. Hold the lock. */
static int creds_store(PoolStore *st, char **env, Store **ret, char **ret_error)
{
	StrBuf b = {};
	StoreCreds c;

	for (char **e = env; e && *e; e++)
		strbuf_printf(&b, "%s\n", *e);
	_cleanup_free_ char *key = strbuf_steal(&b);

	for (size_t i = 0; i < st->n_creds; i++)
		if (strcmp(st->creds[i].key, key) == 0) {
			*ret = st->creds[i].store;
			return 0;
		}
	int r = creds_make(st, env, &c, ret_error);
	if (r < 0)
		return r;
	c.key = TAKE_PTR(key);
	st->creds = xrealloc(st->creds, (st->n_creds + 1) * sizeof(*st->creds));
	st->creds[st->n_creds++] = c;
	*ret = c.store;
	return 0;
}

int pool_backend_store(PoolBackend *pb, const Strmap *secrets, Store **ret, char **ret_error)
{
	PoolStore *st = pb->store;
	_cleanup_strv_free_ char **env = NULL;

	if (!st)
		return errorf(ret_error, -ENOMEDIUM,
			      "volplugd on node %s has no snapshot store: start it with "
			      "--store-bucket NAME (and --store-endpoint URL, --store-prefix P, "
			      "--store-region R, --store-path-style as the store needs)",
			      pb->node_id);
	int r = secrets_env(secrets, &env, ret_error);
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->lock);
	r = creds_store(st, env, ret, ret_error);
	if (r == 0)
		st->last_used = *ret;
	pthread_mutex_unlock(&st->lock);
	return r;
}

int pool_store_new(const PoolSettings *ps, Pool *pool, const char *node_id, PoolStore **ret,
		   char **ret_error)
{
	pthread_condattr_t ca;
	Store *store;

	*ret = NULL;
	if (!ps->store_bucket)
		return 0;
	PoolStore *st = xnew0(PoolStore, 1);
	st->pool = pool;
	st->node_id = xstrdup(node_id ?: "");
	st->endpoint = ps->store_endpoint ? xstrdup(ps->store_endpoint) : NULL;
	st->bucket = xstrdup(ps->store_bucket);
	st->prefix = xstrdup(ps->store_prefix ?: "");
	st->region = xstrdup(ps->store_region     ?: getenv("AWS_REGION")
				     ?: getenv("AWS_DEFAULT_REGION") ?: "us-east-1");
	st->path_style = ps->store_path_style;
	st->gc_interval = ps->store_gc_interval;
	st->chunk_size = ps->store_chunk_size;
	pthread_mutex_init(&st->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st->cond, &ca);
	pthread_condattr_destroy(&ca);
	int r = creds_store(st, NULL, &store, ret_error);
	if (r < 0) {
		pool_store_free(st);
		return r;
	}
	st->last_used = store;
	*ret = st;
	return 0;
}

void pool_store_wait(PoolStore *st, usec_t until)
{
	struct timespec ts = {.tv_sec = (time_t)(until / USEC_PER_SEC),
			      .tv_nsec = (long)((until % USEC_PER_SEC) * NSEC_PER_USEC)};

	if (!st->stopping)
		(void)pthread_cond_timedwait(&st->cond, &st->lock, &ts);
}

static void collect_once(PoolStore *st, Store *store)
{
	_cleanup_free_ char *err = NULL;
	StoreGcStats stats = {};

	int r = store_gc(store, now_usec(CLOCK_MONOTONIC) + 30 * 60 * USEC_PER_SEC, &stats, &err);
	if (r == -EBUSY)
		log_info("snapshot store s3://%s: collection put off: %s", st->bucket, err);
	else if (r < 0)
		log_warning("snapshot store s3://%s: collection failed: %s", st->bucket, err);
	else
		log_info("snapshot store s3://%s: collected %llu chunks of %llu (%llu too young), "
			 "%llu stale intents, %llu stale markers, %llu manifests",
			 st->bucket, (unsigned long long)stats.chunks_deleted,
			 (unsigned long long)stats.chunks, (unsigned long long)stats.chunks_young,
			 (unsigned long long)stats.stale_intents,
			 (unsigned long long)stats.stale_markers,
			 (unsigned long long)stats.manifests);
}

static void *collector(void *userdata)
{
	PoolStore *st = userdata;

	pthread_mutex_lock(&st->lock);
	for (;;) {
		usec_t until = now_usec(CLOCK_MONOTONIC) + st->gc_interval;
		while (!st->stopping && now_usec(CLOCK_MONOTONIC) < until)
			pool_store_wait(st, until);
		if (st->stopping)
			break;
		Store *store = st->last_used;
		pthread_mutex_unlock(&st->lock);
		collect_once(st, store);
		pthread_mutex_lock(&st->lock);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* Queues the uploads whose local copies are in the pool: this node's unfinished ones (their
 * copy goes only once the manifest is in the store). Needs no credentials to find them. */
static void resume(PoolStore *st)
{
	_cleanup_strv_free_ char **ids = NULL;
	size_t n = 0;

	if (pool_snapshot_list(st->pool, &ids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if (pool_snapshot_load(st->pool, ids[i], &s) < 0 || !pool_store_record(s) ||
		    pool_store_record_kept(s)) /* uploaded: kept as a base */
			continue;
		log_info("snapshot %s%s: resuming its upload to s3://%s", POOL_STORE_ID_PREFIX,
			 ids[i], st->bucket);
		pool_store_enqueue(st, ids[i], st->creds[0].store);
	}
}

void pool_store_start(PoolStore *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < POOL_STORE_UPLOADS; i++)
		if (pthread_create(&st->threads[st->n_threads], NULL, pool_store_uploader, st) == 0)
			st->n_threads++;
	if (st->gc_interval &&
	    pthread_create(&st->threads[st->n_threads], NULL, collector, st) == 0)
		st->n_threads++;
	resume(st);
}

char *pool_store_describe(const PoolStore *st)
{
	return xasprintf("s3://%s/%s at %s (region %s)", st->bucket, st->prefix,
			 st->endpoint ?: "AWS S3", st->region);
}

void pool_store_free(PoolStore *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->lock);
	st->stopping = true;
	for (UploadJob *j = st->jobs; j; j = j->next)
		atomic_store(&j->cancel, true); /* resumed at the next start */
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	for (unsigned i = 0; i < st->n_threads; i++)
		pthread_join(st->threads[i], NULL);
	while (st->jobs) {
		UploadJob *j = st->jobs;
		st->jobs = j->next;
		free(j->message);
		free(j);
	}
	for (size_t i = 0; i < st->n_creds; i++)
		creds_done(&st->creds[i]);
	free(st->creds);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st->node_id);
	free(st->endpoint);
	free(st->bucket);
	free(st->prefix);
	free(st->region);
	free(st);
}
