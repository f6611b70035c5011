/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's snapshots and group snapshots as backend operations. A group is one pool snapshot
 * per source volume plus a group record listing them. Member snapshots get names derived from
 * the group's name and their volume, so a retried create (after a timeout or a crash) finds the
 * members it already made. The members are taken one after the other: they are consistent per
 * volume, not across volumes (docs/pool.md). A member is deleted with its group only. */
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "error-util.h"
#include "pool-backend.h"
#include "pool-store.h"
#include "time-util.h"

/* The snapshot parameter recording the group snapshot a snapshot belongs to. */
#define GROUP_KEY "groupSnapshotId"

static int64_t now_ns(void)
{
	return (int64_t)now_usec(CLOCK_REALTIME) * 1000;
}

void pool_snapshot_to_backend(const PoolSnapshot *s, BackendSnapshot *ret)
{
	*ret = (BackendSnapshot){
		.id = pool_backend_id(s->id, s->node),
		.name = xstrdup(s->name ?: ""),
		.source_volume_id = xstrdup(s->source_volume_id),
		.size = s->size,
		.created_ns = s->created_ns,
		.ready = true, /* a pool snapshot is whole once it exists */
		.group_id = xstrdup(strmap_get(&s->params, GROUP_KEY) ?: ""),
	};
	strmap_copy(&ret->params, &s->params);
	strmap_remove(&ret->params, GROUP_KEY);
}

/* Why the snapshot `what` (malloc'ed, taken) of size bytes failed; for -ENOSPC, the pool's
 * space: its limit, or its filesystem full for real. */
static int snapshot_failed(PoolBackend *pb, int e, uint64_t size, char *what, char **ret_error)
{
	_cleanup_free_ char *w = what;
	_cleanup_free_ char *why =
		e == -ENOSPC  ? pool_space_refusal(pb->pool, size, pb->node_id)
		: e == -EPERM ? xstrdup("its directory holds a device file, which is never copied: "
					"remove it, then try again")
			      : xstrdup(strerror(-e));
	return errorf(ret_error, e == -EPERM ? -ENOTEMPTY : e, "%s failed: %s", w, why);
}

int pool_snapshot_take(PoolBackend *pb, const BackendCreateSnapshot *r, const char *store_id,
		       BackendSnapshot *ret, char **ret_error)
{
	Pool *pool = pb->pool;
	_cleanup_(pool_snapshot_freep) PoolSnapshot *existing = NULL;
	_cleanup_(pool_volume_freep) PoolVolume *source = NULL;
	PoolSnapshot spec = {.node = pb->node_part};
	char local[POOL_ID_MAX];
	CopyMethod method;

	pool_snapshot_id_for_name(r->name, spec.id);
	if (pool_snapshot_load(pool, spec.id, &existing) == 0) {
		if (!store_id && strmap_get(&existing->params, POOL_STORE_KEY))
			return errorf(ret_error, -EEXIST,
				      "snapshot '%s' exists as %s%s, uploading to the snapshot "
				      "store (location: store): its location differs from this "
				      "request's (location: local)",
				      r->name, POOL_STORE_ID_PREFIX, spec.id);
		pool_snapshot_to_backend(existing, ret);
		return -EEXIST;
	}
	int e;
	if (!store_id && pb->store && (e = pool_store_name_check(pb, r, spec.id, ret_error)) < 0)
		return e;
	e = pool_backend_id_find(pb, POOL_ID_VOLUME, "source_volume_id", r->source_volume_id, local,
				 ret_error);
	if (e < 0)
		return e;
	if ((e = pool_backend_volume_load(pb, "source_volume_id", r->source_volume_id, local,
					  &source, ret_error)) < 0)
		return e;
	if (store_id && source->directory)
		return errorf(
			ret_error, -EINVAL,
			"parameters: location: store: volume %s is a directory volume, whose "
			"snapshots are local only (the store holds the images of file volumes)",
			r->source_volume_id);
	spec.name = (char *)r->name;
	spec.source_volume_id = (char *)r->source_volume_id;
	spec.size = source->size;
	spec.directory = source->directory;
	spec.created_ns = now_ns();
	if (r->params)
		strmap_copy(&spec.params, r->params);
	if (store_id)
		strmap_set(&spec.params, POOL_STORE_KEY, store_id);
	e = pool_snapshot_create(pool, &spec, local, &method);
	if (e == -EEXIST && pool_snapshot_load(pool, spec.id, &existing) == 0)
		pool_snapshot_to_backend(existing, ret); /* another process made it meanwhile */
	else if (e < 0)
		e = snapshot_failed(
			pb, e, spec.size,
			xasprintf("snapshot '%s' of volume %s", r->name, r->source_volume_id),
			ret_error);
	else {
		pool_snapshot_to_backend(&spec, ret);
		ret->copy_method = copy_method_to_string(method);
	}
	strmap_done(&spec.params);
	return e;
}

int pool_backend_create_snapshot(Backend *b, const BackendCreateSnapshot *r, BackendSnapshot *ret,
				 char **ret_error)
{
	PoolBackend *pb = pool_of(b);

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0)
		return e;
	if (r->location && strcmp(r->location, "store") == 0)
		return pool_store_create_snapshot(pb, r, ret, ret_error);
	return pool_snapshot_take(pb, r, NULL, ret, ret_error);
}

int pool_backend_delete_snapshot(Backend *b, const BackendRef *r, BackendDeleted *ret,
				 char **ret_error)
{
	Pool *pool = pool_of(b)->pool;
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	_cleanup_free_ char *err = NULL;
	char local[POOL_ID_MAX];

	if (pool_store_id_of(r->id))
		return pool_store_delete_snapshot(pool_of(b), r, ret, ret_error);
	/* Another node's snapshot is NOT_FOUND, not gone (its data is still there). */
	int e = pool_backend_id_local(pool_of(b), POOL_ID_SNAPSHOT, "snapshot_id", r->id, local,
				      &err);
	if (e == -EXDEV)
		return error_pass(-ENOENT, &err, ret_error);
	if (e < 0) {
		*ret = (BackendDeleted){};
		return 0;
	}
	if ((e = pool_backend_usable(pool_of(b), ret_error)) < 0)
		return e;
	if (pool_snapshot_load(pool, local, &s) == 0 && strmap_get(&s->params, GROUP_KEY))
		return errorf(ret_error, -ENOTEMPTY,
			      "snapshot %s belongs to group snapshot %s: delete the group", r->id,
			      strmap_get(&s->params, GROUP_KEY));
	_cleanup_free_ char *why = NULL;
	e = pool_snapshot_delete(pool, local, &why);
	if (e == -EPERM && why)
		return errorf(ret_error, -ENOTEMPTY,
			      "snapshot %s cannot be deleted (nothing was removed): pool %s: %s, "
			      "then delete it again",
			      r->id, pool_path(pool), why);
	if (e < 0 && e != -ENOENT)
		return errorf(ret_error, e, "deleting snapshot %s failed: %s", r->id, strerror(-e));
	*ret = (BackendDeleted){.found = e == 0, .leftover = pool_leftover(pool, why)};
	return 0;
}

int pool_backend_get_snapshot(Backend *b, const BackendRef *r, BackendSnapshot *ret,
			      char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	char local[POOL_ID_MAX];

	if (pool_store_id_of(r->id))
		return pool_store_get_snapshot(pool_of(b), r, ret, ret_error);
	int e = pool_backend_id_find(pool_of(b), POOL_ID_SNAPSHOT, "snapshot_id", r->id, local,
				     ret_error);
	if (e < 0 || (e = pool_backend_usable(pool_of(b), ret_error)) < 0)
		return e;
	if (pool_snapshot_load(pool_of(b)->pool, local, &s) < 0)
		return errorf(ret_error, -ENOENT, "snapshot_id: snapshot %s not found", r->id);
	pool_snapshot_to_backend(s, ret);
	return 0;
}

/* The ids a list request looks at, sorted: one snapshot by id (absent, or not an id of this
 * pool or the store, lists nothing), else all: this pool's (local IDs) and the store's. */
static int list_ids(PoolBackend *pb, const BackendListRequest *r, char ***ret, size_t *ret_n,
		    char **ret_error)
{
	_cleanup_free_ char *ignored = NULL;
	char local[POOL_ID_MAX];
	char **ids = NULL;
	size_t n = 0, cap = 0;

	if (r->snapshot_id && *r->snapshot_id) {
		if (pool_store_id_of(r->snapshot_id))
			strv_push(&ids, &n, &cap, xstrdup(r->snapshot_id));
		else if (pool_backend_id_local(pb, POOL_ID_SNAPSHOT, "snapshot_id", r->snapshot_id,
					       local, &ignored) == 0)
			strv_push(&ids, &n, &cap, xstrdup(local));
		*ret = ids;
		*ret_n = n;
		return 0;
	}
	int e = pool_snapshot_list(pb->pool, &ids, &n);
	if (e < 0)
		return errorf(ret_error, e, "listing the pool failed: %s", strerror(-e));
	cap = n + 1; /* the room a strv of n has at least */
	if (pb->store && (e = pool_store_list_ids(pb, r->secrets, &ids, &n, &cap, ret_error)) < 0) {
		strv_free(ids);
		return e;
	}
	strv_sort(ids);
	*ret_n = strv_uniq(ids, n);
	*ret = ids;
	return 0;
}

/* Whether a snapshot was taken of the volume a request names (by either form of its ID). */
static bool snapshot_of(PoolBackend *pb, const PoolSnapshot *s, const char *volume_id)
{
	_cleanup_free_ char *e1 = NULL, *e2 = NULL;
	char a[POOL_ID_MAX], b[POOL_ID_MAX];

	return pool_backend_id_local(pb, POOL_ID_VOLUME, "", s->source_volume_id, a, &e1) == 0 &&
	       pool_backend_id_local(pb, POOL_ID_VOLUME, "", volume_id, b, &e2) == 0 &&
	       strcmp(a, b) == 0;
}

/* The entry of id for a list: 1 when listed (*ret filled), 0 when not (gone, another volume's,
 * a copy that is listed as its store snapshot), or a store's error. */
static int list_entry(PoolBackend *pb, const BackendListRequest *r, const char *id,
		      BackendSnapshot *ret, char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	const char *volume =
		r->source_volume_id && *r->source_volume_id ? r->source_volume_id : NULL;

	if (pool_store_id_of(id)) {
		_cleanup_free_ char *err = NULL;
		BackendRef ref = {.id = id, .secrets = r->secrets};
		BackendSnapshot found = {};
		int e = pool_store_get_snapshot(pb, &ref, &found, &err);
		if (e == -ENOENT) /* deleted since it was listed */
			return 0;
		if (e == 0 && (!volume || strcmp(found.source_volume_id, volume) == 0)) {
			*ret = found;
			return 1;
		}
		backend_snapshot_done(&found);
		return e < 0 ? pool_store_list_failed(pb, e, &err, ret_error) : e;
	}
	if (pool_snapshot_load(pb->pool, id, &s) < 0 || strmap_get(&s->params, POOL_STORE_KEY) ||
	    (volume && !snapshot_of(pb, s, volume)))
		return 0;
	pool_snapshot_to_backend(s, ret);
	return 1;
}

static bool list_token_valid(const char *token)
{
	return pool_snapshot_id_valid(token) || pool_store_id_of(token);
}

int pool_backend_list_snapshots(Backend *b, const BackendListRequest *r, BackendSnapshotList *ret,
				char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_strv_free_ char **ids = NULL;
	BackendSnapshotList l = {};
	size_t n = 0;

	int e = pool_page_token_check(r->starting_token, list_token_valid, "ListSnapshots",
				      ret_error);
	if (e < 0 || (e = pool_backend_usable(pb, ret_error)) < 0 ||
	    (e = list_ids(pb, r, &ids, &n, ret_error)) < 0)
		return e;
	size_t i = pool_page_start(ids, n, r->starting_token);
	size_t max = r->max_entries ?: POOL_LIST_MAX_DEFAULT;
	l.snapshots = xnew0(BackendSnapshot, MIN(max, n - i));
	for (; i < n && l.n_snapshots < max; i++) {
		e = list_entry(pb, r, ids[i], &l.snapshots[l.n_snapshots], ret_error);
		if (e < 0) {
			backend_snapshot_list_done(&l);
			return e;
		}
		l.n_snapshots += (size_t)e;
	}
	if (i < n)
		l.next_token = xstrdup(ids[i]);
	*ret = l;
	return 0;
}

/* Group snapshots */

static void group_to_backend(Pool *pool, const PoolGroup *g, BackendGroup *ret)
{
	*ret = (BackendGroup){
		.id = pool_backend_id(g->id, g->node),
		.name = xstrdup(g->name ?: ""),
		.created_ns = g->created_ns,
		.ready = true,
		.snapshots = xnew0(BackendSnapshot, g->n_snapshots),
	};
	for (size_t i = 0; i < g->n_snapshots; i++) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		if (pool_snapshot_load(pool, g->snapshot_ids[i], &s) < 0) {
			ret->ready = false; /* a member is missing: damage, pool check says */
			continue;
		}
		pool_snapshot_to_backend(s, &ret->snapshots[ret->n_snapshots++]);
	}
}

/* Makes (or finds, on a retry) the member snapshot of one volume. Its name is made of the
 * group's and the volume's local ID, as it was before IDs carried their node. */
static int group_snapshot_member(PoolBackend *pb, const BackendCreateGroup *r, const char *group_id,
				 const char *volume_id, char ret_id[POOL_ID_MAX], char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *name = NULL;
	PoolSnapshot spec = {.source_volume_id = (char *)volume_id, .node = pb->node_part};
	Pool *pool = pb->pool;
	char local[POOL_ID_MAX];
	CopyMethod method;

	int e = pool_backend_id_find(pb, POOL_ID_VOLUME, "source_volume_ids", volume_id, local,
				     ret_error);
	if (e < 0)
		return e;
	if ((e = pool_backend_volume_load(pb, "source_volume_ids", volume_id, local, &v,
					  ret_error)) < 0)
		return e;
	spec.name = name = xasprintf("%s/%s", r->name, local);
	pool_snapshot_id_for_name(name, spec.id);
	if (r->params)
		strmap_copy(&spec.params, r->params);
	strmap_set(&spec.params, GROUP_KEY, group_id);
	spec.size = v->size;
	spec.directory = v->directory;
	spec.created_ns = now_ns();
	e = pool_snapshot_create(pool, &spec, local, &method);
	strmap_done(&spec.params);
	if (e < 0 && e != -EEXIST)
		return snapshot_failed(pb, e, spec.size,
				       xasprintf("snapshot of volume %s", volume_id), ret_error);
	memcpy(ret_id, spec.id, POOL_ID_MAX);
	return 0;
}

int pool_backend_create_group(Backend *b, const BackendCreateGroup *r, BackendGroup *ret,
			      char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	Pool *pool = pb->pool;
	_cleanup_(pool_group_freep) PoolGroup *existing = NULL;
	PoolGroup g = {.name = (char *)r->name, .created_ns = now_ns(), .node = pb->node_part};
	_cleanup_free_ char *group_id = NULL;
	int e = 0;

	if (r->location && strcmp(r->location, "store") == 0)
		return errorf(ret_error, -EINVAL,
			      "parameters: location: store: the pool takes a group snapshot beside "
			      "its volumes only: want local (or leave it out)");
	pool_group_id_for_name(r->name, g.id);
	if (pool_group_load(pool, g.id, &existing) == 0) {
		group_to_backend(pool, existing, ret);
		return -EEXIST;
	}
	g.snapshot_ids = xnew0(char *, r->n_volume_ids + 1);
	group_id = pool_backend_id(g.id, g.node);
	for (size_t i = 0; i < r->n_volume_ids; i++) {
		char id[POOL_ID_MAX];
		if ((e = group_snapshot_member(pb, r, group_id, r->volume_ids[i], id, ret_error)) <
		    0)
			goto out;
		g.snapshot_ids[g.n_snapshots++] = xstrdup(id);
	}
	e = pool_group_create(pool, &g);
	if (e < 0 && e != -EEXIST) {
		e = errorf(ret_error, e, "recording group snapshot '%s' failed: %s", r->name,
			   strerror(-e));
		goto out;
	}
	e = 0;
	group_to_backend(pool, &g, ret);
out:
	strv_free(g.snapshot_ids);
	return e;
}

/* Whether the request's snapshot_ids (if any) are exactly the group's: -EINVAL if not. */
static int group_members_check(PoolBackend *pb, const PoolGroup *g, const BackendGroupRequest *r,
			       char **ret_error)
{
	bool match = r->n_snapshot_ids == 0 || r->n_snapshot_ids == g->n_snapshots;

	for (size_t i = 0; match && i < r->n_snapshot_ids; i++) {
		_cleanup_free_ char *ignored = NULL;
		char local[POOL_ID_MAX];
		bool found = false;
		if (pool_backend_id_local(pb, POOL_ID_SNAPSHOT, "snapshot_ids", r->snapshot_ids[i],
					  local, &ignored) < 0)
			break;
		for (size_t k = 0; k < g->n_snapshots && !found; k++)
			found = strcmp(local, g->snapshot_ids[k]) == 0;
		match = found;
	}
	if (!match)
		return errorf(ret_error, -EINVAL,
			      "snapshot_ids: not the %zu snapshots of group snapshot %s",
			      g->n_snapshots, r->id);
	return 0;
}

/* The group a request names: -ENOENT (with *ret_error) when it is not this pool's. */
static int group_load(PoolBackend *pb, const char *id, PoolGroup **ret, char **ret_error)
{
	char local[POOL_ID_MAX];

	int e = pool_backend_id_local(pb, POOL_ID_GROUP, "group_snapshot_id", id, local, ret_error);
	if (e == -EXDEV)
		return -EXDEV;
	if (e < 0 || pool_group_load(pb->pool, local, ret) < 0)
		return errorf(ret_error, -ENOENT, "group snapshot %s not found", id);
	return 0;
}

int pool_backend_get_group(Backend *b, const BackendGroupRequest *r, BackendGroup *ret,
			   char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	Pool *pool = pb->pool;
	_cleanup_(pool_group_freep) PoolGroup *g = NULL;
	int e;

	if ((e = group_load(pb, r->id, &g, ret_error)) < 0)
		return e == -EXDEV ? -ENOENT : e;
	if ((e = group_members_check(pb, g, r, ret_error)) < 0)
		return e;
	group_to_backend(pool, g, ret);
	return 0;
}

int pool_backend_delete_group(Backend *b, const BackendGroupRequest *r, BackendDeleted *ret,
			      char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	Pool *pool = pb->pool;
	_cleanup_(pool_group_freep) PoolGroup *g = NULL;
	_cleanup_free_ char *err = NULL;
	int e;

	/* Another node's group is NOT_FOUND, not gone. */
	if ((e = group_load(pb, r->id, &g, &err)) == -EXDEV)
		return error_pass(-ENOENT, &err, ret_error);
	if (e < 0) {
		*ret = (BackendDeleted){}; /* gone already */
		return 0;
	}
	if ((e = group_members_check(pb, g, r, ret_error)) < 0)
		return e;
	for (size_t i = 0; i < g->n_snapshots; i++) {
		_cleanup_free_ char *why = NULL;
		e = pool_snapshot_delete(pool, g->snapshot_ids[i], &why);
		if (e < 0 && e != -ENOENT)
			return errorf(ret_error, e == -EPERM ? -ENOTEMPTY : e,
				      "deleting snapshot %s of group %s failed: %s",
				      g->snapshot_ids[i], g->id, why ?: strerror(-e));
	}
	_cleanup_free_ char *why = NULL;
	e = pool_group_delete(pool, g->id, &why);
	if (e < 0 && e != -ENOENT)
		return errorf(ret_error, e == -EPERM ? -ENOTEMPTY : e,
			      "deleting group snapshot %s failed: %s", g->id, why ?: strerror(-e));
	*ret = (BackendDeleted){
		.found = true,
		.name = xstrdup(g->name ?: ""),
		.n_members = g->n_snapshots,
	};
	return 0;
}
