/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "strv.h"

/* The backends volplugd can run: a new one is a folder under src/backend, defining
 * BACKEND_NEW(name), and its name in this list. */
#define BACKEND_TYPES(X) X(pool) X(flex) X(ebs)

#define DECLARE(name) BACKEND_NEW(name);
BACKEND_TYPES(DECLARE)

#define ENTRY(name) {#name, name##_backend_new},
static const struct {
	const char *name;
	int (*new)(const BackendConfig *config, Backend **ret, char **ret_error);
} backend_types[] = {BACKEND_TYPES(ENTRY)};

int backends_new(char *const *names, const BackendConfig *config, Backend ***ret, char **ret_error)
{
	size_t n = strv_length(names);
	Backend **list = xnew0(Backend *, n + 1);

	for (size_t i = 0; i < n; i++) {
		int (*make)(const BackendConfig *, Backend **, char **) = NULL;
		for (size_t k = 0; k < ELEMENTSOF(backend_types); k++)
			if (strcmp(backend_types[k].name, names[i]) == 0)
				make = backend_types[k].new;
		int r = make ? make(config, &list[i], ret_error) : -EINVAL;
		if (r < 0) {
			if (!make)
				*ret_error = xasprintf("backend '%s' is not one of this build",
						       names[i]);
			backends_free(list);
			return r;
		}
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
