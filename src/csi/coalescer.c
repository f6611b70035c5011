/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "coalescer.h"
#include "log.h"
#include "metrics.h"

METRIC_DEFINE(changes, METRIC_COUNTER, "volplug_csi_coalesced_changes_total",
	      "Backend changes made from merged ControllerExpandVolume and ControllerModifyVolume "
	      "requests");
METRIC_DEFINE(merged, METRIC_COUNTER, "volplug_csi_coalesced_requests_total",
	      "Expand and modify requests that joined a change another request opened");
METRIC_DEFINE(
	coalesce_conflicts, METRIC_COUNTER, "volplug_csi_coalesce_conflicts_total",
	"Expand and modify requests answered ABORTED: they conflicted with one already merged");

#define TAG_PREFIX "tagSpecification_"

/* One merged parameter. */
typedef struct Entry {
	char *ident; /* what conflicts are found by: the lower-cased key, or "tag:" + tag key */
	char *key;   /* as the first caller spelled it */
	char *value;
	bool tag;
} Entry;

typedef struct Batch {
	uint64_t new_size;
	Entry *entries;
	size_t n_entries;
	size_t n_callers;
	size_t refs;	 /* callers that have not read the result yet */
	usec_t close_at; /* CLOCK_MONOTONIC: the window ends, or a caller's deadline nears */
	bool done;
	int result;
	CoalescedResult outcome; /* when result is 0 */
	char *error;
} Batch;

typedef struct Volume {
	struct Volume *next;
	char *id;
	Batch *open;   /* taking requests until its window ends, or NULL */
	bool applying; /* a batch of this volume is in apply() */
	size_t users;  /* callers inside coalescer_submit() for this volume */
} Volume;

struct Coalescer {
	usec_t window;
	CoalescerApply apply;
	void *userdata;

	pthread_mutex_t lock;
	pthread_cond_t changed; /* a batch finished, or a volume stopped applying */
	pthread_cond_t closing; /* CLOCK_MONOTONIC; a batch's close_at came nearer */
	/* Guarded by lock: volumes with a request in progress. Only volumes modified within the
	 * last window or so are here, a handful, so a list is enough. */
	Volume *volumes;
};

Coalescer *coalescer_new(const CoalescerConfig *config)
{
	Coalescer *c = xnew0(Coalescer, 1);

	c->window = config->window ? config->window : COALESCER_WINDOW_DEFAULT;
	c->apply = config->apply;
	c->userdata = config->userdata;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->changed, NULL);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->closing, &attr);
	pthread_condattr_destroy(&attr);
	return c;
}

void coalescer_free(Coalescer *c)
{
	if (!c)
		return;
	/* No request in progress means no volume and no batch left. */
	pthread_cond_destroy(&c->changed);
	pthread_cond_destroy(&c->closing);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void batch_free(Batch *b)
{
	for (size_t i = 0; i < b->n_entries; i++) {
		free(b->entries[i].ident);
		free(b->entries[i].key);
		free(b->entries[i].value);
	}
	free(b->entries);
	free(b->error);
	free(b);
}

static bool streq_ptr(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool is_tag_key(const char *key)
{
	return strncasecmp(key, TAG_PREFIX, strlen(TAG_PREFIX)) == 0;
}

/* A tag "k=v": its key part ("k") and value part ("v"); no '=' means all key. */
static char *tag_key(const char *value)
{
	const char *eq = strchr(value, '=');
	return eq ? xstrndup(value, (size_t)(eq - value)) : xstrdup(value);
}

static const char *tag_value(const char *value)
{
	const char *eq = strchr(value, '=');
	return eq ? eq + 1 : "";
}

static char *ident_of(const ParamKV *p)
{
	if (is_tag_key(p->key)) {
		_cleanup_free_ char *k = tag_key(p->value);
		return xasprintf("tag:%s", k);
	}
	char *s = xstrdup(p->key);
	for (char *q = s; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return s;
}

static int conflict(const ParamKV *p, const char *theirs, char **ret_error)
{
	if (ret_error && !*ret_error) {
		if (is_tag_key(p->key)) {
			_cleanup_free_ char *k = tag_key(p->value);
			*ret_error = xasprintf(
				"%s: tag '%s' conflicts with '%s' requested by a concurrent call",
				p->key, k, tag_value(theirs));
		} else
			*ret_error =
				xasprintf("%s: conflicts with %s requested by a concurrent call",
					  p->key, theirs);
	}
	return -EBUSY;
}

/* Finds a value of req that differs from the batch's, or from an earlier one of req itself. */
static int check_conflicts(const Batch *b, const CoalesceRequest *req, char **ret_error)
{
	if (req->new_size && b->new_size && req->new_size != b->new_size) {
		if (ret_error && !*ret_error)
			*ret_error = xasprintf("capacity_range.required_bytes: conflicts with %llu "
					       "requested by a concurrent call",
					       (unsigned long long)b->new_size);
		return -EBUSY;
	}
	for (size_t i = 0; i < req->n_params; i++) {
		const ParamKV *p = &req->params[i];
		_cleanup_free_ char *id = ident_of(p);

		for (size_t j = 0; j < b->n_entries; j++)
			if (streq_ptr(b->entries[j].ident, id) &&
			    !streq_ptr(b->entries[j].value, p->value))
				return conflict(p, b->entries[j].value, ret_error);
		for (size_t j = 0; j < i; j++) {
			_cleanup_free_ char *other = ident_of(&req->params[j]);
			if (streq_ptr(other, id) && !streq_ptr(req->params[j].value, p->value)) {
				if (ret_error && !*ret_error)
					*ret_error = xasprintf(
						"%s: given twice with different values", p->key);
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* When the batch must close for req, which arrives at now: half its time left, so that the
 * backend change starts well within its deadline. */
static usec_t close_for(const CoalesceRequest *req, usec_t now)
{
	if (req->deadline == 0 || req->deadline == USEC_INFINITY)
		return USEC_INFINITY;
	return req->deadline <= now ? now : now + (req->deadline - now) / 2;
}

/* Adds req to b; check_conflicts() said it fits. */
static void merge(Batch *b, const CoalesceRequest *req)
{
	b->close_at = MIN(b->close_at, close_for(req, now_usec(CLOCK_MONOTONIC)));
	if (req->new_size)
		b->new_size = req->new_size;
	for (size_t i = 0; i < req->n_params; i++) {
		const ParamKV *p = &req->params[i];
		char *id = ident_of(p);
		bool found = false;

		for (size_t j = 0; j < b->n_entries && !found; j++)
			found = streq_ptr(b->entries[j].ident, id);
		if (found) {
			free(id);
			continue;
		}
		b->entries = xrealloc(b->entries, (b->n_entries + 1) * sizeof(Entry));
		b->entries[b->n_entries++] = (Entry){
			.ident = id,
			.key = xstrdup(p->key),
			.value = xstrdup(p->value),
			.tag = is_tag_key(p->key),
		};
	}
	b->n_callers++;
	b->refs++;
}

/* Called with the lock held. */
static Volume *volume_get(Coalescer *c, const char *id)
{
	for (Volume *v = c->volumes; v; v = v->next)
		if (streq_ptr(v->id, id))
			return v;
	Volume *v = xnew0(Volume, 1);
	v->id = xstrdup(id);
	v->next = c->volumes;
	c->volumes = v;
	return v;
}

/* Called with the lock held: forgets v once nobody uses it. */
static void volume_unuse(Coalescer *c, Volume *v)
{
	if (--v->users > 0 || v->open || v->applying)
		return;
	for (Volume **p = &c->volumes; *p; p = &(*p)->next)
		if (*p == v) {
			*p = v->next;
			free(v->id);
			free(v);
			return;
		}
}

/* The leader's part: wait out the window (or less: a caller's deadline brings close_at
 * nearer, see merge()), close the batch, apply it, publish the result. Called and returns
 * with the lock held. */
static void run_batch(Coalescer *c, Volume *v, Batch *b)
{
	for (;;) {
		usec_t at = b->close_at;
		if (now_usec(CLOCK_MONOTONIC) >= at)
			break;
		struct timespec ts = {
			.tv_sec = (time_t)(at / USEC_PER_SEC),
			.tv_nsec = (long)(at % USEC_PER_SEC * NSEC_PER_USEC),
		};
		(void)pthread_cond_timedwait(&c->closing, &c->lock, &ts);
	}
	/* One backend change per volume at a time; requests keep joining meanwhile. */
	while (v->applying)
		pthread_cond_wait(&c->changed, &c->lock);
	v->open = NULL;
	v->applying = true;

	/* b is closed: nobody else touches its entries now. */
	ParamKV *kv = xnew0(ParamKV, b->n_entries);
	size_t n_tags = 0;
	for (size_t i = 0; i < b->n_entries; i++) {
		kv[i].key = b->entries[i].tag ? xasprintf(TAG_PREFIX "%zu", ++n_tags)
					      : xstrdup(b->entries[i].key);
		kv[i].value = xstrdup(b->entries[i].value);
	}
	CoalescedChange change = {
		.new_size = b->new_size,
		.params = kv,
		.n_params = b->n_entries,
		.n_callers = b->n_callers,
	};
	CoalescedResult outcome = {};
	char *error = NULL;
	pthread_mutex_unlock(&c->lock);

	log_debug("volume %s: applying %zu merged request(s)", v->id, change.n_callers);
	metric_inc(&changes);
	int r = c->apply(c->userdata, v->id, &change, &outcome, &error);
	param_kv_free_many(kv, change.n_params);

	pthread_mutex_lock(&c->lock);
	b->result = r < 0 ? r : 0;
	b->outcome = outcome;
	b->error = r < 0 ? error : NULL;
	if (r >= 0)
		free(error);
	b->done = true;
	v->applying = false;
	pthread_cond_broadcast(&c->changed);
}

int coalescer_submit(Coalescer *c, const CoalesceRequest *req, CoalescedResult *ret,
		     char **ret_error)
{
	Batch *b;
	int r;

	if (req->new_size == 0 && req->n_params == 0)
		return 0;

	pthread_mutex_lock(&c->lock);
	Volume *v = volume_get(c, req->volume_id);
	v->users++;
	if (v->open) {
		b = v->open;
		r = check_conflicts(b, req, ret_error);
		if (r < 0) {
			metric_inc(&coalesce_conflicts);
			volume_unuse(c, v);
			pthread_mutex_unlock(&c->lock);
			return r;
		}
		usec_t before = b->close_at;
		merge(b, req);
		if (b->close_at < before)
			pthread_cond_broadcast(&c->closing);
		metric_inc(&merged);
		while (!b->done)
			pthread_cond_wait(&c->changed, &c->lock);
	} else {
		b = xnew0(Batch, 1);
		b->close_at = now_usec(CLOCK_MONOTONIC) + c->window;
		r = check_conflicts(b, req, ret_error);
		if (r < 0) {
			batch_free(b);
			volume_unuse(c, v);
			pthread_mutex_unlock(&c->lock);
			return r;
		}
		merge(b, req);
		v->open = b;
		run_batch(c, v, b);
	}

	r = b->result;
	if (r < 0 && ret_error && !*ret_error && b->error)
		*ret_error = xstrdup(b->error);
	if (r == 0 && ret)
		*ret = b->outcome;
	if (--b->refs == 0)
		batch_free(b);
	volume_unuse(c, v);
	pthread_mutex_unlock(&c->lock);
	return r;
}
