/* SPDX-License-Identifier: Apache-2.0 */
/* Collection of the chunks no manifest names (docs/snapshots.md, "Collection"). */
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "failpoint.h"
#include "hashmap.h"
#include "random-util.h"
#include "store-internal.h"

typedef struct Seen {
	const char *want; /* a key to find; its time in found */
	usec_t found;
	char **others; /* the other markers, and their times */
	usec_t *times;
	size_t n_others;
} Seen;

static int find_key(const S3Object *o, void *userdata)
{
	Seen *s = userdata;
	if (strcmp(o->key, s->want) == 0) {
		s->found = o->last_modified;
		return 0;
	}
	s->others = xrealloc(s->others, (s->n_others + 1) * sizeof(char *));
	s->times = xrealloc(s->times, (s->n_others + 1) * sizeof(usec_t));
	s->others[s->n_others] = xstrdup(o->key);
	s->times[s->n_others++] = o->last_modified;
	return 0;
}

static void seen_done(Seen *s)
{
	for (size_t i = 0; i < s->n_others; i++)
		free(s->others[i]);
	free(s->others);
	free(s->times);
}

/* Removes the markers older than the lease (a collection killed before it removed its own):
 * an upload takes none of them for a running collection any more, and none would go else. */
static int drop_stale_markers(Store *s, Seen *seen, usec_t now, usec_t deadline, char **ret_error)
{
	size_t n = 0;

	for (size_t i = 0; i < seen->n_others; i++)
		if (seen->times[i] + s->lease <= now)
			seen->others[n++] = seen->others[i];
		else
			free(seen->others[i]);
	seen->n_others = n;
	if (n == 0)
		return 0;
	return s3_delete_many(s->s3, (const char *const *)seen->others, n, deadline, ret_error);
}

typedef struct Intents {
	usec_t now; /* the store's clock: our marker's time */
	usec_t lease;
	char *live; /* the first live intent's key */
	char **stale;
	size_t n_stale;
} Intents;

static int sort_intent(const S3Object *o, void *userdata)
{
	Intents *in = userdata;

	if (o->last_modified + in->lease > in->now) {
		if (!in->live)
			in->live = xstrdup(o->key);
		return 0;
	}
	in->stale = xrealloc(in->stale, (in->n_stale + 1) * sizeof(char *));
	in->stale[in->n_stale++] = xstrdup(o->key);
	return 0;
}

static void intents_done(Intents *in)
{
	free(in->live);
	for (size_t i = 0; i < in->n_stale; i++)
		free(in->stale[i]);
	free(in->stale);
	*in = (Intents){};
}

/* The message for a live intent: which snapshot, from which node. */
static int busy(Store *s, const char *key, usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	const char *snap = strrchr(key, '/') + 1, *node = "?";
	json_auto_t *j = NULL;

	if (s3_get(s->s3, key, 0, 0, 65536, deadline, &text, &len, NULL) == 0) {
		j = json_loadb(text, len, 0, NULL);
		node = json_string_value(json_object_get(j, "node")) ?: "?";
	}
	return errorf(ret_error, -EBUSY,
		      "collection in %s deferred: snapshot %s is being uploaded from node %s",
		      s3_client_name(s->s3), snap, node);
}

typedef struct Sweep {
	Store *s;
	Hashmap *named; /* hashes some manifest names */
	usec_t now, grace;
	char **doomed;
	size_t n_doomed;
	StoreGcStats *stats;
} Sweep;

static int sweep_one(const S3Object *o, void *userdata)
{
	Sweep *w = userdata;
	const char *hash = strrchr(o->key, '/') + 1;

	w->stats->chunks++;
	if (hashmap_contains(w->named, hash))
		return 0;
	if (o->last_modified + w->grace > w->now) {
		w->stats->chunks_young++;
		return 0;
	}
	w->doomed = xrealloc(w->doomed, (w->n_doomed + 1) * sizeof(char *));
	w->doomed[w->n_doomed++] = xstrdup(o->key);
	return 0;
}

typedef struct Mark {
	Store *s;
	Hashmap *named;
	usec_t deadline;
	uint64_t manifests;
	char *error;
} Mark;

static int mark_one(const char *id, void *userdata)
{
	Mark *k = userdata;
	StoreManifest m = {};
	int r = store_manifest_get(k->s, id, k->deadline, &m, &k->error);

	if (r == -ENOENT)
		return 0; /* deleted since the list */
	if (r < 0)
		return r; /* a damaged manifest: collect nothing rather than what it names */
	k->manifests++;
	for (size_t i = 0; i < m.n_chunks; i++)
		if (!hashmap_contains(k->named, m.chunks[i].hash))
			hashmap_put(k->named, m.chunks[i].hash, NULL);
	store_manifest_done(&m);
	return 0;
}

static int gc_run(Store *s, usec_t deadline, StoreGcStats *ret_stats, char **ret_error)
{
	_cleanup_free_ char *marker = NULL, *gc_prefix = NULL, *intents = NULL, *chunks = NULL;
	_cleanup_free_ char *msg = NULL;
	_cleanup_(hashmap_freep) Hashmap *named = hashmap_new(NULL);
	StoreGcStats stats = {};
	Intents in = {.lease = s->lease};
	Sweep w = {.s = s, .named = named, .grace = s->grace, .stats = &stats};
	int r;

	/* Our marker first: an upload that starts from now on sees it and trusts no HEAD. */
	gc_prefix = xasprintf("%sgc/", s->prefix);
	marker = xasprintf("%s%016" PRIx64, gc_prefix, random_u64());
	r = s3_put(s->s3, marker, s->node, strlen(s->node), false, deadline, &msg);
	if (r < 0)
		return errorf(ret_error, r, "collection: marker: %s", msg);
	failpoint("store-gc-after-marker");
	Seen seen = {.want = marker};
	r = s3_list(s->s3, gc_prefix, find_key, &seen, deadline, &msg);
	if (r >= 0)
		r = drop_stale_markers(s, &seen, seen.found, deadline, &msg);
	stats.stale_markers = seen.n_others;
	seen_done(&seen);
	if (r < 0)
		goto fail;
	in.now = w.now = seen.found;

	/* ...and an upload that started before it is seen here: then nothing goes. */
	intents = xasprintf("%sintents/", s->prefix);
	r = s3_list(s->s3, intents, sort_intent, &in, deadline, &msg);
	if (r < 0)
		goto fail;
	if (in.live) {
		r = busy(s, in.live, deadline, ret_error);
		goto out;
	}
	/* Intents past their lease: their node died mid-upload. Its chunks become garbage
	 * unless a run again (which writes a new intent) names them. */
	if (in.n_stale > 0) {
		r = s3_delete_many(s->s3, (const char *const *)in.stale, in.n_stale, deadline,
				   &msg);
		if (r < 0)
			goto fail;
		stats.stale_intents = in.n_stale;
	}

	Mark k = {.s = s, .named = named, .deadline = deadline};
	r = store_list(s, mark_one, &k, deadline, &msg);
	if (r < 0 && k.error) {
		free(msg);
		msg = TAKE_PTR(k.error);
	}
	free(k.error);
	if (r < 0)
		goto fail;
	stats.manifests = k.manifests;

	chunks = xasprintf("%schunks/", s->prefix);
	r = s3_list(s->s3, chunks, sweep_one, &w, deadline, &msg);
	if (r < 0)
		goto fail;

	/* Once more: an intent that came while we marked makes us stop here. */
	intents_done(&in);
	in = (Intents){.lease = s->lease, .now = w.now};
	r = s3_list(s->s3, intents, sort_intent, &in, deadline, &msg);
	if (r < 0)
		goto fail;
	if (in.live) {
		r = busy(s, in.live, deadline, ret_error);
		goto out;
	}
	failpoint("store-gc-before-delete");
	r = s3_delete_many(s->s3, (const char *const *)w.doomed, w.n_doomed, deadline, &msg);
	if (r < 0)
		goto fail;
	failpoint("store-gc-after-delete");
	stats.chunks_deleted = w.n_doomed;
	if (ret_stats)
		*ret_stats = stats;
	goto out;
fail:
	r = errorf(ret_error, r, "collection: %s", msg);
out:
	(void)s3_delete(s->s3, marker, deadline, NULL);
	intents_done(&in);
	for (size_t i = 0; i < w.n_doomed; i++)
		free(w.doomed[i]);
	free(w.doomed);
	return r;
}

int store_gc(Store *s, usec_t deadline, StoreGcStats *ret_stats, char **ret_error)
{
	_cleanup_free_ char *msg = NULL;
	StoreGcStats stats = {};

	int r = gc_run(s, deadline, &stats, &msg);
	store_count_collection(r, stats.chunks_deleted, msg);
	if (r < 0)
		return ret_error ? error_pass(r, &msg, ret_error) : r;
	if (ret_stats)
		*ret_stats = stats;
	return 0;
}

typedef struct Unfinished {
	Store *s;
	usec_t now; /* CLOCK_REALTIME: a stale intent is only a hint here, not a decision */
	usec_t deadline;
	int (*fn)(const char *id, const char *node, bool stale, void *userdata);
	void *userdata;
} Unfinished;

static int unfinished_one(const S3Object *o, void *userdata)
{
	Unfinished *u = userdata;
	_cleanup_free_ char *text = NULL;
	const char *id = strrchr(o->key, '/') + 1;
	size_t len = 0;
	json_auto_t *j = NULL;

	if (!store_id_valid(id))
		return 0;
	if (s3_get(u->s->s3, o->key, 0, 0, 65536, u->deadline, &text, &len, NULL) < 0)
		return 0; /* gone since the list: finished */
	j = json_loadb(text, len, 0, NULL);
	const char *node = json_string_value(json_object_get(j, "node"));
	return u->fn(id, node ? node : "", o->last_modified + u->s->lease <= u->now, u->userdata);
}

int store_unfinished(Store *s,
		     int (*fn)(const char *id, const char *node, bool stale, void *userdata),
		     void *userdata, usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *prefix = xasprintf("%sintents/", s->prefix);
	Unfinished u = {.s = s,
			.now = now_usec(CLOCK_REALTIME),
			.deadline = deadline,
			.fn = fn,
			.userdata = userdata};

	return s3_list(s->s3, prefix, unfinished_one, &u, deadline, ret_error);
}
