/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "error-util.h"
#include "strv.h"

const BackendType *backend_type_find(const char *name)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(types[i]->name, name) == 0)
			return types[i];
	return NULL;
}

const BackendType *backend_type_default(void)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);

	for (size_t i = 0; i < n; i++)
		if (types[i]->selectable)
			return types[i];
	return types[0];
}

/* One settings object per type, in backend_types() order (NULL where a type has none). */
struct BackendSettings {
	size_t n;
	void **of;
};

BackendSettings *backend_settings_new(void)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);
	BackendSettings *s = xnew0(BackendSettings, 1);

	s->n = n;
	s->of = xnew0(void *, n);
	for (size_t i = 0; i < n; i++)
		s->of[i] = types[i]->settings_new ? types[i]->settings_new() : NULL;
	return s;
}

BackendSettings *backend_settings_free(BackendSettings *s)
{
	if (!s)
		return NULL;
	const BackendType *const *types = backend_types(&s->n);
	for (size_t i = 0; i < s->n; i++)
		if (s->of[i])
			types[i]->settings_free(s->of[i]);
	free(s->of);
	free(s);
	return NULL;
}

int backend_settings_set(BackendSettings *s, const char *option, const char *value,
			 char **ret_error)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);

	for (size_t i = 0; i < n; i++)
		for (const BackendOption *o = types[i]->options; o && o->name; o++)
			if (strcmp(o->name, option) == 0)
				return types[i]->settings_set(s->of[i], option, value, ret_error);
	return -ENOENT;
}

const void *backend_settings_get(const BackendSettings *s, const char *type)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);

	for (size_t i = 0; s && i < n; i++)
		if (strcmp(types[i]->name, type) == 0)
			return s->of[i];
	return NULL;
}

static int backend_make(const BackendType *t, const BackendConfig *config, const BackendSettings *s,
			const char *state_dir, Backend **ret, char **ret_error)
{
	BackendConfig c = *config;

	c.settings = backend_settings_get(s, t->name);
	c.state_dir = state_dir;
	return t->new (&c, ret, ret_error);
}

int backends_new(const char *name, const BackendConfig *config, const BackendSettings *s,
		 Backend ***ret, char **ret_error)
{
	const BackendType *t = backend_type_find(name);
	size_t n = 1;

	if (!t)
		return errorf(ret_error, -EINVAL, "backend '%s' is not one of this build", name);
	n += strv_length((char **)t->companions);
	Backend **list = xnew0(Backend *, n + 1);
	int r = backend_make(t, config, s, NULL, &list[0], ret_error);
	const char *state =
		r >= 0 && list[0]->ops->state_dir ? list[0]->ops->state_dir(list[0]) : NULL;
	for (size_t i = 1; r >= 0 && i < n; i++) {
		const BackendType *c = backend_type_find(t->companions[i - 1]);
		r = c ? backend_make(c, config, s, state, &list[i], ret_error)
		      : errorf(ret_error, -EINVAL, "backend '%s' is not one of this build",
			       t->companions[i - 1]);
	}
	if (r < 0) {
		backends_free(list);
		return r;
	}
	*ret = list;
	return 0;
}

void backends_free(Backend **backends)
{
	if (!backends)
		return;
	for (Backend **b = backends; *b; b++)
		(*b)->ops->free(*b);
	free(backends);
}

Backend *backend_default(Backend **backends)
{
	return backends[0];
}

uint64_t backend_size_unit(const Backend *b)
{
	return b->ops->size_unit ?: UINT64_C(1) << 20;
}

uint64_t backend_default_size(const Backend *b)
{
	return b->ops->default_size ?: UINT64_C(1) << 30;
}

BackendTopologyFit backend_topology_fit(const BackendTopology *ours, const BackendTopology *t,
					const char **ret_key)
{
	const char *unknown = NULL;

	for (size_t i = 0; i < t->n; i++) {
		const char *want = strmap_get(ours, t->keys[i]);
		if (!want && strcmp(t->keys[i], BACKEND_TOPOLOGY_K8S_ZONE) == 0)
			want = strmap_get(ours, BACKEND_TOPOLOGY_ZONE);
		if (!want) {
			unknown = unknown ?: t->keys[i];
			continue;
		}
		if (strcmp(want, t->values[i]) != 0) {
			*ret_key = t->keys[i];
			return BACKEND_TOPOLOGY_ELSEWHERE;
		}
	}
	if (unknown) {
		*ret_key = unknown;
		return BACKEND_TOPOLOGY_UNKNOWN_KEY;
	}
	return BACKEND_TOPOLOGY_FITS;
}

Backend *backend_for_volume(Backend **backends, const char *volume_id, const Strmap *volume_context)
{
	for (Backend **b = backends + 1; *b; b++)
		if ((*b)->ops->claims && (*b)->ops->claims(*b, volume_id, volume_context))
			return *b;
	return backends[0];
}

void backend_volume_done(BackendVolume *v)
{
	if (!v)
		return;
	free(v->id);
	free(v->name);
	volume_params_done(&v->params);
	strmap_done(&v->context);
	free(v->source_kind);
	free(v->source_id);
	free(v->access_mode);
	strmap_done(&v->topology);
	strv_free(v->published_nodes);
	free(v->condition);
	free(v->damage);
	*v = (BackendVolume){};
}

void backend_snapshot_done(BackendSnapshot *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	free(s->source_volume_id);
	free(s->group_id);
	strmap_done(&s->params);
	*s = (BackendSnapshot){};
}

void backend_group_done(BackendGroup *g)
{
	if (!g)
		return;
	free(g->id);
	free(g->name);
	for (size_t i = 0; i < g->n_snapshots; i++)
		backend_snapshot_done(&g->snapshots[i]);
	free(g->snapshots);
	*g = (BackendGroup){};
}

void backend_deleted_done(BackendDeleted *d)
{
	free(d->name);
	free(d->leftover);
	*d = (BackendDeleted){};
}

void backend_attachment_done(BackendAttachment *a)
{
	strmap_done(&a->publish_context);
	free(a->device);
	*a = (BackendAttachment){};
}

void backend_detached_done(BackendDetached *d)
{
	strv_free(d->nodes);
	strv_free(d->devices);
	*d = (BackendDetached){};
}

void backend_volume_list_done(BackendVolumeList *l)
{
	for (size_t i = 0; i < l->n_volumes; i++)
		backend_volume_done(&l->volumes[i]);
	free(l->volumes);
	free(l->next_token);
	*l = (BackendVolumeList){};
}

void backend_snapshot_list_done(BackendSnapshotList *l)
{
	for (size_t i = 0; i < l->n_snapshots; i++)
		backend_snapshot_done(&l->snapshots[i]);
	free(l->snapshots);
	free(l->next_token);
	*l = (BackendSnapshotList){};
}

void backend_stats_done(BackendStats *s)
{
	free(s->condition);
	*s = (BackendStats){};
}

void backend_status_done(BackendStatus *s)
{
	free(s->path);
	*s = (BackendStatus){};
}
