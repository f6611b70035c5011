/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's volumes as backend operations: create (blank, from a snapshot, or a clone),
 * delete (refused while published or staged), get and list with their condition, capacity,
 * and one merged expand + modify. */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc.h"
#include "blocknode.h"
#include "error-util.h"
#include "pool-backend.h"
#include "pool-internal.h"
#include "pool-restore.h"
#include "pool-store.h"
#include "store.h"
#include "time-util.h"

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

int pool_backend_volume_load(PoolBackend *pb, const char *field, const char *id, const char *local,
			     PoolVolume **ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *damage = NULL;

	int e = pool_volume_inspect(pb->pool, local, &v, &damage);
	if (e == -ENOENT)
		return errorf(ret_error, e, "%s: volume %s not found", field, id);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: cannot read it: %s", id, strerror(-e));
	if (damage)
		return errorf(ret_error, -EUCLEAN,
			      "volume %s is damaged: %s: it can only be deleted", id, damage);
	*ret = TAKE_PTR(v);
	return 0;
}

int pool_backend_volume_lock(PoolBackend *pb, const char *field, const char *id, const char *local,
			     int *ret_lock_fd, char **ret_error)
{
	int e = pool_volume_lock(pb->pool, local, ret_lock_fd);
	if (e == -ENOENT)
		return errorf(ret_error, e, "%s: volume %s not found", field, id);
	if (e == -EUCLEAN && pool_volume_damaged(pb->pool, local, id, ret_error) < 0)
		return -EUCLEAN;
	if (e < 0)
		return errorf(ret_error, e, "volume %s: cannot lock it: %s", id, strerror(-e));
	return 0;
}

static void volume_to_backend(PoolBackend *pb, const PoolVolume *v, BackendVolume *ret)
{
	*ret = (BackendVolume){
		.id = pool_backend_id(v->id, v->node),
		.name = xstrdup(v->name ?: ""),
		.size = v->size,
		.created_ns = v->created_ns,
		.source_kind = xstrdup(v->source_kind ?: ""),
		.source_id = xstrdup(v->source_id ?: ""),
		.access_mode = xstrdup(v->access_mode ?: ""),
	};
	(void)volume_params_load_strmap(&v->params, &ret->params, NULL);
	/* The volume context reports every parameter it was made (or modified) with, as the
	 * node reads them (type, iops, ... are recorded, not enforced: docs/pool.md); the
	 * node's own entries win. */
	strmap_copy(&ret->context, &v->params);
	for (size_t i = 0; i < v->context.n; i++)
		strmap_set(&ret->context, v->context.keys[i], v->context.values[i]);
	strmap_copy(&ret->topology, &pb->segment);
	for (size_t i = 0; i < v->n_attachments; i++)
		strv_append(&ret->published_nodes, xstrdup(v->attachments[i].node));
}

/* Its condition: its record sound (else damage says what is wrong; taken), its data file
 * (of local ID local) there and as large as recorded, the pool's filesystem not full (else full
 * says so). */
static void volume_condition(PoolBackend *pb, const char *local, BackendVolume *v, char *damage,
			     const char *full)
{
	struct stat st;
	int e = -ENOENT;

	_cleanup_close_ int data = pool_volume_data_open(pb->pool, local, O_PATH);
	if (data >= 0)
		e = fstat(data, &st) < 0 ? negative_errno() : 0;
	v->abnormal = true;
	v->damage = damage;
	if (damage && *v->name)
		v->condition = xasprintf("volume %s is damaged: %s (it can only be deleted)", v->id,
					 damage);
	else if (damage)
		v->condition = xasprintf("volume %s is damaged: %s (published nodes as the nodes' "
					 "device indexes record them; it can only be deleted)",
					 v->id, damage);
	else if (e < 0)
		v->condition =
			xasprintf("data file of volume %s is missing: %s", v->id, strerror(-e));
	else if ((uint64_t)st.st_size < v->size)
		v->condition = xasprintf("data file of volume %s is %lld bytes, %llu expected",
					 v->id, (long long)st.st_size, (unsigned long long)v->size);
	else if (full)
		v->condition = xstrdup(full); /* its writes fail where it needs new blocks */
	else {
		v->abnormal = false;
		v->condition = xstrdup("volume is healthy");
	}
}

/* A volume of local ID local with its status, damaged or not: -ENOENT when there is none. full:
 * the pool's pool_space_full_condition(), worked out once for all the volumes of a list (it
 * stats every data file). */
static int volume_get(PoolBackend *pb, const char *local, const char *full, BackendVolume *ret)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	char *damage = NULL;

	int e = pool_volume_inspect(pb->pool, local, &v, &damage);
	if (e < 0)
		return e;
	/* A damaged record does not say which form its ID had: this node's, as made now. */
	if (damage && !*v->name)
		v->node = xstrdup(pb->node_part);
	volume_to_backend(pb, v, ret);
	volume_condition(pb, local, ret, damage, full);
	return 0;
}

int pool_backend_get_volume(Backend *b, const BackendRef *r, BackendVolume *ret, char **ret_error)
{
	char local[POOL_ID_MAX];

	int e = pool_backend_id_find(pool_of(b), POOL_ID_VOLUME, "volume_id", r->id, local,
				     ret_error);
	if (e < 0 || (e = pool_backend_usable(pool_of(b), ret_error)) < 0)
		return e;
	_cleanup_free_ char *full = pool_space_full_condition(pool_of(b)->pool);
	if (volume_get(pool_of(b), local, full, ret) < 0)
		return errorf(ret_error, -ENOENT, "volume_id: volume %s not found", r->id);
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
	if (e < 0 || (e = pool_backend_usable(pb, ret_error)) < 0)
		return e;
	if ((e = pool_volume_list(pb->pool, &ids, &n)) < 0)
		return errorf(ret_error, e, "listing the pool failed: %s", strerror(-e));
	size_t i = pool_page_start(ids, n, r->starting_token);
	size_t max = r->max_entries ?: POOL_LIST_MAX_DEFAULT;
	_cleanup_free_ char *full = pool_space_full_condition(pb->pool);
	l.volumes = xnew0(BackendVolume, MIN(max, n - i));
	for (; i < n && l.n_volumes < max; i++)
		if (volume_get(pb, ids[i], full, &l.volumes[l.n_volumes]) == 0)
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
	uint64_t total, available, largest;
	const char *key;

	_cleanup_free_ char *gone = NULL;

	(void)ret_error;
	pool_capacity(pb->pool, &total, &available);
	if (pool_backend_usable(pb, &gone) < 0)
		available = 0; /* nothing can be made in it */
	/* A segment is this node, or holds nothing of this pool. */
	if (r->topology &&
	    backend_topology_fit(&pb->segment, r->topology, &key) != BACKEND_TOPOLOGY_FITS)
		available = 0;
	largest = available / MIB * MIB;
	if (r->max_size)
		largest = MIN(largest, r->max_size);
	uint64_t smallest = MAX(MIB, (r->min_size + MIB - 1) / MIB * MIB); /* whole MiB */
	if (largest < smallest)
		largest = 0; /* the class's smallest volume does not fit */
	*ret = (BackendCapacity){
		.available = available,
		.maximum_volume_size = largest,
		.minimum_volume_size = smallest,
	};
	return 0;
}

/* CreateVolume */

/* The first of n segments (field[i]) that this node is in: its index, or -1 when none is, with
 * *ret_error saying why for the first that fits nowhere here (an unknown key wins over
 * another node: it is the request that is wrong) and *ret_err its errno: -EINVAL for an
 * unknown key, -ENOSPC for segments of other nodes. */
static ssize_t topology_first_fit(PoolBackend *pb, const BackendTopology *t, size_t n,
				  const char *field, int *ret_err, char **ret_error)
{
	ssize_t elsewhere = -1, unknown = -1;
	const char *elsewhere_key = NULL, *unknown_key = NULL;

	for (size_t i = 0; i < n; i++) {
		const char *key = NULL;
		BackendTopologyFit f = backend_topology_fit(&pb->segment, &t[i], &key);
		if (f == BACKEND_TOPOLOGY_FITS)
			return (ssize_t)i;
		if (f == BACKEND_TOPOLOGY_UNKNOWN_KEY && unknown < 0) {
			unknown = (ssize_t)i;
			unknown_key = key;
		} else if (f == BACKEND_TOPOLOGY_ELSEWHERE && elsewhere < 0) {
			elsewhere = (ssize_t)i;
			elsewhere_key = key;
		}
	}
	if (unknown >= 0) {
		*ret_err = errorf(ret_error, -EINVAL,
				  "accessibility_requirements.%s[%zd]: %s is not a topology key of "
				  "node %s (it has %s=%s)",
				  field, unknown, unknown_key, pb->node_id, BACKEND_TOPOLOGY_NODE,
				  pb->node_id);
	} else if (elsewhere >= 0) {
		const char *ours = strmap_get(&pb->segment, elsewhere_key)
					   ?: strmap_get(&pb->segment, BACKEND_TOPOLOGY_ZONE);
		*ret_err = errorf(
			ret_error, -ENOSPC,
			"accessibility_requirements.%s[%zd]: %s=%s is not this node: this "
			"pool serves node %s only (%s=%s)",
			field, elsewhere, elsewhere_key, strmap_get(&t[elsewhere], elsewhere_key),
			pb->node_id, elsewhere_key, ours);
	}
	return -1;
}

/* Where the volume goes: this node, when the request lets it. The preferred segments are
 * tried first, then the requisite ones; without requisite segments this node is as good as
 * any (the spec lets the plugin choose), and a volume is never made for another node. */
static int create_check_topology(PoolBackend *pb, const BackendCreateVolume *r, char **ret_error)
{
	_cleanup_free_ char *preferred_error = NULL;
	int e = 0;

	if (topology_first_fit(pb, r->preferred, r->n_preferred, "preferred", &e,
			       &preferred_error) >= 0)
		return 0;
	if (e == -EINVAL) /* an unknown key; another node's segment is only not preferred */
		return error_pass(e, &preferred_error, ret_error);
	if (r->n_requisite == 0)
		return 0;
	if (topology_first_fit(pb, r->requisite, r->n_requisite, "requisite", &e, ret_error) >= 0)
		return 0;
	return e;
}

/* What a new volume records: its parameters, and the context the node gets (the filesystem
 * options, and the filesystem the capability asked for). */
static void create_spec(PoolBackend *pb, const BackendCreateVolume *r, PoolVolume *v)
{
	pool_volume_id_for_name(r->name, v->id);
	v->node = pb->node_part;
	v->name = (char *)r->name;
	v->size = r->size;
	v->created_ns = (int64_t)now_usec(CLOCK_REALTIME) * 1000;
	v->source_kind = (char *)(r->source_kind ?: "");
	v->source_id = (char *)(r->source_id ?: "");
	v->access_mode = (char *)r->access.mode;
	v->directory = r->params->directory;
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

	_cleanup_free_ char *shown = pool_backend_id(id, pb->node_part);
	int e = pool_volume_damaged(pb->pool, id, shown, ret_error);
	if (e < 0)
		return e;
	e = pool_volume_load(pb->pool, id, &v);
	if (e < 0)
		return errorf(ret_error, e, "volume '%s' (%s) exists but cannot be read: %s",
			      r->name, id, strerror(-e));
	volume_to_backend(pb, v, ret);
	return -EEXIST;
}

/* The local ID of the request's content source: it must be this pool's. A source of another
 * node is refused with RESOURCE_EXHAUSTED, the spec's answer for a volume that cannot be made
 * where it was asked (Kubernetes then schedules the pod elsewhere), naming both nodes. */
static int create_source(PoolBackend *pb, const BackendCreateVolume *r, char ret[POOL_ID_MAX],
			 char **ret_error)
{
	bool snap = strcmp(r->source_kind, "snapshot") == 0;
	const char *field = snap ? "volume_content_source.snapshot.snapshot_id"
				 : "volume_content_source.volume.volume_id";
	_cleanup_free_ char *err = NULL;

	int e = pool_backend_id_local(pb, snap ? POOL_ID_SNAPSHOT : POOL_ID_VOLUME, field,
				      r->source_id, ret, &err);
	if (e == -EXDEV)
		return errorf(ret_error, -ENOSPC,
			      "%s: a volume is made from a source on the source's node only", err);
	if (e < 0)
		return error_pass(e, &err, ret_error);
	/* A damaged source is no source. */
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	bool directory;
	if (!snap) {
		e = pool_backend_volume_load(pb, field, r->source_id, ret, &v, ret_error);
		if (e < 0)
			return e;
		directory = v->directory;
	} else {
		e = pool_snapshot_load(pb->pool, ret, &s);
		if (e < 0)
			return errorf(ret_error, -ENOENT,
				      "volume_content_source: %s '%s' not found", r->source_kind,
				      r->source_id);
		directory = s->directory;
	}
	/* a tree is copied into a tree, a data file into a data file */
	if (directory != r->params->directory)
		return errorf(ret_error, -EINVAL,
			      "%s: %s %s is %s, and a volume of volumeKind %s is not made from it",
			      field, r->source_kind, r->source_id,
			      directory ? "of a directory volume" : "of a volume on a loop device",
			      r->params->directory ? "directory" : "file");
	return 0;
}

/* volumeKind: directory needs project quotas on the pool's filesystem: FAILED_PRECONDITION
 * naming it and how to mount it, before anything is made. */
static int create_check_directory(PoolBackend *pb, char **ret_error)
{
	_cleanup_free_ char *why = NULL;

	int e = pool_directory_volumes_check(pb->pool, &why);
	if (e < 0)
		return errorf(ret_error, e, "parameters: volumeKind: directory: %s", why);
	return 0;
}

/* A restore's filesystem and parameters are the snapshot's: a request that asks for others is
 * refused (field named), rather than given a volume that is not what it asked. */
static int store_check_manifest(const BackendCreateVolume *r, const StoreManifest *m,
				char **ret_error)
{
	const char *fs =
		r->access.fstype && *r->access.fstype ? r->access.fstype : r->params->fstype;
	if (!r->access.block && *fs && *m->filesystem && strcmp(fs, m->filesystem) != 0)
		return errorf(ret_error, -EINVAL,
			      "volume_capabilities: fs_type %s: snapshot %s holds a %s filesystem",
			      fs, r->source_id, m->filesystem);
	if (r->size < m->volume_size)
		return errorf(ret_error, -ERANGE,
			      "capacity_range: %llu bytes is smaller than the source snapshot %s "
			      "(%llu bytes)",
			      (unsigned long long)r->size, r->source_id,
			      (unsigned long long)m->volume_size);

	/* The filesystem's own parameters (mkfs options), as the snapshot's volume had them. */
	_cleanup_(strmap_done) Strmap ours = {};
	volume_params_to_strmap(r->params, VOLUME_PARAMS_NODE, &ours);
	strmap_remove(&ours, "fsGroupChangePolicy"); /* how the node mounts it, not the data's */
	for (size_t i = 0; i < ours.n; i++) {
		const char *v = strmap_get(&m->parameters, ours.keys[i]);
		if (v && strcmp(v, ours.values[i]) != 0)
			return errorf(ret_error, -EINVAL,
				      "parameters: %s is %s, but snapshot %s was taken of a "
				      "volume with %s=%s",
				      ours.keys[i], ours.values[i], r->source_id, ours.keys[i], v);
	}
	return 0;
}

/* CreateVolume from a snapshot in the object store (store_id: its ID there), on whichever node
 * took it: the volume is filled from the store by a restore that goes on past the call's
 * deadline (pool-restore.c). */
static int create_from_store(PoolBackend *pb, const BackendCreateVolume *r, const char *store_id,
			     BackendVolume *ret, char **ret_error)
{
	_cleanup_(store_manifest_done) StoreManifest m = {};
	_cleanup_free_ char *err = NULL;
	PoolVolume spec = {};
	uint64_t total, available;

	Store *store = NULL;
	int e = pool_backend_store(pb, r->secrets, &store, &err);
	if (e < 0)
		return errorf(ret_error, e, "volume_content_source: snapshot %s: %s", r->source_id,
			      err);
	pool_volume_id_for_name(r->name, spec.id);
	/* One restore at a time into a volume; its volume, once there, is the answer. */
	e = pool_restore_busy(pb->restores, spec.id, ret_error);
	if (e < 0)
		return e;
	if (pool_volume_present(pb->pool, spec.id))
		return create_existing(pb, r, spec.id, ret, ret_error);
	if ((e = pool_restore_failed(pb->restores, spec.id, r->source_id, ret_error)) < 0)
		return e;

	usec_t deadline = call_deadline();
	free(err);
	err = NULL;
	e = store_manifest_get(store, store_id, deadline, &m, &err);
	if (e == -ENOENT)
		return errorf(ret_error, e, "volume_content_source: snapshot '%s' not found: %s",
			      r->source_id, err);
	if (e < 0)
		return errorf(ret_error, e, "volume_content_source: snapshot %s: %s", r->source_id,
			      err);
	if ((e = store_check_manifest(r, &m, ret_error)) < 0)
		return e;
	/* Before any chunk is fetched (the restore reserves it for real). */
	pool_capacity(pb->pool, &total, &available);
	if (r->size > available) {
		_cleanup_free_ char *why = pool_space_refusal(pb->pool, r->size, pb->node_id);
		return errorf(ret_error, -ENOSPC, "capacity_range: %s", why);
	}

	create_spec(pb, r, &spec);
	if (*m.filesystem && !r->access.block &&
	    !strmap_get(&spec.context, BLOCKNODE_CONTEXT_FSTYPE))
		strmap_set(&spec.context, BLOCKNODE_CONTEXT_FSTYPE, m.filesystem);
	PoolVolume *job = xnew0(PoolVolume, 1);
	*job = (PoolVolume){
		.size = spec.size,
		.created_ns = spec.created_ns,
		.params = spec.params,
		.context = spec.context,
		.name = xstrdup(spec.name),
		.source_kind = xstrdup(spec.source_kind),
		.source_id = xstrdup(spec.source_id),
		.access_mode = xstrdup(spec.access_mode),
		.node = xstrdup(spec.node),
	};
	memcpy(job->id, spec.id, sizeof(job->id));
	e = pool_restore_run(pb->restores, pb->pool, pb->node_id, store, store_id, r->source_id,
			     job, deadline, ret_error);
	if (e == -EEXIST)
		return create_existing(pb, r, spec.id, ret, ret_error);
	if (e < 0)
		return e;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	if ((e = pool_volume_load(pb->pool, spec.id, &v)) < 0)
		return errorf(ret_error, e, "volume '%s' (%s) was restored but cannot be read: %s",
			      r->name, spec.id, strerror(-e));
	volume_to_backend(pb, v, ret);
	ret->copy_method = "restore from the object store";
	return e;
}

int pool_backend_create_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			       char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	PoolVolume spec = {};
	CopyMethod method;
	char source[POOL_ID_MAX] = "";

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0)
		return e;
	if ((e = create_check_topology(pb, r, ret_error)) < 0)
		return e;
	if (r->params->encrypted)
		/* A pool volume is a plain file: saying yes would be a lie about the data. */
		return errorf(ret_error, -EINVAL,
			      "parameters: encrypted: pool volumes are not encrypted (only EBS "
			      "volumes are)");
	/* A snapshot in the object store is restored on any node; a local one is its node's. */
	const char *store_id = r->source_kind && strcmp(r->source_kind, "snapshot") == 0
				       ? pool_store_id_of(r->source_id)
				       : NULL;
	if (store_id && r->params->directory)
		return errorf(
			ret_error, -EINVAL,
			"parameters: volumeKind: directory: snapshot %s in the store holds the "
			"image of a file volume, and restores as one (volumeKind file)",
			r->source_id);
	if (r->params->directory && (e = create_check_directory(pb, ret_error)) < 0)
		return e;
	if (store_id)
		return create_from_store(pb, r, store_id, ret, ret_error);
	if (r->source_kind && *r->source_kind && (e = create_source(pb, r, source, ret_error)) < 0)
		return e;
	create_spec(pb, r, &spec);
	e = pool_volume_create(pb->pool, &spec, source, &method);
	if (e == -EEXIST)
		e = create_existing(pb, r, spec.id, ret, ret_error);
	else if (e == -ENOSPC) {
		/* On which node, how much is left there (what GetCapacity of its segment answers)
		 * and why. */
		_cleanup_free_ char *why = pool_space_refusal(pb->pool, r->size, pb->node_id);
		e = errorf(ret_error, e, "capacity_range: %s", why);
	} else if (e == -EPERM)
		e = errorf(ret_error, -ENOTEMPTY,
			   "volume_content_source: %s '%s' holds a device file, which is never "
			   "copied",
			   spec.source_kind, spec.source_id);
	else if (e == -EMLINK)
		e = errorf(ret_error, e,
			   "volume '%s' (%s): no free project ID found for its quota in pool %s",
			   r->name, spec.id, pool_path(pb->pool));
	else if (e == -ENOENT)
		e = errorf(ret_error, e, "volume_content_source: %s '%s' not found",
			   spec.source_kind, spec.source_id);
	else if (e == -ERANGE)
		e = errorf(ret_error, e, "capacity_range: smaller than the source %s '%s'",
			   spec.source_kind, spec.source_id);
	else if (e == -EUCLEAN)
		e = errorf(ret_error, e,
			   "volume_content_source: %s %s is damaged: %s/%s/data is no regular "
			   "file of the pool (a symbolic link is never followed)",
			   spec.source_kind, spec.source_id,
			   strcmp(spec.source_kind, "snapshot") == 0 ? "snapshots" : "volumes",
			   source);
	else if (e == -EINVAL)
		/* its record would not hold it: nothing was made */
		e = errorf(ret_error, e, "name, parameters: not valid UTF-8 (volume %s)", spec.id);
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

int pool_backend_find_volume(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			     char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	char id[POOL_ID_MAX];

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0)
		return e;
	pool_volume_id_for_name(r->name, id);
	if ((e = pool_restore_busy(pb->restores, id, ret_error)) < 0)
		return e;
	if (!pool_volume_present(pb->pool, id))
		return errorf(ret_error, -ENOENT, "name: no volume '%s'", r->name);
	e = create_existing(pb, r, id, ret, ret_error);
	return e == -EEXIST ? 0 : e;
}

/* DeleteVolume */

static int delete_refused(const char *id, const PoolVolumeFound *found, char **ret_error)
{
	if (found->use == POOL_VOLUME_PUBLISHED)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is still published to node %s: unpublish it first", id,
			      found->node);
	if (found->directory)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is staged on node %s at %s: unstage it first (its "
			      "directory is mounted at %s)",
			      id, found->node ?: "?", found->staging_path ?: found->device,
			      found->device);
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
	char local[POOL_ID_MAX];
	_cleanup_free_ char *err = NULL;

	/* Another node's volume is NOT_FOUND, not gone: a success would let the CO forget a
	 * volume that still holds its data on that node. */
	int e = pool_backend_id_local(pool_of(b), POOL_ID_VOLUME, "volume_id", r->id, local, &err);
	if (e == -EXDEV)
		return error_pass(-ENOENT, &err, ret_error);
	if (e < 0) {
		*ret = (BackendDeleted){}; /* no volume of ours: already gone */
		return 0;
	}
	/* Without its pool nothing says whether the volume is gone. */
	if ((e = pool_backend_usable(pool_of(b), ret_error)) < 0)
		return e;
	/* Not there yet, but it will be: a success now would leave it behind. */
	if ((e = pool_restore_busy(pool_of(b)->restores, local, ret_error)) < 0)
		return e;
	/* "Is it in use?" and the removal are one decision of the pool, under one hold of the
	 * volume's lock: a publish from any process comes before or after, never between. */
	e = pool_volume_delete(pool_of(b)->pool, local, &found);
	if (e == -ENOENT) {
		*ret = (BackendDeleted){}; /* already gone: success, as the spec asks */
		e = 0;
	} else if (e == -ENOTEMPTY)
		e = delete_refused(r->id, &found, ret_error);
	else if (e == -EPERM && found.why)
		e = errorf(ret_error, -ENOTEMPTY,
			   "volume %s cannot be deleted (nothing was removed): pool %s: %s, then "
			   "delete it again",
			   r->id, pool_path(pool_of(b)->pool), found.why);
	else if (e < 0)
		e = errorf(ret_error, e, "deleting volume %s failed: %s", r->id, strerror(-e));
	else {
		/* Its store snapshots' kept copy goes with it: no later upload takes it as a
		 * base, and it would hold the volume's whole data alone. */
		pool_store_volume_gone(pool_of(b)->store, local);
		*ret = (BackendDeleted){
			.found = true,
			.damaged = !found.name,
			.name = TAKE_PTR(found.name),
			.leftover = pool_leftover(pool_of(b)->pool, found.why),
		};
	}
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
static int change_locked(PoolBackend *pb, const char *local, const BackendChange *r,
			 BackendChanged *ret, char **ret_error)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	Pool *pool = pb->pool;

	int e = pool_backend_volume_load(pb, "volume_id", r->volume_id, local, &v, ret_error);
	if (e < 0)
		return e;
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
	if (e == -ENOSPC) {
		_cleanup_free_ char *why = pool_space_refusal(pool, size - v->size, pb->node_id);
		return errorf(ret_error, e, "volume %s: growing it to %llu bytes: %s", r->volume_id,
			      (unsigned long long)size, why);
	}
	if (e == -EUCLEAN && v->directory)
		return errorf(ret_error, e,
			      "volume %s: growing its project quota (%" PRIu32 ") to %llu bytes: "
			      "pool %s's filesystem enforces no project quotas now (mounted "
			      "without prjquota?): mount it with them, then expand it again",
			      r->volume_id, v->project, (unsigned long long)size, pool_path(pool));
	if (e < 0 && v->directory && size > v->size)
		return errorf(ret_error, e,
			      "volume %s: growing its project quota (%" PRIu32 ") to %llu bytes "
			      "failed: %s",
			      r->volume_id, v->project, (unsigned long long)size, strerror(-e));
	if (e < 0)
		return errorf(ret_error, e, "volume %s: saving the change failed: %s", r->volume_id,
			      strerror(-e));
	/* A loop device keeps its old size until NodeExpandVolume refreshes it, raw block too,
	 * and a filesystem must grow there as well; a directory volume's quota is all there
	 * is. */
	*ret = (BackendChanged){.size = v->size, .node_expansion_required = !v->directory};
	return 0;
}

int pool_backend_change_volume(Backend *b, const BackendChange *r, BackendChanged *ret,
			       char **ret_error)
{
	char local[POOL_ID_MAX];
	int lock = -EBADF;

	int e = pool_backend_id_find(pool_of(b), POOL_ID_VOLUME, "volume_id", r->volume_id, local,
				     ret_error);
	if (e < 0 || (e = pool_backend_usable(pool_of(b), ret_error)) < 0)
		return e;
	if ((e = pool_backend_volume_lock(pool_of(b), "volume_id", r->volume_id, local, &lock,
					  ret_error)) < 0)
		return e;
	e = change_locked(pool_of(b), local, r, ret, ret_error);
	pool_unlock(lock);
	return e;
}
