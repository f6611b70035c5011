/* SPDX-License-Identifier: Apache-2.0 */
/* CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ListVolumes, ControllerGetVolume,
 * GetCapacity and ControllerGetCapabilities. */
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"
#include "metrics.h"
#include "params.h"
#include "strv.h"
#include "utf8.h"

/* Names of volumes, snapshots and groups: they never become paths, but a clear error is
 * better than a surprising ID. */
#define NAME_MAX_BYTES 128

static bool name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > NAME_MAX_BYTES || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '/')
			return false;
	return true;
}

int create_name_check(const char *name, char **ret_error)
{
	if (!name || !*name)
		return errorf(ret_error, -EINVAL, "name: missing");
	if (!name_valid(name))
		return errorf(ret_error, -EINVAL,
			      "name: must be 1-%d printable bytes without '/' (got %zu bytes)",
			      NAME_MAX_BYTES, strlen(name));
	/* a protobuf string must be UTF-8, and the backends' records (JSON) hold nothing else */
	if (!utf8_valid(name, strlen(name)))
		return errorf(ret_error, -EINVAL, "name: not valid UTF-8");
	return 0;
}

static Csi__V1__Volume *volume_to_csi(const BackendVolume *v)
{
	Csi__V1__Volume *vol = xnew0(Csi__V1__Volume, 1);

	csi__v1__volume__init(vol);
	vol->volume_id = xstrdup(v->id);
	vol->capacity_bytes = (int64_t)v->size;
	vol->volume_context = pbmap_from_strmap(&csi__v1__volume__volume_context_entry__descriptor,
						&v->context, &vol->n_volume_context);
	if (v->topology.n > 0) {
		vol->accessible_topology = xnew0(Csi__V1__Topology *, 1);
		vol->accessible_topology[0] = topology_from_strmap(&v->topology);
		vol->n_accessible_topology = 1;
	}
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
METRIC_DEFINE(problems, METRIC_COUNTER, "volplug_problems_found_total",
	      "Problems found in the backends' objects, each counted once: damaged (a volume whose "
	      "record is damaged), stray (what earlier runs left: loop devices no record uses, "
	      "temporaries, an unrecorded size; reported at start)",
	      "kind");

void volume_problem_count(bool damaged)
{
	metric_inc(&problems, damaged ? "damaged" : "stray");
}

static Strmap damage_warned; /* volume ID -> damage; guarded by damage_lock */

void volume_damage_warn(const char *id, const char *damage)
{
	pthread_mutex_lock(&damage_lock);
	bool seen = strmap_get(&damage_warned, id);
	if (!seen)
		strmap_set(&damage_warned, id, damage);
	pthread_mutex_unlock(&damage_lock);
	if (!seen)
		volume_problem_count(true);
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

static Csi__V1__VolumeCondition *volume_condition(const BackendVolume *v)
{
	Csi__V1__VolumeCondition *c = xnew0(Csi__V1__VolumeCondition, 1);

	csi__v1__volume_condition__init(c);
	c->abnormal = v->abnormal;
	c->message = xstrdup(v->condition ?: "");
	return c;
}

static char **published_nodes(const BackendVolume *v, size_t *ret_n)
{
	size_t n = strv_length(v->published_nodes);
	char **nodes = xnew0(char *, n);

	for (size_t i = 0; i < n; i++)
		nodes[i] = xstrdup(v->published_nodes[i]);
	*ret_n = n;
	return nodes;
}

/* The VolumeStatus of ListVolumes (list) or ControllerGetVolume: published nodes and
 * condition. */
static void *volume_status_new(const BackendVolume *v, bool list)
{
	if (list) {
		Csi__V1__ListVolumesResponse__VolumeStatus *s =
			xnew0(Csi__V1__ListVolumesResponse__VolumeStatus, 1);
		csi__v1__list_volumes_response__volume_status__init(s);
		s->published_node_ids = published_nodes(v, &s->n_published_node_ids);
		s->volume_condition = volume_condition(v);
		return s;
	}
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *s =
		xnew0(Csi__V1__ControllerGetVolumeResponse__VolumeStatus, 1);
	csi__v1__controller_get_volume_response__volume_status__init(s);
	s->published_node_ids = published_nodes(v, &s->n_published_node_ids);
	s->volume_condition = volume_condition(v);
	return s;
}

int volume_lookup(Backend *b, const char *id, BackendVolume *ret, char **ret_error)
{
	BackendRef ref = {.id = id};
	BackendVolume v = {};

	int e = BACKEND_CALL(b, get_volume, &ref, &v, ret_error);
	if (e < 0)
		return e;
	if (v.damage) {
		/* The one answer of every call that needs the volume sound (the backend's own
		 * calls say the same): what is damaged, and what can be done. */
		e = errorf(ret_error, -EUCLEAN, "volume %s is damaged: %s: it can only be deleted",
			   id, v.damage);
		backend_volume_done(&v);
		return e;
	}
	*ret = v;
	return 0;
}

/* CreateVolume */

typedef struct CreateSpec {
	Strmap secrets; /* the request's */
	uint64_t size;
	bool block;
	const char *fs_type; /* of the first mount capability, "" when none */
	VolumeParams params;
	const char *source_kind, *source_id;
	/* A volume of that name exists already (find_volume): the answer, compared. */
	bool found;
	BackendVolume existing;
} CreateSpec;

static int create_check_capabilities(Backend *b, const Csi__V1__CreateVolumeRequest *r,
				     CreateSpec *spec, char **ret_error)
{
	int e;

	if (r->n_volume_capabilities == 0)
		return errorf(ret_error, -EINVAL, "volume_capabilities: at least one is required");
	spec->fs_type = "";
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		const Csi__V1__VolumeCapability *c = r->volume_capabilities[i];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if ((e = capability_check(b, c, field, ret_error)) < 0)
			return e;
		if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
			spec->block = true;
		else if (!*spec->fs_type)
			spec->fs_type = c->mount->fs_type ?: "";
	}
	return 0;
}

/* The size of the content source (0 without one, or when the default backend does not find it:
 * its create_volume then says why); any other failure as the backend said it. */
static int create_check_source(Driver *d, const Csi__V1__CreateVolumeRequest *r, CreateSpec *spec,
			       uint64_t *ret_source_size, char **ret_error)
{
	const Csi__V1__VolumeContentSource *src = r->volume_content_source;
	Backend *b = backend_default(d->backends);
	_cleanup_free_ char *err = NULL;
	int e;

	*ret_source_size = 0;
	if (!src || src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE__NOT_SET)
		return 0;
	if (b->ops->find_volume) {
		/* The retry for a volume made already (or being made) is answered from the
		 * backend's records alone: the source may live in a store that is down. */
		BackendCreateVolume c = {.name = r->name, .secrets = &spec->secrets};
		e = BACKEND_CALL(b, find_volume, &c, &spec->existing, &err);
		if (e == 0) {
			spec->found = true;
			spec->source_kind =
				src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT
					? "snapshot"
					: "volume";
			spec->source_id =
				src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT
					? src->snapshot->snapshot_id ?: ""
					: src->volume->volume_id ?: "";
			return 0;
		}
		if (e != -ENOENT)
			return error_pass(e, &err, ret_error);
		free(err);
		err = NULL;
	}
	if (src->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT) {
		BackendSnapshot s = {};
		spec->source_kind = "snapshot";
		spec->source_id = src->snapshot->snapshot_id ?: "";
		BackendRef ref = {.id = spec->source_id, .secrets = &spec->secrets};
		e = BACKEND_CALL(b, get_snapshot, &ref, &s, &err);
		*ret_source_size = s.size;
		backend_snapshot_done(&s);
	} else {
		BackendVolume v = {};
		spec->source_kind = "volume";
		spec->source_id = src->volume->volume_id ?: "";
		e = volume_lookup(b, spec->source_id, &v, &err);
		*ret_source_size = v.size;
		backend_volume_done(&v);
	}
	/* Missing, damaged, or another node's: the backend's create_volume answers, knowing
	 * which. Any other failure (UNIMPLEMENTED, a backend that cannot read its records) as the
	 * backend said it. */
	if (e < 0 && e != -ENOENT)
		return error_pass(e, &err, ret_error);
	return 0;
}

static int create_parse(Driver *d, const Csi__V1__CreateVolumeRequest *r, CreateSpec *spec,
			char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ ParamKV *kv = NULL, *mkv = NULL;
	uint64_t source_size;
	int e;

	if ((e = create_name_check(r->name, ret_error)) < 0)
		return e;
	pbmap_to_strmap((void *const *)r->secrets, r->n_secrets, &spec->secrets);
	if ((e = create_check_capabilities(backend_default(d->backends), r, spec, ret_error)) < 0)
		return e;
	if ((e = create_check_source(d, r, spec, &source_size, ret_error)) < 0)
		return e;
	Backend *b = backend_default(d->backends);
	e = capacity_range_size(r->capacity_range, MAX(backend_default_size(b), source_size),
				backend_size_unit(b), &spec->size, &err);
	if (e < 0)
		return error_pass(e, &err, ret_error);
	if (spec->size < source_size)
		return errorf(ret_error, -ERANGE,
			      "capacity_range: %llu bytes is smaller than the source %s %s "
			      "(%llu bytes)",
			      (unsigned long long)spec->size, spec->source_kind, spec->source_id,
			      (unsigned long long)source_size);

	kv = pbmap_to_kv((void *const *)r->parameters, r->n_parameters);
	mkv = pbmap_to_kv((void *const *)r->mutable_parameters, r->n_mutable_parameters);
	BackendParamsRequest q = {
		.use = BACKEND_PARAMS_CREATE,
		.parameters = kv,
		.n_parameters = r->n_parameters,
		.mutable_parameters = mkv,
		.n_mutable_parameters = r->n_mutable_parameters,
		.size = spec->size,
		.block = spec->block && !*spec->fs_type,
		.fstype = spec->fs_type,
	};
	BackendParams p = {};
	if ((e = backend_parse_params(b, &q, &p, ret_error)) < 0)
		return e;
	spec->params = p.params;
	/* again with the parameters: a mode may need a volume type (EBS Multi-Attach: io1, io2) */
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if ((e = capability_check_for(b, r->volume_capabilities[i], field, &spec->params,
					      NULL, ret_error)) < 0)
			return e;
	}
	return 0;
}

/* A volume of that name exists: the same request gets it back, another one ALREADY_EXISTS. */
static int create_compare(const Csi__V1__CreateVolumeRequest *r, const CreateSpec *spec,
			  const BackendVolume *existing, char **ret_error)
{
	if (!capacity_range_allows(r->capacity_range, existing->size))
		return errorf(ret_error, -EEXIST,
			      "volume '%s' exists with %llu bytes, outside the requested "
			      "capacity_range",
			      r->name, (unsigned long long)existing->size);
	if (strcmp(existing->source_kind, spec->source_kind ?: "") != 0 ||
	    strcmp(existing->source_id, spec->source_id ?: "") != 0)
		return errorf(ret_error, -EEXIST,
			      "volume '%s' exists with another volume_content_source (%s%s%s)",
			      r->name, *existing->source_kind ? existing->source_kind : "none",
			      *existing->source_kind ? " " : "", existing->source_id);
	if (!volume_params_equal(&existing->params, &spec->params))
		return errorf(ret_error, -EEXIST, "volume '%s' exists with other parameters",
			      r->name);
	return 0;
}

static ProtobufCMessage *create_reply(const BackendVolume *v)
{
	Csi__V1__CreateVolumeResponse *resp = xnew0(Csi__V1__CreateVolumeResponse, 1);
	csi__v1__create_volume_response__init(resp);
	resp->volume = volume_to_csi(v);
	return &resp->base;
}

static void create_log(const BackendVolume *v)
{
	if (*v->source_kind)
		log_info("created volume %s (%s, %llu bytes) from %s %s by %s", v->id, v->name,
			 (unsigned long long)v->size, v->source_kind, v->source_id,
			 v->copy_method ?: "copy");
	else
		log_info("created volume %s (%s, %llu bytes)", v->id, v->name,
			 (unsigned long long)v->size);
}

/* Asks the default backend for the volume spec describes. */
static int create_call(Driver *d, const Csi__V1__CreateVolumeRequest *r, const CreateSpec *spec,
		       BackendVolume *ret, char **ret_error)
{
	const Csi__V1__TopologyRequirement *t = r->accessibility_requirements;
	BackendTopology *requisite = t ? topologies_from(t->requisite, t->n_requisite) : NULL;
	BackendTopology *preferred = t ? topologies_from(t->preferred, t->n_preferred) : NULL;
	BackendCreateVolume c = {
		.name = r->name,
		.size = spec->size,
		.params = &spec->params,
		.source_kind = spec->source_kind,
		.source_id = spec->source_id,
		.requisite = requisite,
		.n_requisite = t ? t->n_requisite : 0,
		.preferred = preferred,
		.n_preferred = t ? t->n_preferred : 0,
		.secrets = &spec->secrets,
	};

	backend_access_from(r->volume_capabilities[0], &c.access);
	c.access.block = spec->block;
	c.access.fstype = spec->fs_type;
	Backend *b = backend_default(d->backends);
	int e = BACKEND_CALL(b, create_volume, &c, ret, ret_error);
	topologies_free(requisite, c.n_requisite);
	topologies_free(preferred, c.n_preferred);
	return e;
}

int controller_create_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__CreateVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	CreateSpec spec = {};
	BackendVolume v = {};
	int e;

	if ((e = create_parse(d, r, &spec, ret_error)) < 0)
		goto out;
	if (inflight_holdf(d->inflight, &hold, "create:%s", r->name) < 0) {
		e = errorf(ret_error, -EBUSY, "a CreateVolume for '%s' is already in progress",
			   r->name);
		goto out;
	}
	if (spec.found) {
		v = spec.existing;
		spec.existing = (BackendVolume){};
		e = -EEXIST;
	} else
		e = create_call(d, r, &spec, &v, ret_error);
	if (e == -EEXIST)
		e = create_compare(r, &spec, &v, ret_error);
	else if (e == 0)
		create_log(&v);
	if (e == 0)
		*ret = create_reply(&v);
out:
	backend_volume_done(&v);
	volume_params_done(&spec.params);
	strmap_done(&spec.secrets);
	backend_volume_done(&spec.existing);
	return e;
}

/* DeleteVolume */

int controller_delete_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__DeleteVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	BackendDeleted gone = {};

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	Backend *b = volume_backend(d, r->volume_id, NULL);
	int e = BACKEND_CALL(b, delete_volume, &(BackendRef){.id = r->volume_id}, &gone, ret_error);
	if (e < 0)
		return e;
	if (gone.found && !gone.damaged)
		log_info("deleted volume %s (%s)", r->volume_id, gone.name);
	else if (gone.found) {
		log_info("deleted volume %s, whose metadata was damaged", r->volume_id);
		volume_damage_forget(r->volume_id);
	}
	if (gone.leftover)
		log_warning("volume %s: %s", r->volume_id, gone.leftover);
	backend_deleted_done(&gone);
	Csi__V1__DeleteVolumeResponse *resp = xnew0(Csi__V1__DeleteVolumeResponse, 1);
	csi__v1__delete_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* ValidateVolumeCapabilities */

int controller_validate_volume_capabilities(Driver *d, const ProtobufCMessage *req,
					    ProtobufCMessage **ret, char **ret_error)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *r = (const void *)req;
	_cleanup_(strmap_done) Strmap context = {};
	_cleanup_free_ char *err = NULL;
	BackendVolume v = {};
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (r->n_volume_capabilities == 0)
		return errorf(ret_error, -EINVAL, "volume_capabilities: at least one is required");
	pbmap_to_strmap((void *const *)r->volume_context, r->n_volume_context, &context);
	Backend *b = volume_backend(d, r->volume_id, &context);
	if ((e = volume_lookup(b, r->volume_id, &v, ret_error)) < 0)
		return e;

	Csi__V1__ValidateVolumeCapabilitiesResponse *resp =
		xnew0(Csi__V1__ValidateVolumeCapabilitiesResponse, 1);
	csi__v1__validate_volume_capabilities_response__init(resp);
	*ret = &resp->base;
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if (capability_check_for(b, r->volume_capabilities[i], field, NULL, &v, &err) < 0) {
			resp->message = TAKE_PTR(err);
			backend_volume_done(&v);
			return 0;
		}
	}
	backend_volume_done(&v);
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
	c->volume_context = pbmap_from_strmap(
		&csi__v1__validate_volume_capabilities_response__confirmed__volume_context_entry__descriptor,
		&context, &c->n_volume_context);
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
	BackendVolumeList l = {};

	if (r->max_entries < 0)
		return errorf(ret_error, -EINVAL, "max_entries: must not be negative");
	BackendListRequest q = {
		.starting_token = r->starting_token,
		.max_entries = (size_t)r->max_entries,
	};
	Backend *b = backend_default(d->backends);
	int e = BACKEND_CALL(b, list_volumes, &q, &l, ret_error);
	if (e < 0)
		return e;
	Csi__V1__ListVolumesResponse *resp = xnew0(Csi__V1__ListVolumesResponse, 1);
	csi__v1__list_volumes_response__init(resp);
	resp->entries = xnew0(Csi__V1__ListVolumesResponse__Entry *, l.n_volumes);
	for (size_t i = 0; i < l.n_volumes; i++) {
		const BackendVolume *v = &l.volumes[i];
		Csi__V1__ListVolumesResponse__Entry *entry =
			xnew0(Csi__V1__ListVolumesResponse__Entry, 1);
		csi__v1__list_volumes_response__entry__init(entry);
		if (v->damage)
			volume_damage_warn(v->id, v->damage);
		entry->volume = volume_to_csi(v);
		entry->status = volume_status_new(v, true);
		resp->entries[resp->n_entries++] = entry;
	}
	resp->next_token = TAKE_PTR(l.next_token);
	backend_volume_list_done(&l);
	*ret = &resp->base;
	return 0;
}

int controller_get_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			  char **ret_error)
{
	const Csi__V1__ControllerGetVolumeRequest *r = (const void *)req;
	BackendVolume v = {};

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	Backend *b = volume_backend(d, r->volume_id, NULL);
	int e = BACKEND_CALL(b, get_volume, &(BackendRef){.id = r->volume_id}, &v, ret_error);
	if (e < 0)
		return e;
	if (v.damage)
		volume_damage_warn(v.id, v.damage);
	Csi__V1__ControllerGetVolumeResponse *resp = xnew0(Csi__V1__ControllerGetVolumeResponse, 1);
	csi__v1__controller_get_volume_response__init(resp);
	resp->volume = volume_to_csi(&v);
	resp->status = volume_status_new(&v, false);
	backend_volume_done(&v);
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
	Backend *b = backend_default(d->backends);
	BackendCapacityRequest q = {};
	_cleanup_free_ ParamKV *kv = NULL;
	_cleanup_free_ char *err = NULL;
	BackendCapacity c;
	Strmap topology = {};
	int e;

	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		char field[48];
		snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
		if ((e = capability_check(b, r->volume_capabilities[i], field, ret_error)) < 0)
			return e;
	}
	/* The StorageClass's parameters: well formed, and the sizes they allow. */
	kv = pbmap_to_kv((void *const *)r->parameters, r->n_parameters);
	BackendParams p = {};
	e = backend_parse_params(b,
				 &(BackendParamsRequest){.use = BACKEND_PARAMS_CAPACITY,
							 .parameters = kv,
							 .n_parameters = r->n_parameters},
				 &p, ret_error);
	if (e < 0)
		return e;
	q.min_size = p.min_size;
	q.max_size = p.max_size;
	if (r->accessible_topology) {
		topology_to_strmap(r->accessible_topology, &topology);
		q.topology = &topology;
	}
	e = BACKEND_CALL(b, get_capacity, &q, &c, ret_error);
	strmap_done(&topology);
	if (e < 0)
		return e;
	Csi__V1__GetCapacityResponse *resp = xnew0(Csi__V1__GetCapacityResponse, 1);
	csi__v1__get_capacity_response__init(resp);
	resp->available_capacity = (int64_t)c.available;
	resp->maximum_volume_size = int64_value((int64_t)c.maximum_volume_size);
	resp->minimum_volume_size = int64_value((int64_t)c.minimum_volume_size);
	*ret = &resp->base;
	return 0;
}

/* What a controller of one node's volumes cannot serve when every node runs its own: Kubernetes
 * sends publishes, expansions and modifications to one controller, not to the volume's node. */
static bool distributed_lacks(Csi__V1__ControllerServiceCapability__RPC__Type t)
{
	return t == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME ||
	       t == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY ||
	       t == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES ||
	       t == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME ||
	       t == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME;
}

int controller_get_capabilities(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
				_unused_ char **ret_error)
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
		if (d->distributed && distributed_lacks(types[i]))
			continue;
		Csi__V1__ControllerServiceCapability *c =
			xnew0(Csi__V1__ControllerServiceCapability, 1);
		csi__v1__controller_service_capability__init(c);
		c->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = xnew0(Csi__V1__ControllerServiceCapability__RPC, 1);
		csi__v1__controller_service_capability__rpc__init(c->rpc);
		c->rpc->type = types[i];
		resp->capabilities[resp->n_capabilities++] = c;
	}
	*ret = &resp->base;
	return 0;
}
