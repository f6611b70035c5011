/* SPDX-License-Identifier: Apache-2.0 */
/* CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ListVolumes, ControllerGetVolume,
 * GetCapacity and ControllerGetCapabilities. */
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"
#include "params.h"

#define LIST_MAX_DEFAULT 1000

int create_name_check(char **ret_error, const char *name)
{
	if (!name || !*name)
		return errorf(ret_error, -EINVAL, "name: missing");
	if (!pool_name_valid(name))
		return errorf(ret_error, -EINVAL,
			      "name: must be 1-%d printable bytes without '/' (got %zu bytes)",
			      POOL_NAME_MAX, strlen(name));
	return 0;
}

int page_token_check(const char *token, bool (*valid)(const char *))
{
	if (!token || !*token)
		return 0;
	return valid(token) ? 1 : -EINVAL;
}

static void kv_to_strmap(const ParamKV *kv, size_t n, Strmap *ret)
{
	for (size_t i = 0; i < n; i++)
		strmap_set(ret, kv[i].key, kv[i].value);
}

Csi__V1__Volume *volume_to_csi(const Driver *d, const PoolVolume *v)
{
	Csi__V1__Volume *vol = xnew0(Csi__V1__Volume, 1);

	csi__v1__volume__init(vol);
	vol->volume_id = xstrdup(v->id);
	vol->capacity_bytes = (int64_t)v->size;
	vol->volume_context = pbmap_from_strmap(&csi__v1__volume__volume_context_entry__descriptor,
						&v->context, &vol->n_volume_context);
	vol->accessible_topology = xnew0(Csi__V1__Topology *, 1);
	vol->accessible_topology[0] = topology_new(pool_zone(d->pool));
	vol->n_accessible_topology = 1;
	if (v->source_kind && *v->source_kind) {
		Csi__V1__VolumeContentSource *src = xnew0(Csi__V1__VolumeContentSource, 1);
		csi__v1__volume_content_source__init(src);
		if (strcmp(v->source_kind, "snapshot") == 0) {
			src->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			src->snapshot = xnew0(Csi__V1__VolumeContentSource__SnapshotSource, 1);
			csi__v1__volume_content_source__snapshot_source__init(src->snapshot);
			src->snapshot->snapshot_id = xstrdup(v->source_id);
		} else {
			src->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			src->volume = xnew0(Csi__V1__VolumeContentSource__VolumeSource, 1);
			csi__v1__volume_content_source__volume_source__init(src->volume);
			src->volume->volume_id = xstrdup(v->source_id);
		}
		vol->content_source = src;
	}
	return vol;
}

/* Damaged volumes already warned about: each is logged once per process, when first found,
 * not at every call that meets it. */
static pthread_mutex_t damage_lock = PTHREAD_MUTEX_INITIALIZER;
static Strmap damage_warned; /* volume ID -> damage; guarded by damage_lock */

void volume_damage_warn(const char *id, const char *damage)
{
	pthread_mutex_lock(&damage_lock);
	bool seen = strmap_get(&damage_warned, id);
	if (!seen)
		strmap_set(&damage_warned, id, damage);
	pthread_mutex_unlock(&damage_lock);
	if (!seen)
		log_warning("volume %s is damaged: %s; it is listed with an abnormal condition "
			    "and can be deleted",
			    id, damage);
}

/* A deleted volume's ID may come back (its name made again): its damage would be news. */
static void volume_damage_forget(const char *id)
{
	pthread_mutex_lock(&damage_lock);
	strmap_remove(&damage_warned, id);
	pthread_mutex_unlock(&damage_lock);
}

/* The volume's metadata is sound, its data file is there and as large as recorded. */
static Csi__V1__VolumeCondition *volume_condition(const Driver *d, const PoolVolume *v,
						  const char *damage)
{
	Csi__V1__VolumeCondition *c = xnew0(Csi__V1__VolumeCondition, 1);
	_cleanup_free_ char *path = pool_volume_data_path(d->pool, v->id);
	struct stat st;

	csi__v1__volume_condition__init(c);
	if (damage) {
		c->abnormal = true;
		c->message = xasprintf("volume %s is damaged: %s (published nodes as the nodes' "
				       "device indexes record them; it can only be deleted)",
				       v->id, damage);
	} else if (stat(path, &st) < 0) {
		c->abnormal = true;
		c->message = xasprintf("data file of volume %s is missing: %m", v->id);
	} else if ((uint64_t)st.st_size < v->size) {
		c->abnormal = true;
		c->message = xasprintf("data file of volume %s is %lld bytes, %llu expected", v->id,
				       (long long)st.st_size, (unsigned long long)v->size);
	} else
		c->message = xstrdup("volume is healthy");
	return c;
}

static char **published_nodes(const PoolVolume *v, size_t *ret_n)
{
	char **nodes = xnew0(char *, v->n_attachments);
	for (size_t i = 0; i < v->n_attachments; i++)
		nodes[i] = xstrdup(v->attachments[i].node);
	*ret_n = v->n_attachments;
	return nodes;
}

void *volume_status_new(const Driver *d, const PoolVolume *v, const char *damage, bool list)
{
	if (list) {
		Csi__V1__ListVolumesResponse__VolumeStatus *s =
			xnew0(Csi__V1__ListVolumesResponse__VolumeStatus, 1);
		csi__v1__list_volumes_response__volume_status__init(s);
		s->published_node_ids = published_nodes(v, &s->n_published_node_ids);
		s->volume_condition = volume_condition(d, v, damage);
		return s;
	}
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *s =
		xnew0(Csi__V1__ControllerGetVolumeResponse__VolumeStatus, 1);
	csi__v1__controller_get_volume_response__volume_status__init(s);
	s->published_node_ids = published_nodes(v, &s->n_published_node_ids);
	s->volume_condition = volume_condition(d, v, damage);
	return s;
}

/* A volume for listing, damaged or not (*ret_damage): -ENOENT when there is none. Warns once
 * about a damaged one. */
static int volume_inspect(const Driver *d, const char *id, PoolVolume **ret, char **ret_damage)
{
	int e = pool_volume_inspect(d->pool, id, ret, ret_damage);
	if (e == 0 && *ret_damage)
		volume_damage_warn(id, *ret_damage);
	return e;
}

/* CreateVolume */

typedef struct CreateSpec {
	uint64_t size;
	bool block;
	const char *fs_type; /* of the first mount capability, "" when none */
	Csi__V1__VolumeCapability__AccessMode__Mode mode;
	VolumeParams params;
	const char *source_kind, *source_id;
} CreateSpec;

static int create_check_capabilities(char **ret_error, const Csi__V1__CreateVolumeRequest *r,
				     CreateSpec *spec)
{
	_cleanup_free_ char *err = NULL;

	if (r->n_volume_capabilities == 0)
		return errorf(ret_error, -EINVAL, "volume_capabilities: at least one is required");
	spec->fs_type = "";
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		const Csi__V1__VolumeCapability *c = r->volume_capabilities[i];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if (capability_check(c, field, &err) < 0)
			return errorf(ret_error, -EINVAL, "%s", err);
		if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
			spec->block = true;
		else if (!*spec->fs_type)
			spec->fs_type = c->mount->fs_type ?: "";
		if (i == 0)
			spec->mode = c->access_mode->mode;
	}
	return 0;
}

static int create_check_topology(char **ret_error, const Driver *d,
				 const Csi__V1__TopologyRequirement *t)
{
	if (!t || t->n_requisite == 0)
		return 0;
	for (size_t i = 0; i < t->n_requisite; i++)
		if (topology_matches(t->requisite[i], pool_zone(d->pool)))
			return 0;
	return errorf(ret_error, -ENOSPC,
		      "accessibility_requirements: no requisite topology has %s=%s, the only zone "
		      "this pool serves",
		      TOPOLOGY_KEY, pool_zone(d->pool));
}

static int create_check_source(char **ret_error, const Driver *d,
			       const Csi__V1__VolumeContentSource *src, CreateSpec *spec,
			       uint64_t *ret_source_size)
{
	*ret_source_size = 0;
	if (!src || src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE__NOT_SET)
		return 0;
	if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT) {
		_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
		spec->source_kind = "snapshot";
		spec->source_id = src->snapshot->snapshot_id ?: "";
		if (pool_snapshot_load(d->pool, spec->source_id, &s) < 0)
			return errorf(ret_error, -ENOENT,
				      "volume_content_source: snapshot '%s' not found",
				      spec->source_id);
		*ret_source_size = s->size;
		return 0;
	}
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	spec->source_kind = "volume";
	spec->source_id = src->volume->volume_id ?: "";
	if (pool_volume_load(d->pool, spec->source_id, &v) < 0)
		return errorf(ret_error, -ENOENT, "volume_content_source: volume '%s' not found",
			      spec->source_id);
	*ret_source_size = v->size;
	return 0;
}

static int create_parse(char **ret_error, const Driver *d, const Csi__V1__CreateVolumeRequest *r,
			CreateSpec *spec)
{
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ ParamKV *kv = NULL, *mkv = NULL;
	uint64_t source_size;
	int e;

	if ((e = create_name_check(ret_error, r->name)) < 0)
		return e;
	if ((e = create_check_capabilities(ret_error, r, spec)) < 0)
		return e;
	if ((e = create_check_topology(ret_error, d, r->accessibility_requirements)) < 0)
		return e;
	if ((e = create_check_source(ret_error, d, r->volume_content_source, spec, &source_size)) <
	    0)
		return e;
	e = capacity_range_size(r->capacity_range, MAX(DEFAULT_VOLUME_SIZE, source_size),
				&spec->size, &err);
	if (e < 0)
		return errorf(ret_error, e, "%s", err);
	if (spec->size < source_size)
		return errorf(ret_error, -ERANGE,
			      "capacity_range: %llu bytes is smaller than the source %s %s "
			      "(%llu bytes)",
			      (unsigned long long)spec->size, spec->source_kind, spec->source_id,
			      (unsigned long long)source_size);

	kv = pbmap_to_kv((void *const *)r->parameters, r->n_parameters);
	if (volume_params_parse(kv, r->n_parameters, spec->size, &spec->params, &err) < 0)
		return errorf(ret_error, -EINVAL, "parameters: %s", err);
	if (r->n_mutable_parameters > 0) {
		VolumeParams modified;
		mkv = pbmap_to_kv((void *const *)r->mutable_parameters, r->n_mutable_parameters);
		if (volume_params_check_mutable(mkv, r->n_mutable_parameters, &err) < 0 ||
		    volume_params_modify(&spec->params, spec->size, mkv, r->n_mutable_parameters,
					 &modified, &err) < 0)
			return errorf(ret_error, -EINVAL, "mutable_parameters: %s", err);
		volume_params_done(&spec->params);
		spec->params = modified;
	}
	if (volume_params_check_capability(&spec->params, spec->block && !*spec->fs_type,
					   spec->fs_type, &err) < 0)
		return errorf(ret_error, -EINVAL, "parameters: %s", err);
	return 0;
}

/* What a volume made from spec records: parameters, and the context the node gets. */
static void create_fill_volume(const CreateSpec *spec, const char *name, PoolVolume *v)
{
	ParamKV *kv;
	size_t n;

	pool_volume_id_for_name(name, v->id);
	v->name = (char *)name;
	v->size = spec->size;
	v->source_kind = (char *)(spec->source_kind ?: "");
	v->source_id = (char *)(spec->source_id ?: "");
	v->access_mode = (char *)access_mode_name(spec->mode);
	volume_params_to_kv(&spec->params, VOLUME_PARAMS_ALL, &kv, &n);
	kv_to_strmap(kv, n, &v->params);
	param_kv_free_many(kv, n);
	volume_params_to_kv(&spec->params, VOLUME_PARAMS_NODE, &kv, &n);
	kv_to_strmap(kv, n, &v->context);
	param_kv_free_many(kv, n);
	if (*spec->fs_type && !strmap_get(&v->context, "csi.storage.k8s.io/fstype"))
		strmap_set(&v->context, "csi.storage.k8s.io/fstype", spec->fs_type);
}

/* A volume of that name exists: the same request gets it back, another one ALREADY_EXISTS. */
static int create_compare(char **ret_error, const Csi__V1__CreateVolumeRequest *r,
			  const CreateSpec *spec, const PoolVolume *existing,
			  const PoolVolume *wanted)
{
	if (!capacity_range_allows(r->capacity_range, existing->size))
		return errorf(ret_error, -EEXIST,
			      "volume '%s' exists with %llu bytes, outside the requested "
			      "capacity_range",
			      r->name, (unsigned long long)existing->size);
	if (strcmp(existing->source_kind, wanted->source_kind) != 0 ||
	    strcmp(existing->source_id, wanted->source_id) != 0)
		return errorf(ret_error, -EEXIST,
			      "volume '%s' exists with another volume_content_source (%s %s)",
			      r->name, *existing->source_kind ? existing->source_kind : "none",
			      existing->source_id);
	if (!strmap_equal(&existing->params, &wanted->params))
		return errorf(ret_error, -EEXIST, "volume '%s' exists with other parameters",
			      r->name);
	(void)spec;
	return 0;
}

static ProtobufCMessage *create_reply(const Driver *d, const PoolVolume *v)
{
	Csi__V1__CreateVolumeResponse *resp = xnew0(Csi__V1__CreateVolumeResponse, 1);
	csi__v1__create_volume_response__init(resp);
	resp->volume = volume_to_csi(d, v);
	return &resp->base;
}

int controller_create_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__CreateVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(pool_volume_freep) PoolVolume *existing = NULL;
	CreateSpec spec = {};
	PoolVolume wanted = {};
	CopyMethod method;
	int e;

	if ((e = create_parse(ret_error, d, r, &spec)) < 0)
		goto out;
	if (inflight_holdf(d->inflight, &hold, "create:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateVolume for '%s' is already in progress",
			   r->name);
		goto out;
	}
	create_fill_volume(&spec, r->name, &wanted);
	wanted.created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;

	e = pool_volume_create(d->pool, &wanted, &method);
	if (e == -EEXIST) {
		e = pool_volume_load(d->pool, wanted.id, &existing);
		if (e < 0) {
			e = errorf(ret_error, e, "volume '%s' (%s) exists but cannot be read: %s",
				   r->name, wanted.id, strerror(-e));
			goto out;
		}
		if ((e = create_compare(ret_error, r, &spec, existing, &wanted)) < 0)
			goto out;
		*ret = create_reply(d, existing);
		goto out;
	}
	if (e == -ENOSPC)
		e = errorf(ret_error, e, "capacity_range: %llu bytes do not fit in the pool",
			   (unsigned long long)spec.size);
	else if (e == -ENOENT)
		e = errorf(ret_error, e, "volume_content_source: %s '%s' not found",
			   spec.source_kind, spec.source_id);
	else if (e == -ERANGE)
		e = errorf(ret_error, e, "capacity_range: smaller than the source %s '%s'",
			   spec.source_kind, spec.source_id);
	else if (e < 0)
		e = errorf(ret_error, e, "creating volume '%s' (%s) failed: %s", r->name, wanted.id,
			   strerror(-e));
	if (e < 0)
		goto out;
	if (*wanted.source_kind)
		log_info("created volume %s (%s, %llu bytes) from %s %s by %s", wanted.id, r->name,
			 (unsigned long long)wanted.size, wanted.source_kind, wanted.source_id,
			 copy_method_to_string(method));
	else
		log_info("created volume %s (%s, %llu bytes)", wanted.id, r->name,
			 (unsigned long long)wanted.size);
	*ret = create_reply(d, &wanted);
out:
	strmap_done(&wanted.params);
	strmap_done(&wanted.context);
	volume_params_done(&spec.params);
	return e;
}

/* DeleteVolume */

static int delete_refused(char **ret_error, const char *id, const PoolVolumeFound *found)
{
	if (found->use == POOL_VOLUME_PUBLISHED)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is still published to node %s: unpublish it first", id,
			      found->node);
	if (found->node && found->staging_path)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is staged on node %s at %s: unstage it first (loop "
			      "device %s is attached over its data file)",
			      id, found->node, found->staging_path, found->device);
	return errorf(ret_error, -ENOTEMPTY,
		      "volume %s is staged on this machine (loop device %s is attached over its "
		      "data file): unstage it on its node first",
		      id, found->device);
}

int controller_delete_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__DeleteVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	PoolVolumeFound found = {};

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);

	Csi__V1__DeleteVolumeResponse *resp = xnew0(Csi__V1__DeleteVolumeResponse, 1);
	csi__v1__delete_volume_response__init(resp);
	*ret = &resp->base;

	/* "Is it in use?" and the removal are one decision of the pool, under one hold of the
	 * volume's lock: a publish from any process comes before or after, never between. */
	int e = pool_volume_delete(d->pool, r->volume_id, &found);
	if (e == -ENOENT)
		e = 0; /* already gone: success, as the spec asks */
	else if (e == -ENOTEMPTY)
		e = delete_refused(ret_error, r->volume_id, &found);
	else if (e < 0)
		e = errorf(ret_error, e, "deleting volume %s failed: %s", r->volume_id,
			   strerror(-e));
	else if (found.name)
		log_info("deleted volume %s (%s)", r->volume_id, found.name);
	else {
		log_info("deleted volume %s, whose metadata was damaged", r->volume_id);
		volume_damage_forget(r->volume_id);
	}
	pool_volume_found_done(&found);
	return e;
}

/* ValidateVolumeCapabilities */

int controller_validate_volume_capabilities(Driver *d, const ProtobufCMessage *req,
					    ProtobufCMessage **ret, char **ret_error)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *r = (const void *)req;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *err = NULL;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (r->n_volume_capabilities == 0)
		return errorf(ret_error, -EINVAL, "volume_capabilities: at least one is required");
	if (pool_volume_load(d->pool, r->volume_id, &v) < 0)
		return volume_not_found(ret_error, r->volume_id);

	Csi__V1__ValidateVolumeCapabilitiesResponse *resp =
		xnew0(Csi__V1__ValidateVolumeCapabilitiesResponse, 1);
	csi__v1__validate_volume_capabilities_response__init(resp);
	*ret = &resp->base;
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if (capability_check(r->volume_capabilities[i], field, &err) < 0) {
			resp->message = TAKE_PTR(err);
			return 0;
		}
	}
	/* Confirmed: echo what was asked, as the spec wants. */
	Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *c =
		xnew0(Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed, 1);
	csi__v1__validate_volume_capabilities_response__confirmed__init(c);
	c->volume_capabilities = xnew0(Csi__V1__VolumeCapability *, r->n_volume_capabilities);
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		size_t len = protobuf_c_message_get_packed_size(&r->volume_capabilities[i]->base);
		_cleanup_free_ uint8_t *buf = xmalloc(len);
		protobuf_c_message_pack(&r->volume_capabilities[i]->base, buf);
		c->volume_capabilities[i] = csi__v1__volume_capability__unpack(NULL, len, buf);
	}
	c->n_volume_capabilities = r->n_volume_capabilities;
	Strmap m = {};
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &m);
	c->volume_context = pbmap_from_strmap(
		&csi__v1__validate_volume_capabilities_response__confirmed__volume_context_entry__descriptor,
		&m, &c->n_volume_context);
	strmap_done(&m);
	pbmap_to_strmap((void *const *)r->parameters, r->n_parameters, &m);
	c->parameters = pbmap_from_strmap(
		&csi__v1__validate_volume_capabilities_response__confirmed__parameters_entry__descriptor,
		&m, &c->n_parameters);
	strmap_done(&m);
	resp->confirmed = c;
	return 0;
}

/* ListVolumes and ControllerGetVolume */

int controller_list_volumes(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			    char **ret_error)
{
	const Csi__V1__ListVolumesRequest *r = (const void *)req;
	char **ids;
	size_t n, start = 0;

	if (r->max_entries < 0)
		return errorf(ret_error, -EINVAL, "max_entries: must not be negative");
	if (page_token_check(r->starting_token, pool_volume_id_valid) < 0)
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListVolumes gave",
			      r->starting_token);
	int e = pool_volume_list(d->pool, &ids, &n);
	if (e < 0)
		return errorf(ret_error, e, "listing the pool failed: %s", strerror(-e));
	/* The token is the first ID of the next page: a page starts there even if that volume
	 * was deleted meanwhile, and volumes added before it are not listed twice. */
	if (r->starting_token && *r->starting_token)
		while (start < n && strcmp(ids[start], r->starting_token) < 0)
			start++;
	size_t max = r->max_entries > 0 ? (size_t)r->max_entries : LIST_MAX_DEFAULT;

	Csi__V1__ListVolumesResponse *resp = xnew0(Csi__V1__ListVolumesResponse, 1);
	csi__v1__list_volumes_response__init(resp);
	resp->entries = xnew0(Csi__V1__ListVolumesResponse__Entry *, MIN(max, n - start));
	size_t i = start;
	for (; i < n && resp->n_entries < max; i++) {
		_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
		_cleanup_free_ char *damage = NULL;
		if (volume_inspect(d, ids[i], &v, &damage) < 0)
			continue; /* deleted while we listed */
		Csi__V1__ListVolumesResponse__Entry *entry =
			xnew0(Csi__V1__ListVolumesResponse__Entry, 1);
		csi__v1__list_volumes_response__entry__init(entry);
		entry->volume = volume_to_csi(d, v);
		entry->status = volume_status_new(d, v, damage, true);
		resp->entries[resp->n_entries++] = entry;
	}
	if (i < n)
		resp->next_token = xstrdup(ids[i]);
	strv_free(ids);
	*ret = &resp->base;
	return 0;
}

int controller_get_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  char **ret_error)
{
	const Csi__V1__ControllerGetVolumeRequest *r = (const void *)req;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *damage = NULL;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	int e = volume_inspect(d, r->volume_id, &v, &damage);
	if (e < 0)
		return volume_not_found(ret_error, r->volume_id);
	Csi__V1__ControllerGetVolumeResponse *resp = xnew0(Csi__V1__ControllerGetVolumeResponse, 1);
	csi__v1__controller_get_volume_response__init(resp);
	resp->volume = volume_to_csi(d, v);
	resp->status = volume_status_new(d, v, damage, false);
	*ret = &resp->base;
	return 0;
}

/* GetCapacity and ControllerGetCapabilities */

static Google__Protobuf__Int64Value *int64_value(int64_t v)
{
	Google__Protobuf__Int64Value *w = xnew0(Google__Protobuf__Int64Value, 1);
	google__protobuf__int64_value__init(w);
	w->value = v;
	return w;
}

int controller_get_capacity(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			    char **ret_error)
{
	const Csi__V1__GetCapacityRequest *r = (const void *)req;
	_cleanup_free_ char *err = NULL;
	uint64_t total, available;

	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if (capability_check(r->volume_capabilities[i], field, &err) < 0)
			return errorf(ret_error, -EINVAL, "%s", err);
	}
	pool_capacity(d->pool, &total, &available);
	if (r->accessible_topology && !topology_matches(r->accessible_topology, pool_zone(d->pool)))
		available = 0; /* no capacity in a zone this pool does not serve */
	Csi__V1__GetCapacityResponse *resp = xnew0(Csi__V1__GetCapacityResponse, 1);
	csi__v1__get_capacity_response__init(resp);
	resp->available_capacity = (int64_t)available;
	resp->maximum_volume_size = int64_value((int64_t)(available / MIB * MIB));
	resp->minimum_volume_size = int64_value((int64_t)MIB);
	*ret = &resp->base;
	return 0;
}

int controller_get_capabilities(_unused_ Driver *d, const ProtobufCMessage *req,
				ProtobufCMessage **ret, _unused_ char **ret_error)
{
	static const Csi__V1__ControllerServiceCapability__RPC__Type types[] = {
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME,
	};
	(void)req;
	Csi__V1__ControllerGetCapabilitiesResponse *resp =
		xnew0(Csi__V1__ControllerGetCapabilitiesResponse, 1);
	csi__v1__controller_get_capabilities_response__init(resp);
	resp->capabilities = xnew0(Csi__V1__ControllerServiceCapability *, ELEMENTSOF(types));
	for (size_t i = 0; i < ELEMENTSOF(types); i++) {
		Csi__V1__ControllerServiceCapability *c =
			xnew0(Csi__V1__ControllerServiceCapability, 1);
		csi__v1__controller_service_capability__init(c);
		c->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = xnew0(Csi__V1__ControllerServiceCapability__RPC, 1);
		csi__v1__controller_service_capability__rpc__init(c->rpc);
		c->rpc->type = types[i];
		resp->capabilities[i] = c;
	}
	resp->n_capabilities = ELEMENTSOF(types);
	*ret = &resp->base;
	return 0;
}
