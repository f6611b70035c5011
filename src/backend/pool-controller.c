/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's volumes as backend operations: create (blank, from a snapshot, or a clone),
 * delete (refused while published or staged), get and list with their condition, capacity,
 * and one merged expand + modify. */
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc.h"
#include "blocknode.h"
#include "error-util.h"
#include "pool-backend.h"
#include "time-util.h"

#define MIB (1024ULL * 1024ULL)

int pool_page_token_check(const char *token, bool (*valid)(const char *), const char *what,
			  char **ret_error)
{
	if (token && *token && !valid(token))
		return errorf(ret_error, -EALREADY, "starting_token: '%s' is not a token %s gave",
			      token, what);
	return 0;
}

size_t pool_page_start(char *const *ids, size_t n, const char *token)
{
	size_t start = 0;

	if (token && *token)
		while (start < n && strcmp(ids[start], token) < 0)
			start++;
	return start;
}

static void volume_to_backend(PoolBackend *pb, const PoolVolume *v, BackendVolume *ret)
{
	*ret = (BackendVolume){
		.id = xstrdup(v->id),
		.name = xstrdup(v->name ?: ""),
		.size = v->size,
		.created_ns = v->created_ns,
		.source_kind = xstrdup(v->source_kind ?: ""),
		.source_id = xstrdup(v->source_id ?: ""),
		.access_mode = xstrdup(v->access_mode ?: ""),
	};
	(void)volume_params_load_strmap(&v->params, &ret->params, NULL);
	strmap_copy(&ret->context, &v->context);
	strmap_set(&ret->topology, BACKEND_TOPOLOGY_ZONE, pool_zone(pb->pool));
	for (size_t i = 0; i < v->n_attachments; i++)
		strv_append(&ret->published_nodes, xstrdup(v->attachments[i].node));
}

/* Its condition: its record sound (else damage says what is wrong; taken), its data file
 * there and as large as recorded. */
static void volume_condition(PoolBackend *pb, BackendVolume *v, char *damage)
{
	_cleanup_free_ char *path = pool_volume_data_path(pb->pool, v->id);
	struct stat st;

	v->abnormal = true;
	v->damage = damage;
	if (damage)
		v->condition = xasprintf("volume %s is damaged: %s (published nodes as the nodes' "
					 "device indexes record them; it can only be deleted)",
					 v->id, damage);
	else if (stat(path, &st) < 0)
		v->condition = xasprintf("data file of volume %s is missing: %m", v->id);
	else if ((uint64_t)st.st_size < v->size)
		v->condition = xasprintf("data file of volume %s is %lld bytes, %llu expected",
					 v->id, (long long)st.st_size, (unsigned long long)v->size);
	else {
		v->abnormal = false;
		v->condition = xstrdup("volume is healthy");
	}
}

/* A volume with its status, damaged or not: -ENOENT when there is none. */
static int volume_get(PoolBackend *pb, const char *id, BackendVolume *ret)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	char *damage = NULL;

	int e = pool_volume_inspect(pb->pool, id, &v, &damage);
	if (e < 0)
		return e;
	volume_to_backend(pb, v, ret);
	volume_condition(pb, ret, damage);
	return 0;
}

int pool_backend_get_volume(Backend *b, const BackendRef *r, BackendVolume *ret, char **ret_error)
{
	if (volume_get(pool_of(b), r->id, ret) < 0) {
		*ret_error = pool_volume_not_found("volume_id", r->id);
		return -ENOENT;
	}
	return 0;
}

int pool_backend_list_volumes(Backend *b, const BackendListRequest *r, BackendVolumeList *ret,
			      char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_strv_free_ char **ids = NULL;
	BackendVolumeList l = {};
	size_t n;

	int e = pool_page_token_check(r->starting_token, pool_volume_id_valid, "ListVolumes",
				      ret_error);
	if (e < 0)
		return e;
	if ((e = pool_volume_list(pb->pool, &ids, &n)) < 0)
		return errorf(ret_error, e, "listing the pool failed: %s", strerror(-e));
	size_t i = pool_page_start(ids, n, r->starting_token);
	size_t max = r->max_entries ?: POOL_LIST_MAX_DEFAULT;
	l.volumes = xnew0(BackendVolume, MIN(max, n - i));
	for (; i < n && l.n_volumes < max; i++)
		if (volume_get(pb, ids[i], &l.volumes[l.n_volumes]) == 0)
			l.n_volumes++; /* else deleted while we listed */
	if (i < n)
		l.next_token = xstrdup(ids[i]);
	*ret = l;
	return 0;
}

int pool_backend_get_capacity(Backend *b, const BackendCapacityRequest *r, BackendCapacity *ret,
			      char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	uint64_t total, available;

	(void)ret_error;
	pool_capacity(pb->pool, &total, &available);
	if (r->topology && !backend_topology_has_zone(r->topology, pool_zone(pb->pool)))
		available = 0; /* no capacity in a zone this pool does not serve */
	*ret = (BackendCapacity){
		.available = available,
		.maximum_volume_size = available / MIB * MIB,
		.minimum_volume_size = MIB,
	};
	return 0;
}

/* CreateVolume */

static int create_check_topology(PoolBackend *pb, const BackendCreateVolume *r, char **ret_error)
{
	const char *zone = pool_zone(pb->pool);

	if (r->n_requisite == 0)
		return 0;
	for (size_t i = 0; i < r->n_requisite; i++)
		if (backend_topology_has_zone(&r->requisite[i], zone))
			return 0;
	return errorf(ret_error, -ENOSPC,
		      "accessibility_requirements: no requisite topology has %s=%s, the only zone "
		      "this pool serves",
		      BACKEND_TOPOLOGY_ZONE, zone);
}

/* What a new volume records: its parameters, and the context the node gets (the filesystem
 * options, and the filesystem the capability asked for). */
static void create_spec(const BackendCreateVolume *r, PoolVolume *v)
{
	pool_volume_id_for_name(r->name, v->id);
	v->name = (char *)r->name;
	v->size = r->size;
	v->created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;
	v->source_kind = (char *)(r->source_kind ?: "");
	v->source_id = (char *)(r->source_id ?: "");
	v->access_mode = (char *)r->access.mode;
	volume_params_to_strmap(r->params, VOLUME_PARAMS_ALL, &v->params);
	volume_params_to_strmap(r->params, VOLUME_PARAMS_NODE, &v->context);
	if (r->access.fstype && *r->access.fstype &&
	    !strmap_get(&v->context, BLOCKNODE_CONTEXT_FSTYPE))
		strmap_set(&v->context, BLOCKNODE_CONTEXT_FSTYPE, r->access.fstype);
}

/* A volume of that name exists: -EEXIST with it, for the caller to compare. */
static int create_existing(PoolBackend *pb, const BackendCreateVolume *r, const char *id,
			   BackendVolume *ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;

	int e = pool_volume_load(pb->pool, id, &v);
	if (e < 0)
		return errorf(ret_error, e, "volume '%s' (%s) exists but cannot be read: %s",
			      r->name, id, strerror(-e));
	volume_to_backend(pb, v, ret);
	return -EEXIST;
}

int pool_backend_create_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			       char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	PoolVolume spec = {};
	CopyMethod method;

	int e = create_check_topology(pb, r, ret_error);
	if (e < 0)
		return e;
	if (r->params->encrypted)
		/* A pool volume is a plain file: saying yes would be a lie about the data. */
		return errorf(ret_error, -EINVAL,
			      "parameters: encrypted: pool volumes are not encrypted (only EBS "
			      "volumes are)");
	create_spec(r, &spec);
	e = pool_volume_create(pb->pool, &spec, &method);
	if (e == -EEXIST)
		e = create_existing(pb, r, spec.id, ret, ret_error);
	else if (e == -ENOSPC)
		e = errorf(ret_error, e, "capacity_range: %llu bytes do not fit in the pool",
			   (unsigned long long)r->size);
	else if (e == -ENOENT)
		e = errorf(ret_error, e, "volume_content_source: %s '%s' not found",
			   spec.source_kind, spec.source_id);
	else if (e == -ERANGE)
		e = errorf(ret_error, e, "capacity_range: smaller than the source %s '%s'",
			   spec.source_kind, spec.source_id);
	else if (e < 0)
		e = errorf(ret_error, e, "creating volume '%s' (%s) failed: %s", r->name, spec.id,
			   strerror(-e));
	else {
		volume_to_backend(pb, &spec, ret);
		ret->copy_method = *spec.source_kind ? copy_method_to_string(method) : NULL;
	}
	strmap_done(&spec.params);
	strmap_done(&spec.context);
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

int pool_backend_delete_volume(Backend *b, const BackendRef *r, BackendDeleted *ret,
			       char **ret_error)
{
	PoolVolumeFound found = {};

	/* "Is it in use?" and the removal are one decision of the pool, under one hold of the
	 * volume's lock: a publish from any process comes before or after, never between. */
	int e = pool_volume_delete(pool_of(b)->pool, r->id, &found);
	if (e == -ENOENT) {
		*ret = (BackendDeleted){}; /* already gone: success, as the spec asks */
		e = 0;
	} else if (e == -ENOTEMPTY)
		e = delete_refused(ret_error, r->id, &found);
	else if (e < 0)
		e = errorf(ret_error, e, "deleting volume %s failed: %s", r->id, strerror(-e));
	else
		*ret = (BackendDeleted){
			.found = true,
			.damaged = !found.name,
			.name = TAKE_PTR(found.name),
		};
	pool_volume_found_done(&found);
	return e;
}

/* ControllerExpandVolume + ControllerModifyVolume */

/* The volume's parameters after a change, as its metadata stores them. */
static int params_after(const PoolVolume *v, uint64_t size, const BackendChange *r, Strmap *ret,
			char **ret_error)
{
	VolumeParams current = {}, next = {};

	int e = volume_params_load_strmap(&v->params, &current, ret_error);
	if (e < 0)
		return e;
	e = volume_params_modify(&current, size, r->params, r->n_params, &next, ret_error);
	volume_params_done(&current);
	if (e < 0)
		return e;
	volume_params_to_strmap(&next, VOLUME_PARAMS_ALL, ret);
	volume_params_done(&next);
	return 0;
}

/* One locked read-modify-write of the volume: its size grows, its parameters change. */
static int change_locked(Pool *pool, const BackendChange *r, BackendChanged *ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;

	int e = pool_volume_load(pool, r->volume_id, &v);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: cannot read it: %s", r->volume_id,
			      strerror(-e));
	uint64_t size = MAX(v->size, r->new_size);
	if (r->n_params > 0) {
		Strmap next = {};
		if ((e = params_after(v, size, r, &next, ret_error)) < 0) {
			strmap_done(&next);
			return e;
		}
		strmap_done(&v->params);
		v->params = next;
	}
	e = size > v->size ? pool_volume_grow(pool, v, size) : pool_volume_save(pool, v);
	if (e == -ENOSPC)
		return errorf(ret_error, e, "volume %s: %llu bytes do not fit in the pool",
			      r->volume_id, (unsigned long long)size);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: saving the change failed: %s", r->volume_id,
			      strerror(-e));
	/* Always: a loop device keeps its old size until NodeExpandVolume refreshes it, raw
	 * block too, and a filesystem must grow there as well. */
	*ret = (BackendChanged){.size = v->size, .node_expansion_required = true};
	return 0;
}

int pool_backend_change_volume(Backend *b, const BackendChange *r, BackendChanged *ret,
			       char **ret_error)
{
	Pool *pool = pool_of(b)->pool;
	int lock = -EBADF;

	int e = pool_volume_lock(pool, r->volume_id, &lock);
	if (e < 0)
		return errorf(ret_error, e, "volume %s not found", r->volume_id);
	e = change_locked(pool, r, ret, ret_error);
	pool_unlock(lock);
	return e;
}
