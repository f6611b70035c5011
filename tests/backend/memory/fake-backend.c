/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "fake-backend.h"
#include "strv.h"

static FakeBackend *fake_of(Backend *b)
{
	return (FakeBackend *)b;
}

static char *strdup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* ---- what a request is recorded as ---- */

static void rec_str(Strmap *m, const char *key, const char *value)
{
	if (value)
		strmap_set(m, key, value);
}

static void rec_u64(Strmap *m, const char *key, uint64_t value)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)value);
	strmap_set(m, key, buf);
}

static void rec_bool(Strmap *m, const char *key, bool value)
{
	strmap_set(m, key, value ? "true" : "false");
}

/* Each entry of src as "prefix.KEY". */
static void rec_map(Strmap *m, const char *prefix, const Strmap *src)
{
	for (size_t i = 0; src && i < src->n; i++) {
		_cleanup_free_ char *key = xasprintf("%s.%s", prefix, src->keys[i]);
		strmap_set(m, key, src->values[i]);
	}
}

static void rec_list(Strmap *m, const char *key, char *const *v, size_t n)
{
	_cleanup_free_ char *joined = xstrdup("");

	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		char *next = xasprintf("%s%s%s", joined, i ? "," : "", v[i]);
		free(joined);
		joined = next;
	}
	strmap_set(m, key, joined);
}

static void rec_access(Strmap *m, const BackendAccess *a)
{
	rec_bool(m, "access.block", a->block);
	rec_str(m, "access.fstype", a->fstype);
	rec_str(m, "access.mode", a->mode);
	rec_bool(m, "access.multi_node", a->multi_node);
	rec_bool(m, "access.read_only", a->read_only);
}

static void rec_params(Strmap *m, const VolumeParams *p)
{
	_cleanup_(strmap_done) Strmap kv = {};

	if (!p)
		return;
	volume_params_to_strmap(p, VOLUME_PARAMS_ALL, &kv);
	rec_map(m, "params", &kv);
}

static void rec_topologies(Strmap *m, const char *name, const BackendTopology *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *prefix = xasprintf("%s[%zu]", name, i);
		rec_map(m, prefix, &t[i]);
	}
}

/* ---- calls: counted, recorded, held, failed ---- */

/* Counts and records the call, waits while it is held, and answers the failure the test set.
 * Returns 0 with f->lock held, or the failure without. */
static int fake_enter(FakeBackend *f, FakeOp op, Strmap *rec, char **ret_error)
{
	pthread_mutex_lock(&f->lock);
	f->calls[op]++;
	strmap_done(&f->last[op]);
	f->last[op] = *rec;
	*rec = (Strmap){};
	if (f->hold[op]) {
		f->hold[op] = false;
		f->held[op] = true;
		pthread_cond_broadcast(&f->changed);
		while (f->held[op])
			pthread_cond_wait(&f->changed, &f->lock);
	}
	if (f->fail[op]) {
		int e = errorf(ret_error, f->fail[op], "%s", f->fail_message[op]);
		pthread_mutex_unlock(&f->lock);
		return e;
	}
	return 0;
}

/* An operation: name_record() flattens the request, name_locked() answers it under f->lock. */
#define FAKE_OP(name, NAME, Request, Result)                                              \
	static int name##_op(Backend *b, const Request *r, Result *ret, char **ret_error) \
	{                                                                                 \
		FakeBackend *f = fake_of(b);                                              \
		Strmap rec = {};                                                          \
		name##_record(r, &rec);                                                   \
		int e = fake_enter(f, FAKE_##NAME, &rec, ret_error);                      \
		if (e < 0)                                                                \
			return e;                                                         \
		e = name##_locked(f, r, ret, ret_error);                                  \
		pthread_mutex_unlock(&f->lock);                                           \
		return e;                                                                 \
	}

/* ---- objects ---- */

static int64_t next_time(FakeBackend *f)
{
	f->clock_ns += 1000000000;
	return f->clock_ns;
}

static uint64_t used_bytes(FakeBackend *f)
{
	uint64_t used = 0;

	for (size_t i = 0; i < f->n_volumes; i++)
		used += f->volumes[i]->v.size;
	return used;
}

static FakeVolume *volume_find(FakeBackend *f, const char *id, const char *name)
{
	for (size_t i = 0; i < f->n_volumes; i++) {
		const BackendVolume *v = &f->volumes[i]->v;
		if ((id && strcmp(v->id, id) == 0) || (name && strcmp(v->name, name) == 0))
			return f->volumes[i];
	}
	return NULL;
}

/* A volume as the calls other than get, list and delete see it: none when damaged. */
static FakeVolume *volume_find_sound(FakeBackend *f, const char *id)
{
	FakeVolume *fv = volume_find(f, id, NULL);

	return fv && !fv->v.damage ? fv : NULL;
}

/* volume_find_sound(), or -ENOENT naming field. */
static int volume_sound(FakeBackend *f, const char *field, const char *id, FakeVolume **ret,
			char **ret_error)
{
	FakeVolume *fv = volume_find_sound(f, id);

	if (!fv)
		return errorf(ret_error, -ENOENT, "%s: volume %s not found", field, id);
	*ret = fv;
	return 0;
}

static void volume_copy(const FakeVolume *fv, BackendVolume *ret)
{
	const BackendVolume *v = &fv->v;

	*ret = (BackendVolume){
		.id = xstrdup(v->id),
		.name = xstrdup(v->name),
		.size = v->size,
		.created_ns = v->created_ns,
		.source_kind = xstrdup(v->source_kind),
		.source_id = xstrdup(v->source_id),
		.access_mode = strdup_or_null(v->access_mode),
		.abnormal = v->abnormal,
		.condition = strdup_or_null(v->condition),
		.damage = strdup_or_null(v->damage),
		.copy_method = v->copy_method,
	};
	volume_params_copy(&v->params, &ret->params);
	strmap_copy(&ret->context, &v->context);
	strmap_copy(&ret->topology, &v->topology);
	for (size_t i = 0; i < fv->n_attachments; i++)
		strv_append(&ret->published_nodes, xstrdup(fv->attachments[i].node));
}

static FakeVolume *volume_new(FakeBackend *f, const char *id, const char *name, uint64_t size)
{
	FakeVolume *fv = xnew0(FakeVolume, 1);
	BackendVolume *v = &fv->v;

	v->id = xstrdup(id);
	v->name = xstrdup(name);
	v->size = size;
	v->created_ns = next_time(f);
	v->source_kind = xstrdup("");
	v->source_id = xstrdup("");
	v->access_mode = xstrdup("SINGLE_NODE_WRITER");
	strmap_set(&v->context, FAKE_CONTEXT_BACKEND, f->name);
	strmap_set(&v->topology, BACKEND_TOPOLOGY_ZONE, f->zone);
	f->volumes = xrealloc(f->volumes, (f->n_volumes + 1) * sizeof(FakeVolume *));
	f->volumes[f->n_volumes++] = fv;
	return fv;
}

static void attachment_done(FakeAttachment *a)
{
	free(a->node);
	strmap_done(&a->publish_context);
}

static void volume_free(FakeVolume *fv)
{
	for (size_t i = 0; i < fv->n_attachments; i++)
		attachment_done(&fv->attachments[i]);
	free(fv->attachments);
	backend_volume_done(&fv->v);
	free(fv);
}

static BackendSnapshot *snapshot_find(FakeBackend *f, const char *id, const char *name)
{
	for (size_t i = 0; i < f->n_snapshots; i++) {
		BackendSnapshot *s = f->snapshots[i];
		if ((id && strcmp(s->id, id) == 0) || (name && strcmp(s->name, name) == 0))
			return s;
	}
	return NULL;
}

static void snapshot_copy(const BackendSnapshot *s, BackendSnapshot *ret)
{
	*ret = (BackendSnapshot){
		.id = xstrdup(s->id),
		.name = xstrdup(s->name),
		.source_volume_id = xstrdup(s->source_volume_id),
		.size = s->size,
		.created_ns = s->created_ns,
		.ready = s->ready,
		.group_id = xstrdup(s->group_id),
		.copy_method = s->copy_method,
	};
	strmap_copy(&ret->params, &s->params);
}

static BackendSnapshot *snapshot_new(FakeBackend *f, const char *id, const char *name,
				     const char *source, uint64_t size)
{
	BackendSnapshot *s = xnew0(BackendSnapshot, 1);

	*s = (BackendSnapshot){
		.id = xstrdup(id),
		.name = xstrdup(name),
		.source_volume_id = xstrdup(source),
		.size = size,
		.created_ns = next_time(f),
		.ready = true,
		.group_id = xstrdup(""),
	};
	f->snapshots = xrealloc(f->snapshots, (f->n_snapshots + 1) * sizeof(BackendSnapshot *));
	f->snapshots[f->n_snapshots++] = s;
	return s;
}

static void snapshot_remove(FakeBackend *f, const char *id)
{
	for (size_t i = 0; i < f->n_snapshots; i++)
		if (strcmp(f->snapshots[i]->id, id) == 0) {
			backend_snapshot_done(f->snapshots[i]);
			free(f->snapshots[i]);
			f->snapshots[i] = f->snapshots[--f->n_snapshots];
			return;
		}
}

static BackendGroup *group_find(FakeBackend *f, const char *id, const char *name)
{
	for (size_t i = 0; i < f->n_groups; i++) {
		BackendGroup *g = f->groups[i];
		if ((id && strcmp(g->id, id) == 0) || (name && strcmp(g->name, name) == 0))
			return g;
	}
	return NULL;
}

/* The group with the members that still exist; not ready when one is gone. */
static void group_copy(FakeBackend *f, const BackendGroup *g, BackendGroup *ret)
{
	*ret = (BackendGroup){
		.id = xstrdup(g->id),
		.name = xstrdup(g->name),
		.created_ns = g->created_ns,
		.ready = true,
		.snapshots = xnew0(BackendSnapshot, g->n_snapshots),
	};
	for (size_t i = 0; i < g->n_snapshots; i++) {
		const BackendSnapshot *s = snapshot_find(f, g->snapshots[i].id, NULL);
		if (s)
			snapshot_copy(s, &ret->snapshots[ret->n_snapshots++]);
		else
			ret->ready = false;
	}
}

/* Whether ids (n 0: not given) are exactly the group's members. */
static bool group_members_are(const BackendGroup *g, char *const *ids, size_t n)
{
	if (n == 0)
		return true;
	if (n != g->n_snapshots)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (size_t k = 0; k < g->n_snapshots && !found; k++)
			found = strcmp(g->snapshots[k].id, ids[i]) == 0;
		if (!found)
			return false;
	}
	return true;
}

static int members_check(const BackendGroup *g, const BackendGroupRequest *r, char **ret_error)
{
	if (!group_members_are(g, r->snapshot_ids, r->n_snapshot_ids))
		return errorf(ret_error, -EINVAL,
			      "snapshot_ids: not the members of group snapshot %s", g->id);
	return 0;
}

/* A page of n entries from a token this backend gave ("NAME-token-INDEX"): the first index
 * in *ret_start; -EALREADY for any other token. */
static int page_start(FakeBackend *f, const char *token, size_t n, size_t *ret_start)
{
	_cleanup_free_ char *prefix = xasprintf("%s-token-", f->name);
	char *end;

	*ret_start = 0;
	if (!token || !*token)
		return 0;
	if (strncmp(token, prefix, strlen(prefix)) != 0)
		return -EALREADY;
	unsigned long i = strtoul(token + strlen(prefix), &end, 10);
	if (*end || i == 0 || i > n)
		return -EALREADY;
	*ret_start = i;
	return 0;
}

static char *page_token(FakeBackend *f, size_t next, size_t n)
{
	return next < n ? xasprintf("%s-token-%zu", f->name, next) : NULL;
}

static size_t page_size(FakeBackend *f, size_t max_entries)
{
	return max_entries ?: f->page_default;
}

static FakeMount *mount_find(FakeBackend *f, const char *volume_id, const char *path, bool staged)
{
	for (size_t i = 0; i < f->n_mounts; i++) {
		FakeMount *m = &f->mounts[i];
		if (strcmp(m->volume_id, volume_id) == 0 && m->staged == staged &&
		    (!path || strcmp(m->path, path) == 0))
			return m;
	}
	return NULL;
}

static void mount_add(FakeBackend *f, const char *volume_id, const char *path, bool staged,
		      bool block, bool read_only)
{
	f->mounts = xrealloc(f->mounts, (f->n_mounts + 1) * sizeof(FakeMount));
	f->mounts[f->n_mounts++] = (FakeMount){
		.volume_id = xstrdup(volume_id),
		.path = xstrdup(path),
		.staged = staged,
		.block = block,
		.read_only = read_only,
	};
}

static void mount_remove(FakeBackend *f, FakeMount *m)
{
	free(m->volume_id);
	free(m->path);
	*m = f->mounts[--f->n_mounts];
}

/* ---- identity ---- */

/* probe has no request: its shape is op(b, ret_error). */
static int probe_op(Backend *b, char **ret_error)
{
	FakeBackend *f = fake_of(b);
	Strmap rec = {};

	int e = fake_enter(f, FAKE_PROBE, &rec, ret_error);
	if (e < 0)
		return e;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void check_access_record(const BackendAccessCheck *r, Strmap *rec)
{
	rec_str(rec, "field", r->field);
	rec_access(rec, &r->access);
	rec_str(rec, "params.type", r->params ? r->params->type : "(none)");
	rec_str(rec, "volume.id", r->volume ? r->volume->id : "(none)");
}

/* Serves ext4 and xfs (and the default), and no MULTI_NODE_MULTI_WRITER. */
static int check_access_locked(FakeBackend *f, const BackendAccessCheck *r, void *ret,
			       char **ret_error)
{
	const BackendAccess *a = &r->access;

	(void)ret;
	if (!a->block && *a->fstype && strcmp(a->fstype, "ext4") != 0 &&
	    strcmp(a->fstype, "xfs") != 0)
		return errorf(ret_error, -EINVAL, "%s.mount.fs_type: the %s backend has no %s",
			      r->field, f->name, a->fstype);
	if (strcmp(a->mode, "MULTI_NODE_MULTI_WRITER") == 0)
		return errorf(ret_error, -EINVAL, "%s.access_mode: the %s backend serves no %s",
			      r->field, f->name, a->mode);
	return 0;
}

FAKE_OP(check_access, CHECK_ACCESS, BackendAccessCheck, void)

static void parse_params_record(const BackendParamsRequest *r, Strmap *rec)
{
	static const char *const uses[] = {"create", "capacity", "modify"};

	rec_str(rec, "use", uses[r->use]);
	for (size_t i = 0; i < r->n_parameters; i++) {
		_cleanup_free_ char *k = xasprintf("parameters.%s", r->parameters[i].key);
		rec_str(rec, k, r->parameters[i].value);
	}
	for (size_t i = 0; i < r->n_mutable_parameters; i++) {
		_cleanup_free_ char *k =
			xasprintf("mutable_parameters.%s", r->mutable_parameters[i].key);
		rec_str(rec, k, r->mutable_parameters[i].value);
	}
}

/* The EBS driver's rules, as the pool takes them. */
static int parse_params_locked(FakeBackend *f, const BackendParamsRequest *r, BackendParams *ret,
			       char **ret_error)
{
	return volume_params_request(&f->base, r, ret, ret_error);
}

FAKE_OP(parse_params, PARSE_PARAMS, BackendParamsRequest, BackendParams)

/* ---- volumes ---- */

static void create_volume_record(const BackendCreateVolume *r, Strmap *rec)
{
	rec_str(rec, "name", r->name);
	rec_u64(rec, "size", r->size);
	rec_str(rec, "source_kind", r->source_kind);
	rec_str(rec, "source_id", r->source_id);
	rec_access(rec, &r->access);
	rec_params(rec, r->params);
	rec_topologies(rec, "requisite", r->requisite, r->n_requisite);
	rec_topologies(rec, "preferred", r->preferred, r->n_preferred);
}

static int create_source_check(FakeBackend *f, const BackendCreateVolume *r, char **ret_error)
{
	const BackendSnapshot *s = NULL;
	FakeVolume *fv = NULL;
	uint64_t size;

	if (strcmp(r->source_kind, "snapshot") == 0)
		s = snapshot_find(f, r->source_id, NULL);
	else
		fv = volume_find_sound(f, r->source_id);
	if (!s && !fv)
		return errorf(ret_error, -ENOENT, "volume_content_source: %s '%s' not found",
			      r->source_kind, r->source_id);
	size = s ? s->size : fv->v.size;
	if (size > r->size)
		return errorf(ret_error, -ERANGE, "capacity_range: smaller than the source %s '%s'",
			      r->source_kind, r->source_id);
	return 0;
}

static int create_volume_locked(FakeBackend *f, const BackendCreateVolume *r, BackendVolume *ret,
				char **ret_error)
{
	FakeVolume *fv = volume_find(f, NULL, r->name);
	bool has_source = r->source_kind && *r->source_kind;
	int e;

	if (fv) {
		volume_copy(fv, ret);
		return -EEXIST;
	}
	if (has_source && (e = create_source_check(f, r, ret_error)) < 0)
		return e;
	if (used_bytes(f) + r->size > f->capacity)
		return errorf(ret_error, -ENOSPC,
			      "capacity_range: %llu bytes do not fit in the %s "
			      "backend",
			      (unsigned long long)r->size, f->name);
	_cleanup_free_ char *id = xasprintf("%s-vol-%u", f->name, ++f->serial);
	fv = volume_new(f, id, r->name, r->size);
	BackendVolume *v = &fv->v;
	volume_params_copy(r->params, &v->params);
	volume_params_to_strmap(r->params, VOLUME_PARAMS_NODE, &v->context);
	if (*r->access.fstype)
		strmap_set(&v->context, "csi.storage.k8s.io/fstype", r->access.fstype);
	if (has_source) {
		free(v->source_kind);
		free(v->source_id);
		v->source_kind = xstrdup(r->source_kind);
		v->source_id = xstrdup(r->source_id);
		v->copy_method = "fake copy";
	}
	free(v->access_mode);
	v->access_mode = strdup_or_null(r->access.mode);
	volume_copy(fv, ret);
	return 0;
}

FAKE_OP(create_volume, CREATE_VOLUME, BackendCreateVolume, BackendVolume)

static void ref_record(const BackendRef *r, Strmap *rec)
{
	rec_str(rec, "id", r->id);
}

#define delete_volume_record ref_record
#define get_volume_record ref_record
#define delete_snapshot_record ref_record
#define get_snapshot_record ref_record

/* Like the pool: refused while the volume is attached, staged or published. */
static int delete_volume_locked(FakeBackend *f, const BackendRef *r, BackendDeleted *ret,
				char **ret_error)
{
	for (size_t i = 0; i < f->n_volumes; i++) {
		FakeVolume *fv = f->volumes[i];
		if (strcmp(fv->v.id, r->id) != 0)
			continue;
		if (fv->n_attachments > 0)
			return errorf(ret_error, -ENOTEMPTY,
				      "volume %s is still published to node %s: unpublish it first",
				      r->id, fv->attachments[0].node);
		if (mount_find(f, r->id, NULL, true) || mount_find(f, r->id, NULL, false))
			return errorf(ret_error, -ENOTEMPTY,
				      "volume %s is in use on the node: unstage it first", r->id);
		*ret = (BackendDeleted){
			.found = true,
			.damaged = fv->v.damage != NULL,
			.name = xstrdup(fv->v.name),
		};
		volume_free(fv);
		f->volumes[i] = f->volumes[--f->n_volumes];
		return 0;
	}
	*ret = (BackendDeleted){};
	return 0;
}

FAKE_OP(delete_volume, DELETE_VOLUME, BackendRef, BackendDeleted)

static int get_volume_locked(FakeBackend *f, const BackendRef *r, BackendVolume *ret,
			     char **ret_error)
{
	FakeVolume *fv = volume_find(f, r->id, NULL);

	if (!fv)
		return errorf(ret_error, -ENOENT, "volume_id: volume %s not found", r->id);
	volume_copy(fv, ret);
	return 0;
}

FAKE_OP(get_volume, GET_VOLUME, BackendRef, BackendVolume)

static void list_record(const BackendListRequest *r, Strmap *rec)
{
	rec_str(rec, "starting_token", r->starting_token);
	rec_u64(rec, "max_entries", r->max_entries);
	rec_str(rec, "source_volume_id", r->source_volume_id);
	rec_str(rec, "snapshot_id", r->snapshot_id);
}

#define list_volumes_record list_record
#define list_snapshots_record list_record

static int list_volumes_locked(FakeBackend *f, const BackendListRequest *r, BackendVolumeList *ret,
			       char **ret_error)
{
	BackendVolumeList l = {};
	size_t i;

	if (page_start(f, r->starting_token, f->n_volumes, &i) < 0)
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListVolumes gave",
			      r->starting_token);
	size_t max = page_size(f, r->max_entries);
	l.volumes = xnew0(BackendVolume, f->n_volumes);
	for (; i < f->n_volumes && l.n_volumes < max; i++)
		volume_copy(f->volumes[i], &l.volumes[l.n_volumes++]);
	l.next_token = page_token(f, i, f->n_volumes);
	*ret = l;
	return 0;
}

FAKE_OP(list_volumes, LIST_VOLUMES, BackendListRequest, BackendVolumeList)

static void get_capacity_record(const BackendCapacityRequest *r, Strmap *rec)
{
	rec_map(rec, "topology", r->topology);
	rec_u64(rec, "min_size", r->min_size);
	rec_u64(rec, "max_size", r->max_size);
}

static int get_capacity_locked(FakeBackend *f, const BackendCapacityRequest *r,
			       BackendCapacity *ret, char **ret_error)
{
	_cleanup_(strmap_done) BackendTopology ours = {};
	uint64_t available = f->capacity - used_bytes(f);
	const char *key;

	(void)ret_error;
	strmap_set(&ours, BACKEND_TOPOLOGY_ZONE, f->zone);
	if (r->topology && backend_topology_fit(&ours, r->topology, &key) != BACKEND_TOPOLOGY_FITS)
		available = 0;
	*ret = (BackendCapacity){
		.available = available,
		.maximum_volume_size = f->max_volume_size ?: available,
		.minimum_volume_size = FAKE_MIB,
	};
	return 0;
}

FAKE_OP(get_capacity, GET_CAPACITY, BackendCapacityRequest, BackendCapacity)

/* ---- attachments ---- */

static void attach_record(const BackendAttach *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "node_id", r->node_id);
	rec_bool(rec, "read_only", r->read_only);
	rec_access(rec, &r->access);
	rec_map(rec, "context", r->volume_context);
}

static size_t node_attachments(FakeBackend *f, const char *node)
{
	size_t n = 0;

	for (size_t i = 0; i < f->n_volumes; i++)
		for (size_t k = 0; k < f->volumes[i]->n_attachments; k++)
			n += strcmp(f->volumes[i]->attachments[k].node, node) == 0;
	return n;
}

static void attachment_copy(const FakeAttachment *a, bool existed, BackendAttachment *ret)
{
	*ret = (BackendAttachment){
		.device = strdup_or_null(strmap_get(&a->publish_context, "devicePath")),
		.existed = existed,
	};
	strmap_copy(&ret->publish_context, &a->publish_context);
}

static int attach_locked(FakeBackend *f, const BackendAttach *r, BackendAttachment *ret,
			 char **ret_error)
{
	FakeVolume *fv;
	char **node;
	int e;

	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	for (node = f->nodes; *node && strcmp(*node, r->node_id) != 0; node++)
		;
	if (!*node)
		return errorf(ret_error, -ENOENT, "node_id: node %s not found", r->node_id);
	for (size_t i = 0; i < fv->n_attachments; i++) {
		const FakeAttachment *a = &fv->attachments[i];
		if (strcmp(a->node, r->node_id) != 0)
			continue;
		if (a->read_only != r->read_only)
			return errorf(ret_error, -EEXIST,
				      "volume %s is attached to node %s %s already", r->volume_id,
				      r->node_id, a->read_only ? "read-only" : "read-write");
		attachment_copy(a, true, ret);
		return 0;
	}
	if (fv->n_attachments > 0 && !r->access.multi_node)
		return errorf(ret_error, -ENOTEMPTY, "volume %s is attached to node %s already",
			      r->volume_id, fv->attachments[0].node);
	if (f->max_per_node && node_attachments(f, r->node_id) >= f->max_per_node)
		return errorf(ret_error, -EMLINK, "node %s has %u volumes attached, its limit",
			      r->node_id, f->max_per_node);
	_cleanup_free_ char *device = xasprintf("/dev/fake%u", ++f->serial);
	fv->attachments =
		xrealloc(fv->attachments, (fv->n_attachments + 1) * sizeof(FakeAttachment));
	FakeAttachment *a = &fv->attachments[fv->n_attachments++];
	*a = (FakeAttachment){.node = xstrdup(r->node_id), .read_only = r->read_only};
	strmap_set(&a->publish_context, "devicePath", device);
	attachment_copy(a, false, ret);
	return 0;
}

FAKE_OP(attach, ATTACH, BackendAttach, BackendAttachment)

static void detach_record(const BackendDetach *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "node_id", r->node_id);
}

static int detach_locked(FakeBackend *f, const BackendDetach *r, BackendDetached *ret,
			 char **ret_error)
{
	FakeVolume *fv = volume_find(f, r->volume_id, NULL);
	BackendDetached gone = {};

	(void)ret_error;
	for (size_t i = 0; fv && i < fv->n_attachments;) {
		FakeAttachment *a = &fv->attachments[i];
		if (r->node_id && *r->node_id && strcmp(a->node, r->node_id) != 0) {
			i++;
			continue;
		}
		strv_append(&gone.nodes, xstrdup(a->node));
		strv_append(&gone.devices,
			    xstrdup(strmap_get(&a->publish_context, "devicePath") ?: ""));
		attachment_done(a);
		*a = fv->attachments[--fv->n_attachments];
	}
	*ret = gone;
	return 0;
}

FAKE_OP(detach, DETACH, BackendDetach, BackendDetached)

static void change_volume_record(const BackendChange *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_u64(rec, "new_size", r->new_size);
	rec_u64(rec, "n_callers", r->n_callers);
	for (size_t i = 0; i < r->n_params; i++) {
		_cleanup_free_ char *key = xasprintf("params.%s", r->params[i].key);
		strmap_set(rec, key, r->params[i].value);
	}
}

static int change_volume_locked(FakeBackend *f, const BackendChange *r, BackendChanged *ret,
				char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	FakeVolume *fv;
	int e;

	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	uint64_t size = MAX(fv->v.size, r->new_size);
	if (r->new_size && r->new_size < fv->v.size)
		return errorf(ret_error, -ERANGE, "volume %s: %llu bytes is less than its %llu",
			      r->volume_id, (unsigned long long)r->new_size,
			      (unsigned long long)fv->v.size);
	if (used_bytes(f) - fv->v.size + size > f->capacity)
		return errorf(ret_error, -ENOSPC, "volume %s: %llu bytes do not fit", r->volume_id,
			      (unsigned long long)size);
	if (r->n_params > 0) {
		VolumeParams next;
		if (volume_params_modify(&fv->v.params, size, r->params, r->n_params, &next, &err) <
		    0)
			return errorf(ret_error, -EINVAL, "mutable_parameters: %s", err);
		volume_params_done(&fv->v.params);
		fv->v.params = next;
	}
	*ret = (BackendChanged){
		.size = size,
		.node_expansion_required = size > fv->v.size,
	};
	fv->v.size = size;
	return 0;
}

FAKE_OP(change_volume, CHANGE_VOLUME, BackendChange, BackendChanged)

/* ---- snapshots and groups ---- */

static void create_snapshot_record(const BackendCreateSnapshot *r, Strmap *rec)
{
	rec_str(rec, "name", r->name);
	rec_str(rec, "source_volume_id", r->source_volume_id);
	rec_map(rec, "params", r->params);
}

static int create_snapshot_locked(FakeBackend *f, const BackendCreateSnapshot *r,
				  BackendSnapshot *ret, char **ret_error)
{
	BackendSnapshot *s = snapshot_find(f, NULL, r->name);
	FakeVolume *fv;
	int e;

	if (s) {
		snapshot_copy(s, ret);
		return -EEXIST;
	}
	if ((e = volume_sound(f, "source_volume_id", r->source_volume_id, &fv, ret_error)) < 0)
		return e;
	_cleanup_free_ char *id = xasprintf("%s-snap-%u", f->name, ++f->serial);
	s = snapshot_new(f, id, r->name, r->source_volume_id, fv->v.size);
	strmap_copy(&s->params, r->params);
	snapshot_copy(s, ret);
	ret->copy_method = "fake copy";
	return 0;
}

FAKE_OP(create_snapshot, CREATE_SNAPSHOT, BackendCreateSnapshot, BackendSnapshot)

static int delete_snapshot_locked(FakeBackend *f, const BackendRef *r, BackendDeleted *ret,
				  char **ret_error)
{
	BackendSnapshot *s = snapshot_find(f, r->id, NULL);

	if (!s) {
		*ret = (BackendDeleted){};
		return 0;
	}
	if (*s->group_id)
		return errorf(ret_error, -ENOTEMPTY,
			      "snapshot %s is a member of group snapshot %s: delete the group",
			      r->id, s->group_id);
	*ret = (BackendDeleted){.found = true, .name = xstrdup(s->name)};
	snapshot_remove(f, r->id);
	return 0;
}

FAKE_OP(delete_snapshot, DELETE_SNAPSHOT, BackendRef, BackendDeleted)

static int get_snapshot_locked(FakeBackend *f, const BackendRef *r, BackendSnapshot *ret,
			       char **ret_error)
{
	BackendSnapshot *s = snapshot_find(f, r->id, NULL);

	if (!s)
		return errorf(ret_error, -ENOENT, "snapshot_id: snapshot %s not found", r->id);
	snapshot_copy(s, ret);
	return 0;
}

FAKE_OP(get_snapshot, GET_SNAPSHOT, BackendRef, BackendSnapshot)

static bool snapshot_listed(const BackendSnapshot *s, const BackendListRequest *r)
{
	if (r->source_volume_id && *r->source_volume_id &&
	    strcmp(s->source_volume_id, r->source_volume_id) != 0)
		return false;
	return !r->snapshot_id || !*r->snapshot_id || strcmp(s->id, r->snapshot_id) == 0;
}

static int list_snapshots_locked(FakeBackend *f, const BackendListRequest *r,
				 BackendSnapshotList *ret, char **ret_error)
{
	BackendSnapshotList l = {};
	BackendSnapshot **match = xnew0(BackendSnapshot *, f->n_snapshots);
	size_t n = 0, i;

	for (size_t k = 0; k < f->n_snapshots; k++)
		if (snapshot_listed(f->snapshots[k], r))
			match[n++] = f->snapshots[k];
	if (page_start(f, r->starting_token, n, &i) < 0) {
		free(match);
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListSnapshots gave",
			      r->starting_token);
	}
	size_t max = page_size(f, r->max_entries);
	l.snapshots = xnew0(BackendSnapshot, n);
	for (; i < n && l.n_snapshots < max; i++)
		snapshot_copy(match[i], &l.snapshots[l.n_snapshots++]);
	l.next_token = page_token(f, i, n);
	free(match);
	*ret = l;
	return 0;
}

FAKE_OP(list_snapshots, LIST_SNAPSHOTS, BackendListRequest, BackendSnapshotList)

static void create_group_record(const BackendCreateGroup *r, Strmap *rec)
{
	rec_str(rec, "name", r->name);
	rec_list(rec, "volume_ids", r->volume_ids, r->n_volume_ids);
	rec_map(rec, "params", r->params);
	rec_str(rec, "location", r->location);
}

static int create_group_locked(FakeBackend *f, const BackendCreateGroup *r, BackendGroup *ret,
			       char **ret_error)
{
	BackendGroup *g = group_find(f, NULL, r->name);
	FakeVolume *fv;
	int e;

	if (g) {
		group_copy(f, g, ret);
		return -EEXIST;
	}
	for (size_t i = 0; i < r->n_volume_ids; i++)
		if ((e = volume_sound(f, "source_volume_ids", r->volume_ids[i], &fv, ret_error)) <
		    0)
			return e;
	g = xnew0(BackendGroup, 1);
	g->id = xasprintf("%s-group-%u", f->name, ++f->serial);
	g->name = xstrdup(r->name);
	g->created_ns = next_time(f);
	g->ready = true;
	g->snapshots = xnew0(BackendSnapshot, r->n_volume_ids);
	for (size_t i = 0; i < r->n_volume_ids; i++) {
		_cleanup_free_ char *id = xasprintf("%s-snap-%u", f->name, ++f->serial);
		_cleanup_free_ char *name = xasprintf("%s-%zu", r->name, i);
		fv = volume_find_sound(f, r->volume_ids[i]);
		BackendSnapshot *s = snapshot_new(f, id, name, r->volume_ids[i], fv->v.size);
		s->created_ns = g->created_ns;
		free(s->group_id);
		s->group_id = xstrdup(g->id);
		strmap_copy(&s->params, r->params);
		snapshot_copy(s, &g->snapshots[g->n_snapshots++]);
	}
	f->groups = xrealloc(f->groups, (f->n_groups + 1) * sizeof(BackendGroup *));
	f->groups[f->n_groups++] = g;
	group_copy(f, g, ret);
	return 0;
}

FAKE_OP(create_group, CREATE_GROUP, BackendCreateGroup, BackendGroup)

static void group_record(const BackendGroupRequest *r, Strmap *rec)
{
	rec_str(rec, "id", r->id);
	rec_list(rec, "snapshot_ids", r->snapshot_ids, r->n_snapshot_ids);
}

#define delete_group_record group_record
#define get_group_record group_record

static int delete_group_locked(FakeBackend *f, const BackendGroupRequest *r, BackendDeleted *ret,
			       char **ret_error)
{
	for (size_t i = 0; i < f->n_groups; i++) {
		BackendGroup *g = f->groups[i];
		int e;
		if (strcmp(g->id, r->id) != 0)
			continue;
		if ((e = members_check(g, r, ret_error)) < 0)
			return e;
		*ret = (BackendDeleted){
			.found = true,
			.name = xstrdup(g->name),
			.n_members = g->n_snapshots,
		};
		for (size_t k = 0; k < g->n_snapshots; k++)
			snapshot_remove(f, g->snapshots[k].id);
		backend_group_done(g);
		free(g);
		f->groups[i] = f->groups[--f->n_groups];
		return 0;
	}
	*ret = (BackendDeleted){};
	return 0;
}

FAKE_OP(delete_group, DELETE_GROUP, BackendGroupRequest, BackendDeleted)

static int get_group_locked(FakeBackend *f, const BackendGroupRequest *r, BackendGroup *ret,
			    char **ret_error)
{
	BackendGroup *g = group_find(f, r->id, NULL);
	int e;

	if (!g)
		return errorf(ret_error, -ENOENT, "group_snapshot_id: group snapshot %s not found",
			      r->id);
	if ((e = members_check(g, r, ret_error)) < 0)
		return e;
	group_copy(f, g, ret);
	return 0;
}

FAKE_OP(get_group, GET_GROUP, BackendGroupRequest, BackendGroup)

/* ---- the node service ---- */

static void stage_record(const BackendStage *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "staging_path", r->staging_path);
	rec_access(rec, &r->access);
	rec_list(rec, "mount_flags", r->mount_flags, r->n_mount_flags);
	rec_map(rec, "context", r->volume_context);
	rec_map(rec, "publish_context", r->publish_context);
	rec_map(rec, "secrets", r->secrets);
}

static int stage_locked(FakeBackend *f, const BackendStage *r, void *ret, char **ret_error)
{
	FakeVolume *fv;
	int e;

	(void)ret;
	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	const FakeMount *m = mount_find(f, r->volume_id, NULL, true);
	if (m && strcmp(m->path, r->staging_path) != 0)
		return errorf(ret_error, -EEXIST, "volume %s is staged at %s already", r->volume_id,
			      m->path);
	if (!m)
		mount_add(f, r->volume_id, r->staging_path, true, r->access.block, false);
	return 0;
}

FAKE_OP(stage, STAGE, BackendStage, void)

static void unstage_record(const BackendUnstage *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "staging_path", r->staging_path);
}

static int unstage_locked(FakeBackend *f, const BackendUnstage *r, void *ret, char **ret_error)
{
	FakeMount *m = mount_find(f, r->volume_id, r->staging_path, true);

	(void)ret;
	(void)ret_error;
	if (m)
		mount_remove(f, m);
	return 0;
}

FAKE_OP(unstage, UNSTAGE, BackendUnstage, void)

static void publish_record(const BackendPublish *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "staging_path", r->staging_path);
	rec_str(rec, "target_path", r->target_path);
	rec_access(rec, &r->access);
	rec_bool(rec, "read_only", r->read_only);
	rec_list(rec, "mount_flags", r->mount_flags, r->n_mount_flags);
	if (r->group == (gid_t)-1)
		strmap_set(rec, "group", "none");
	else
		rec_u64(rec, "group", r->group);
	rec_map(rec, "context", r->volume_context);
	rec_map(rec, "publish_context", r->publish_context);
	rec_map(rec, "secrets", r->secrets);
	rec_bool(rec, "prepare", r->prepare != NULL);
}

/* What a backend does with a new mount before the pod sees it. */
static int publish_prepare(FakeBackend *f, const BackendPublish *r, char **ret_error)
{
	_cleanup_close_ int fd = -EBADF;

	if (!r->prepare || !f->prepare_dir)
		return 0;
	fd = open(f->prepare_dir, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errorf(ret_error, negative_errno(), "target_path: %s: %s", f->prepare_dir,
			      strerror(errno));
	return r->prepare(fd, r->read_only, f->prepare_policy, r->userdata, ret_error);
}

static int publish_locked(FakeBackend *f, const BackendPublish *r, void *ret, char **ret_error)
{
	FakeVolume *fv;
	int e;

	(void)ret;
	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	const FakeMount *m = mount_find(f, r->volume_id, r->target_path, false);
	if (m && m->read_only != r->read_only)
		return errorf(ret_error, -EEXIST,
			      "volume %s is published at %s with another read-only state",
			      r->volume_id, r->target_path);
	if (m)
		return 0;
	if ((e = publish_prepare(f, r, ret_error)) < 0)
		return e;
	mount_add(f, r->volume_id, r->target_path, false, r->access.block, r->read_only);
	return 0;
}

FAKE_OP(publish, PUBLISH, BackendPublish, void)

static void unpublish_record(const BackendUnpublish *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "target_path", r->target_path);
}

static int unpublish_locked(FakeBackend *f, const BackendUnpublish *r, void *ret, char **ret_error)
{
	FakeMount *m = mount_find(f, r->volume_id, r->target_path, false);

	(void)ret;
	(void)ret_error;
	if (m)
		mount_remove(f, m);
	return 0;
}

FAKE_OP(unpublish, UNPUBLISH, BackendUnpublish, void)

static void node_expand_record(const BackendNodeExpand *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "volume_path", r->volume_path);
	rec_str(rec, "staging_path", r->staging_path);
	rec_u64(rec, "required", r->required);
	rec_u64(rec, "limit", r->limit);
	rec_bool(rec, "grow", r->grow);
	if (r->access)
		rec_access(rec, r->access);
}

static int node_expand_locked(FakeBackend *f, const BackendNodeExpand *r, BackendNodeExpanded *ret,
			      char **ret_error)
{
	FakeVolume *fv;
	int e;

	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	*ret = (BackendNodeExpanded){.size = MAX(fv->v.size, r->required)};
	return 0;
}

FAKE_OP(node_expand, NODE_EXPAND, BackendNodeExpand, BackendNodeExpanded)

static void node_stats_record(const BackendStatsRequest *r, Strmap *rec)
{
	rec_str(rec, "volume_id", r->volume_id);
	rec_str(rec, "volume_path", r->volume_path);
	rec_str(rec, "staging_path", r->staging_path);
}

/* Usage where the volume is published; abnormal where it is not, or when the volume is. */
static int node_stats_locked(FakeBackend *f, const BackendStatsRequest *r, BackendStats *ret,
			     char **ret_error)
{
	BackendStats s = {};
	FakeVolume *fv;
	int e;

	if ((e = volume_sound(f, "volume_id", r->volume_id, &fv, ret_error)) < 0)
		return e;
	const FakeMount *m = mount_find(f, r->volume_id, r->volume_path, false);
	if (!m) {
		s.abnormal = true;
		s.condition =
			xasprintf("volume %s is not mounted at %s", r->volume_id, r->volume_path);
	} else if (m->block) {
		s.block = true;
		s.fs.bytes_total = fv->v.size;
	} else {
		s.has_usage = true;
		s.fs = f->stats;
	}
	if (m && fv->v.abnormal) {
		s.abnormal = true;
		s.condition = strdup_or_null(fv->v.condition);
	}
	*ret = s;
	return 0;
}

FAKE_OP(node_stats, NODE_STATS, BackendStatsRequest, BackendStats)

static void node_info_record(const void *r, Strmap *rec)
{
	(void)r;
	(void)rec;
}

static int node_info_locked(FakeBackend *f, const void *r, BackendNodeInfo *ret, char **ret_error)
{
	(void)r;
	(void)ret_error;
	*ret = (BackendNodeInfo){.max_volumes = f->max_per_node};
	strmap_set(&ret->topology, BACKEND_TOPOLOGY_ZONE, f->zone);
	return 0;
}

FAKE_OP(node_info, NODE_INFO, void, BackendNodeInfo)

/* ---- the backend ---- */

static bool claims_op(Backend *b, const char *volume_id, const Strmap *volume_context)
{
	FakeBackend *f = fake_of(b);
	const char *named =
		volume_context ? strmap_get(volume_context, FAKE_CONTEXT_BACKEND) : NULL;

	if (named)
		return strcmp(named, f->name) == 0;
	return volume_id && strncmp(volume_id, f->claim_prefix, strlen(f->claim_prefix)) == 0;
}

static void status_record(const void *r, Strmap *rec)
{
	(void)r;
	(void)rec;
}

/* Its objects, and the node records of its node service. */
static int status_locked(FakeBackend *f, const void *r, BackendStatus *ret, char **ret_error)
{
	BackendStatus s = {.volumes = (int64_t)f->n_volumes, .snapshots = (int64_t)f->n_snapshots};

	(void)r;
	(void)ret_error;
	for (size_t i = 0; i < f->n_mounts; i++) {
		s.staged += f->mounts[i].staged;
		s.published += !f->mounts[i].staged;
	}
	*ret = s;
	return 0;
}

FAKE_OP(status, STATUS, void, BackendStatus)

static void fake_free(Backend *b)
{
	FakeBackend *f = fake_of(b);

	for (size_t i = 0; i < f->n_volumes; i++)
		volume_free(f->volumes[i]);
	free(f->volumes);
	for (size_t i = 0; i < f->n_snapshots; i++) {
		backend_snapshot_done(f->snapshots[i]);
		free(f->snapshots[i]);
	}
	free(f->snapshots);
	for (size_t i = 0; i < f->n_groups; i++) {
		backend_group_done(f->groups[i]);
		free(f->groups[i]);
	}
	free(f->groups);
	for (size_t i = 0; i < f->n_mounts; i++) {
		free(f->mounts[i].volume_id);
		free(f->mounts[i].path);
	}
	free(f->mounts);
	for (int op = 0; op < _FAKE_OP_MAX; op++) {
		strmap_done(&f->last[op]);
		free(f->fail_message[op]);
	}
	strv_free(f->nodes);
	pthread_cond_destroy(&f->changed);
	pthread_mutex_destroy(&f->lock);
	free(f->name);
	free(f->claim_prefix);
	free(f);
}

#define FAKE_OP_SET(NAME, field) f->ops.field = field##_op;

FakeBackend *fake_backend_new(const char *name, const char *claim_prefix)
{
	FakeBackend *f = xnew0(FakeBackend, 1);

	f->name = xstrdup(name);
	f->ops = (BackendOps){
		.name = f->name,
		.claims = claim_prefix ? claims_op : NULL,
		.free = fake_free,
	};
	FAKE_OPS(FAKE_OP_SET)
	f->base.ops = &f->ops;
	f->claim_prefix = strdup_or_null(claim_prefix);
	f->capacity = 100 * FAKE_GIB;
	f->zone = "zone-a";
	f->page_default = 100;
	f->clock_ns = 1700000000LL * 1000000000LL + 123456789;
	for (int i = 1; i <= 3; i++)
		strv_append(&f->nodes, xasprintf("node-%d", i));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->changed, NULL);
	return f;
}

/* ---- knobs ---- */

void fake_fail(FakeBackend *f, FakeOp op, int err, const char *message)
{
	pthread_mutex_lock(&f->lock);
	f->fail[op] = err;
	free(f->fail_message[op]);
	f->fail_message[op] = strdup_or_null(message);
	pthread_mutex_unlock(&f->lock);
}

#define FAKE_OP_DROP(NAME, field)    \
	case FAKE_##NAME:            \
		f->ops.field = NULL; \
		break;

void fake_drop(FakeBackend *f, FakeOp op)
{
	switch (op) {
		FAKE_OPS(FAKE_OP_DROP)
	default:
		break;
	}
}

void fake_hold(FakeBackend *f, FakeOp op)
{
	pthread_mutex_lock(&f->lock);
	f->hold[op] = true;
	pthread_mutex_unlock(&f->lock);
}

void fake_wait_held(FakeBackend *f, FakeOp op)
{
	pthread_mutex_lock(&f->lock);
	while (!f->held[op])
		pthread_cond_wait(&f->changed, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

void fake_release(FakeBackend *f, FakeOp op)
{
	pthread_mutex_lock(&f->lock);
	f->held[op] = false;
	pthread_cond_broadcast(&f->changed);
	pthread_mutex_unlock(&f->lock);
}

unsigned fake_calls(FakeBackend *f, FakeOp op)
{
	pthread_mutex_lock(&f->lock);
	unsigned n = f->calls[op];
	pthread_mutex_unlock(&f->lock);
	return n;
}

const char *fake_last(FakeBackend *f, FakeOp op, const char *key)
{
	pthread_mutex_lock(&f->lock);
	const char *v = strmap_get(&f->last[op], key);
	pthread_mutex_unlock(&f->lock);
	return v;
}

void fake_forget_calls(FakeBackend *f)
{
	pthread_mutex_lock(&f->lock);
	for (int op = 0; op < _FAKE_OP_MAX; op++) {
		f->calls[op] = 0;
		strmap_done(&f->last[op]);
	}
	pthread_mutex_unlock(&f->lock);
}

/* ---- seeds ---- */

FakeVolume *fake_add_volume(FakeBackend *f, const char *id, const char *name, uint64_t size)
{
	pthread_mutex_lock(&f->lock);
	FakeVolume *fv = volume_new(f, id, name, size);
	(void)volume_params_parse(NULL, 0, size, &fv->v.params, NULL);
	pthread_mutex_unlock(&f->lock);
	return fv;
}

BackendSnapshot *fake_add_snapshot(FakeBackend *f, const char *id, const char *name,
				   const char *source, uint64_t size)
{
	pthread_mutex_lock(&f->lock);
	BackendSnapshot *s = snapshot_new(f, id, name, source, size);
	pthread_mutex_unlock(&f->lock);
	return s;
}

void fake_lose_snapshot(FakeBackend *f, const char *id)
{
	pthread_mutex_lock(&f->lock);
	snapshot_remove(f, id);
	pthread_mutex_unlock(&f->lock);
}

FakeVolume *fake_volume(FakeBackend *f, const char *id)
{
	pthread_mutex_lock(&f->lock);
	FakeVolume *fv = volume_find(f, id, NULL);
	pthread_mutex_unlock(&f->lock);
	return fv;
}

FakeMount *fake_mount(FakeBackend *f, const char *volume_id, const char *path, bool staged)
{
	pthread_mutex_lock(&f->lock);
	FakeMount *m = mount_find(f, volume_id, path, staged);
	pthread_mutex_unlock(&f->lock);
	return m;
}
