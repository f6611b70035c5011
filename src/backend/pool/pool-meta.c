/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's metadata files: JSON, one object per volume, snapshot or node. Parsing is
 * strict: a file that does not parse, or lacks a required field, is damage (pool check
 * reports it) and never half-loaded. */
#include <string.h>

#include "alloc.h"
#include "meta-json.h"
#include "pool-meta.h"
#include "strv.h"

#define META_FORMAT 1

/* A string that came in a request: JSON holds only UTF-8, and jansson would leave the member
 * out (a record without its name). *bad is set instead, and the record is not written. */
static json_t *str(const char *s, bool *bad)
{
	json_t *j = json_string(s ?: "");
	if (!j) {
		*bad = true;
		j = json_null();
	}
	return j;
}

static json_t *strmap_to_json(const Strmap *m, bool *bad)
{
	json_t *o = json_object();
	for (size_t i = 0; i < m->n; i++)
		if (json_object_set_new(o, m->keys[i], str(m->values[i], bad)) < 0)
			*bad = true; /* the key is not UTF-8 */
	return o;
}

/* o as text, or NULL when a string in it was not UTF-8. */
static char *dump_checked(json_t *o, bool bad, size_t *ret_len)
{
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return meta_json_dump(o, ret_len);
}

static int strmap_from_json(json_t *o, Strmap *m)
{
	const char *k;
	json_t *v;

	if (!o)
		return 0;
	if (!json_is_object(o))
		return -EBADMSG;
	json_object_foreach (o, k, v) {
		if (!json_is_string(v))
			return -EBADMSG;
		strmap_set(m, k, json_string_value(v));
	}
	return 0;
}

/* The node part of an object's ID: only written when it has one (pool-ids.c). */
static void node_to_json(json_t *o, const char *node)
{
	if (node && *node)
		json_object_set_new(o, "node", json_string(node));
}

static char *node_from_json(json_t *o)
{
	const char *node = meta_json_string(o, "node");
	return node && *node ? xstrdup(node) : NULL;
}

char *pool_volume_to_json(const PoolVolume *v, size_t *ret_len)
{
	json_t *o = json_object(), *att = json_array();
	bool bad = false;

	json_object_set_new(o, "format", json_integer(META_FORMAT));
	json_object_set_new(o, "id", str(v->id, &bad));
	json_object_set_new(o, "name", str(v->name, &bad));
	json_object_set_new(o, "size", json_integer((json_int_t)v->size));
	json_object_set_new(o, "created_ns", json_integer(v->created_ns));
	json_object_set_new(o, "params", strmap_to_json(&v->params, &bad));
	json_object_set_new(o, "context", strmap_to_json(&v->context, &bad));
	json_object_set_new(o, "source_kind", str(v->source_kind ?: "", &bad));
	json_object_set_new(o, "source_id", str(v->source_id ?: "", &bad));
	json_object_set_new(o, "access_mode", str(v->access_mode ?: "", &bad));
	node_to_json(o, v->node);
	if (v->directory) {
		json_object_set_new(o, "kind", json_string("directory"));
		json_object_set_new(o, "project", json_integer(v->project));
	}
	for (size_t i = 0; i < v->n_attachments; i++) {
		json_t *a = json_object();
		json_object_set_new(a, "node", str(v->attachments[i].node, &bad));
		json_object_set_new(a, "device", str(v->attachments[i].device, &bad));
		json_object_set_new(a, "readonly", json_boolean(v->attachments[i].readonly));
		json_array_append_new(att, a);
	}
	json_object_set_new(o, "attachments", att);
	return dump_checked(o, bad, ret_len);
}

static int attachments_from_json(json_t *arr, PoolVolume *v)
{
	size_t i;
	json_t *a;

	if (!json_is_array(arr))
		return -EBADMSG;
	v->attachments = xnew0(PoolAttachment, json_array_size(arr));
	json_array_foreach (arr, i, a) {
		const char *node = meta_json_string(a, "node"),
			   *dev = meta_json_string(a, "device");
		if (!node || !dev)
			return -EBADMSG;
		v->attachments[i].node = xstrdup(node);
		v->attachments[i].device = xstrdup(dev);
		v->attachments[i].readonly = json_is_true(json_object_get(a, "readonly"));
		v->n_attachments++;
	}
	return 0;
}

static int volume_fields(json_t *o, PoolVolume *v)
{
	uint64_t u;
	const char *id = meta_json_string(o, "id"), *name = meta_json_string(o, "name");
	json_t *created = json_object_get(o, "created_ns");

	if (!id || !name || strlen(id) >= POOL_ID_MAX || !json_is_integer(created))
		return -EBADMSG;
	if (meta_json_u64(o, "format", &u) < 0 || u != META_FORMAT)
		return -EBADMSG;
	strcpy(v->id, id);
	v->name = xstrdup(name);
	v->created_ns = json_integer_value(created);
	if (meta_json_u64(o, "size", &v->size) < 0)
		return -EBADMSG;
	v->source_kind = xstrdup(meta_json_string(o, "source_kind") ?: "");
	v->source_id = xstrdup(meta_json_string(o, "source_id") ?: "");
	v->access_mode = xstrdup(meta_json_string(o, "access_mode") ?: "");
	v->node = node_from_json(o);
	const char *kind = meta_json_string(o, "kind");
	if (kind && strcmp(kind, "directory") != 0)
		return -EBADMSG;
	if (kind) {
		/* a project ID of 0 is every file's that has none: never a volume's */
		if (meta_json_u64(o, "project", &u) < 0 || u == 0 || u > UINT32_MAX)
			return -EBADMSG;
		v->directory = true;
		v->project = (uint32_t)u;
	}
	if (strmap_from_json(json_object_get(o, "params"), &v->params) < 0 ||
	    strmap_from_json(json_object_get(o, "context"), &v->context) < 0)
		return -EBADMSG;
	return attachments_from_json(json_object_get(o, "attachments"), v);
}

int pool_volume_from_json(const char *text, size_t len, PoolVolume **ret)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	PoolVolume *v = xnew0(PoolVolume, 1);
	int r = volume_fields(o, v);
	json_decref(o);
	if (r < 0) {
		pool_volume_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

char *pool_snapshot_to_json(const PoolSnapshot *s, size_t *ret_len)
{
	json_t *o = json_object();
	bool bad = false;

	json_object_set_new(o, "format", json_integer(META_FORMAT));
	json_object_set_new(o, "id", str(s->id, &bad));
	json_object_set_new(o, "name", str(s->name, &bad));
	json_object_set_new(o, "source_volume_id", str(s->source_volume_id, &bad));
	json_object_set_new(o, "size", json_integer((json_int_t)s->size));
	json_object_set_new(o, "created_ns", json_integer(s->created_ns));
	json_object_set_new(o, "params", strmap_to_json(&s->params, &bad));
	node_to_json(o, s->node);
	if (s->directory)
		json_object_set_new(o, "kind", json_string("directory"));
	return dump_checked(o, bad, ret_len);
}

static int snapshot_fields(json_t *o, PoolSnapshot *s)
{
	uint64_t u;
	const char *id = meta_json_string(o, "id"), *name = meta_json_string(o, "name"),
		   *src = meta_json_string(o, "source_volume_id");
	json_t *created = json_object_get(o, "created_ns");

	if (!id || !name || !src || strlen(id) >= POOL_ID_MAX || !json_is_integer(created))
		return -EBADMSG;
	if (meta_json_u64(o, "format", &u) < 0 || u != META_FORMAT)
		return -EBADMSG;
	strcpy(s->id, id);
	s->name = xstrdup(name);
	s->source_volume_id = xstrdup(src);
	s->created_ns = json_integer_value(created);
	s->node = node_from_json(o);
	const char *kind = meta_json_string(o, "kind");
	if (kind && strcmp(kind, "directory") != 0)
		return -EBADMSG;
	s->directory = kind != NULL;
	if (meta_json_u64(o, "size", &s->size) < 0)
		return -EBADMSG;
	return strmap_from_json(json_object_get(o, "params"), &s->params);
}

int pool_snapshot_from_json(const char *text, size_t len, PoolSnapshot **ret)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	PoolSnapshot *s = xnew0(PoolSnapshot, 1);
	int r = snapshot_fields(o, s);
	json_decref(o);
	if (r < 0) {
		pool_snapshot_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

char *pool_group_to_json(const PoolGroup *g, size_t *ret_len)
{
	json_t *o = json_object(), *ids = json_array();
	bool bad = false;

	json_object_set_new(o, "format", json_integer(META_FORMAT));
	json_object_set_new(o, "id", str(g->id, &bad));
	json_object_set_new(o, "name", str(g->name, &bad));
	json_object_set_new(o, "created_ns", json_integer(g->created_ns));
	for (size_t i = 0; i < g->n_snapshots; i++)
		json_array_append_new(ids, str(g->snapshot_ids[i], &bad));
	json_object_set_new(o, "snapshot_ids", ids);
	node_to_json(o, g->node);
	return dump_checked(o, bad, ret_len);
}

static int group_fields(json_t *o, PoolGroup *g)
{
	uint64_t u;
	const char *id = meta_json_string(o, "id"), *name = meta_json_string(o, "name");
	json_t *created = json_object_get(o, "created_ns"),
	       *ids = json_object_get(o, "snapshot_ids");
	size_t i;
	json_t *v;

	if (!id || !name || strlen(id) >= POOL_ID_MAX || !json_is_integer(created) ||
	    !json_is_array(ids))
		return -EBADMSG;
	if (meta_json_u64(o, "format", &u) < 0 || u != META_FORMAT)
		return -EBADMSG;
	strcpy(g->id, id);
	g->name = xstrdup(name);
	g->created_ns = json_integer_value(created);
	g->node = node_from_json(o);
	g->snapshot_ids = xnew0(char *, json_array_size(ids) + 1);
	json_array_foreach (ids, i, v) {
		if (!json_is_string(v))
			return -EBADMSG;
		g->snapshot_ids[g->n_snapshots++] = xstrdup(json_string_value(v));
	}
	return 0;
}

int pool_group_from_json(const char *text, size_t len, PoolGroup **ret)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	PoolGroup *g = xnew0(PoolGroup, 1);
	int r = group_fields(o, g);
	json_decref(o);
	if (r < 0) {
		pool_group_free(g);
		return r;
	}
	*ret = g;
	return 0;
}

char *pool_node_to_json(const PoolNode *n, size_t *ret_len)
{
	json_t *o = json_object();
	json_object_set_new(o, "format", json_integer(META_FORMAT));
	json_object_set_new(o, "id", json_string(n->id));
	json_object_set_new(o, "max_volumes", json_integer(n->max_volumes));
	json_object_set_new(o, "zone", json_string(n->zone ?: ""));
	return meta_json_dump(o, ret_len);
}

int pool_node_from_json(const char *text, size_t len, PoolNode **ret)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	uint64_t max;
	const char *id = meta_json_string(o, "id");

	if (!json_is_object(o) || !id || meta_json_u64(o, "max_volumes", &max) < 0 ||
	    max > UINT32_MAX) {
		json_decref(o);
		return -EBADMSG;
	}
	PoolNode *n = xnew0(PoolNode, 1);
	n->id = xstrdup(id);
	n->max_volumes = (uint32_t)max;
	n->zone = xstrdup(meta_json_string(o, "zone") ?: "");
	json_decref(o);
	*ret = n;
	return 0;
}

char *pool_node_devices_to_json(const char *node, const PoolNodeDevice *d, size_t n,
				size_t *ret_len)
{
	json_t *o = json_object(), *devices = json_object();

	json_object_set_new(o, "format", json_integer(META_FORMAT));
	json_object_set_new(o, "node", json_string(node));
	for (size_t i = 0; i < n; i++)
		json_object_set_new(devices, d[i].device, json_string(d[i].volume_id));
	json_object_set_new(o, "devices", devices);
	return meta_json_dump(o, ret_len);
}

int pool_node_devices_from_json(const char *text, size_t len, PoolNodeDevice **ret, size_t *ret_n)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *devices = json_object_get(o, "devices"), *v;
	PoolNodeDevice *d = NULL;
	const char *k;
	uint64_t u;
	size_t n = 0;

	if (!json_is_object(o) || meta_json_u64(o, "format", &u) < 0 || u != META_FORMAT ||
	    !json_is_object(devices)) {
		json_decref(o);
		return -EBADMSG;
	}
	d = xnew0(PoolNodeDevice, json_object_size(devices));
	json_object_foreach (devices, k, v) {
		if (!json_is_string(v)) {
			pool_node_devices_free(d, n);
			json_decref(o);
			return -EBADMSG;
		}
		d[n].device = xstrdup(k);
		d[n].volume_id = xstrdup(json_string_value(v));
		n++;
	}
	json_decref(o);
	*ret = d;
	*ret_n = n;
	return 0;
}

/* ---- freeing ---- */

void pool_volume_free(PoolVolume *v)
{
	if (!v)
		return;
	free(v->name);
	strmap_done(&v->params);
	strmap_done(&v->context);
	free(v->source_kind);
	free(v->source_id);
	free(v->access_mode);
	free(v->node);
	for (size_t i = 0; i < v->n_attachments; i++) {
		free(v->attachments[i].node);
		free(v->attachments[i].device);
	}
	free(v->attachments);
	free(v);
}

void pool_volume_freep(PoolVolume **v)
{
	pool_volume_free(*v);
}

void pool_snapshot_free(PoolSnapshot *s)
{
	if (!s)
		return;
	free(s->name);
	free(s->source_volume_id);
	strmap_done(&s->params);
	free(s->node);
	free(s);
}

void pool_snapshot_freep(PoolSnapshot **s)
{
	pool_snapshot_free(*s);
}

void pool_group_free(PoolGroup *g)
{
	if (!g)
		return;
	free(g->name);
	strv_free(g->snapshot_ids);
	free(g->node);
	free(g);
}

void pool_group_freep(PoolGroup **g)
{
	pool_group_free(*g);
}

void pool_node_free(PoolNode *n)
{
	if (!n)
		return;
	free(n->id);
	free(n->zone);
	free(n);
}

void pool_node_devices_free(PoolNodeDevice *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(d[i].device);
		free(d[i].volume_id);
	}
	free(d);
}
