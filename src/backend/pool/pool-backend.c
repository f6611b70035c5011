/* SPDX-License-Identifier: Apache-2.0 */
/* The pool as a backend: the table of operations over pool.c (objects on disk), the
 * controller's files (pool-controller.c, pool-attach.c, pool-snapshot.c) and pool-node.c (the
 * node service). */
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "blocknode.h"
#include "error-util.h"
#include "log.h"
#include "pool-backend.h"
#include "pool-restore.h"
#include "pool-node.h"
#include "strbuf.h"

static int fail(int err, char *message, char **ret_error)
{
	*ret_error = message;
	return err;
}

char *pool_leftover(Pool *p, const char *why)
{
	if (!why)
		return NULL;
	return xasprintf("its files could not all be removed and stay in pool %s: %s, then run "
			 "volplugctl pool check --repair %s (volplugd does at its next start)",
			 pool_path(p), why, pool_path(p));
}

int pool_backend_usable(PoolBackend *pb, char **ret_error)
{
	int r = pool_probe(pb->pool);
	if (r == -ENOMEDIUM)
		return fail(
			r,
			xasprintf("pool %s is not usable: it is gone: the directory volplugd "
				  "opened was removed or replaced while it served it, and the "
				  "records of its volumes with it (a restarted volplugd refuses "
				  "the path until started with --pool-init)",
				  pool_path(pb->pool)),
			ret_error);
	if (r < 0)
		return fail(
			r,
			xasprintf("pool %s is not usable: %s", pool_path(pb->pool), strerror(-r)),
			ret_error);
	return 0;
}

static int pool_probe_op(Backend *b, char **ret_error)
{
	return pool_backend_usable(pool_of(b), ret_error);
}

/* A pool volume lives on the pool's one node, so every mode is served there: the single-node
 * ones as CSI has them (SINGLE_NODE_SINGLE_WRITER: one target path), and the multi-node ones
 * as their single-node counterparts, since no other node can reach the volume (a publish to
 * another node is NOT_FOUND naming both; the volume's topology tells the CO where it is).
 * Several workloads of the node share the one mount, which no filesystem minds. */
static const char *const access_modes[] = {
	"SINGLE_NODE_WRITER",	    "SINGLE_NODE_READER_ONLY", "SINGLE_NODE_SINGLE_WRITER",
	"SINGLE_NODE_MULTI_WRITER", "MULTI_NODE_READER_ONLY",  "MULTI_NODE_SINGLE_WRITER",
	"MULTI_NODE_MULTI_WRITER",
};

static bool one_of(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static int check_access_op(Backend *b, const BackendAccessCheck *r, void *ret, char **ret_error)
{
	(void)b;
	(void)ret;
	if (!one_of(r->access.mode, access_modes, ELEMENTSOF(access_modes)))
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s is not supported by pool volumes", r->field,
			      r->access.mode);
	if (!r->access.block && !blocknode_fstype_supported(r->access.fstype))
		return errorf(
			ret_error, -EINVAL,
			"%s.mount.fs_type: '%s' is not supported (want ext2, ext3, ext4 or xfs)",
			r->field, r->access.fstype);
	return 0;
}

/* The node service acts on this node's volumes only: another node's ID is NOT_FOUND before
 * anything on this machine is looked at (pool-ids.c). *ret_id: the local ID, or id itself when
 * it is no ID of the pool at all (the node service answers for that as it always has: an
 * unpublish of a path with nothing of ours on it succeeds). */
static int node_volume(Backend *b, const char *id, char local[POOL_ID_MAX], const char **ret_id,
		       char **ret_error)
{
	_cleanup_free_ char *err = NULL;

	int e = pool_backend_id_local(pool_of(b), POOL_ID_VOLUME, "volume_id", id, local, &err);
	if (e == -EXDEV)
		return error_pass(-ENOENT, &err, ret_error);
	*ret_id = e == 0 ? local : id;
	return 0;
}

static int stage_op(Backend *b, const BackendStage *r, void *ret, char **ret_error)
{
	BackendStage s = *r;
	BlockfsMkfsOptions mkfs = {};
	char local[POOL_ID_MAX];
	const char *id;

	(void)ret;
	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	if (!r->access.block) {
		/* The capability's filesystem, else the StorageClass's, else ext4. */
		e = blocknode_stage_defaults(r, &s.access.fstype, &mkfs, ret_error);
		if (e < 0)
			return e;
	}
	return pool_node_stage(pool_of(b)->pool, pool_of(b)->node_id, id, &s, &mkfs, ret_error);
}

static int unstage_op(Backend *b, const BackendUnstage *r, void *ret, char **ret_error)
{
	char local[POOL_ID_MAX];
	const char *id;

	(void)ret;
	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	return pool_node_unstage(pool_of(b)->pool, id, r->volume_id, r->staging_path, ret_error);
}

static int publish_op(Backend *b, const BackendPublish *r, void *ret, char **ret_error)
{
	char local[POOL_ID_MAX];
	const char *id;

	(void)ret;
	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	/* A pool volume is always staged first: its target binds the staging mount. */
	if (!r->staging_path || !*r->staging_path)
		return errorf(ret_error, -EINVAL, "staging_target_path: missing");
	return pool_node_publish(pool_of(b)->pool, pool_of(b)->node_id, id, r, ret_error);
}

static int unpublish_op(Backend *b, const BackendUnpublish *r, void *ret, char **ret_error)
{
	char local[POOL_ID_MAX];
	const char *id;

	(void)ret;
	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	return pool_node_unpublish(pool_of(b)->pool, id, r->volume_id, r->target_path, ret_error);
}

/* Without a controller that expands (a driver on every node), the node grows the volume
 * first, to required rounded up to a MiB, with the controller's capacity check. */
static int node_grow(Backend *b, const BackendNodeExpand *r, char **ret_error)
{
	uint64_t size = (r->required + MIB - 1) / MIB * MIB;
	BackendChanged changed;

	if (r->limit && size > r->limit)
		size = r->limit; /* within the range; the node's check says if it is short */
	BackendChange c = {.volume_id = r->volume_id, .new_size = size, .n_callers = 1};
	return pool_backend_change_volume(b, &c, &changed, ret_error);
}

static int node_expand_op(Backend *b, const BackendNodeExpand *r, BackendNodeExpanded *ret,
			  char **ret_error)
{
	char local[POOL_ID_MAX];
	const char *id;

	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	if (r->grow && r->required && (e = node_grow(b, r, ret_error)) < 0)
		return e;
	return pool_node_expand(pool_of(b)->pool, id, r->volume_id, r->volume_path, r->required,
				r->limit, &ret->size, ret_error);
}

static int node_stats_op(Backend *b, const BackendStatsRequest *r, BackendStats *ret,
			 char **ret_error)
{
	char local[POOL_ID_MAX];
	const char *id;

	int e = node_volume(b, r->volume_id, local, &id, ret_error);
	if (e < 0)
		return e;
	return pool_node_stats(pool_of(b)->pool, id, r->volume_id, r->volume_path, ret, ret_error);
}

static int node_info_op(Backend *b, const void *r, BackendNodeInfo *ret, char **ret_error)
{
	(void)r;
	(void)ret_error;
	*ret = (BackendNodeInfo){.max_volumes = pool_of(b)->max_volumes};
	strmap_copy(&ret->topology, &pool_of(b)->segment);
	return 0;
}

static void pool_backend_free(Backend *b)
{
	PoolBackend *pb = pool_of(b);

	pool_metrics_stop(pb);
	if (!pool_restores_free(pb->restores)) {
		/* Their threads use the pool and the store to the end: the process ends with them,
		 * and the next open removes the volumes they were making. */
		log_info("pool %s: restores interrupted; the next start removes what they made",
			 pool_path(pb->pool));
		return;
	}
	pool_store_free(pb->store);
	pool_trimmer_stop(pb->trimmer);
	pool_close(pb->pool);
	devnames_free(pb->devnames);
	free(pb->node_id);
	free(pb->node_part);
	free(pb->zone);
	strmap_done(&pb->segment);
	free(pb);
}

/* The programs the node runs are recorded in the pool, and the Flexvolume backend beside it
 * keeps its records there. */
static const char *state_dir_op(Backend *b)
{
	return pool_path(pool_of(b)->pool);
}

static char *describe_op(Backend *b)
{
	PoolBackend *pb = pool_of(b);

	_cleanup_free_ char *store = pb->store ? pool_store_describe(pb->store) : NULL;

	if (store)
		return xasprintf("node %s, pool %s, snapshot store %s", pb->node_id,
				 pool_path(pb->pool), store);
	return xasprintf("node %s, pool %s", pb->node_id, pool_path(pb->pool));
}

static const BackendOps pool_ops = {
	.name = "pool",
	.probe = pool_probe_op,
	.check_access = check_access_op,
	.parse_params = volume_params_request,
	.create_volume = pool_backend_create_volume,
	.find_volume = pool_backend_find_volume,
	.delete_volume = pool_backend_delete_volume,
	.get_volume = pool_backend_get_volume,
	.list_volumes = pool_backend_list_volumes,
	.get_capacity = pool_backend_get_capacity,
	.attach = pool_backend_attach,
	.detach = pool_backend_detach,
	.change_volume = pool_backend_change_volume,
	.create_snapshot = pool_backend_create_snapshot,
	.delete_snapshot = pool_backend_delete_snapshot,
	.get_snapshot = pool_backend_get_snapshot,
	.list_snapshots = pool_backend_list_snapshots,
	.create_group = pool_backend_create_group,
	.delete_group = pool_backend_delete_group,
	.get_group = pool_backend_get_group,
	.snapshot_allocated = pool_backend_snapshot_allocated,
	.snapshot_delta = pool_backend_snapshot_delta,
	.stage = stage_op,
	.unstage = unstage_op,
	.publish = publish_op,
	.unpublish = unpublish_op,
	.node_expand = node_expand_op,
	.node_stats = node_stats_op,
	.node_info = node_info_op,
	.status = pool_backend_status,
	.state_dir = state_dir_op,
	.describe = describe_op,
	.free = pool_backend_free,
};

/* The node registers itself in the pool, so the controller knows its id and attach limit. */
static int register_node(PoolBackend *pb, char **ret_error)
{
	PoolNode node = {
		.id = pb->node_id,
		.max_volumes = pb->max_volumes,
		.zone = pb->zone,
	};
	int r = pool_node_register(pb->pool, &node);
	if (r < 0)
		return fail(r,
			    xasprintf("registering node %s in pool %s failed: %s", pb->node_id,
				      pool_path(pb->pool), strerror(-r)),
			    ret_error);
	return 0;
}

/* Repairs what earlier runs left on the pool (loop devices over files no record uses,
 * temporaries, the size an interrupted expand did not record) and tells config->report of
 * each item: the daemon warns once per item, and a damaged volume only once whoever finds it
 * (this check or a call). */
static void repair(PoolBackend *pb, const BackendConfig *config)
{
	BackendReportFunc tell = config->report;
	PoolCheckReport report;

	int r = pool_check_repair(pb->pool, &report);
	if (r < 0) {
		_cleanup_free_ char *m = xasprintf("pool %s: checking it at start failed: %s",
						   pool_path(pb->pool), strerror(-r));
		if (tell)
			tell(NULL, m, config->report_userdata);
		return;
	}
	for (size_t i = 0; tell && i < report.n_items; i++) {
		const PoolCheckItem *it = &report.items[i];
		bool damaged = *it->volume_id;
		_cleanup_free_ char *m =
			damaged ? NULL
				: xasprintf("pool %s: %s: %s%s%s", pool_path(pb->pool), it->object,
					    it->problem, it->repair ? ": " : "", it->repair ?: "");
		_cleanup_free_ char *id =
			damaged ? pool_backend_id(it->volume_id, pb->node_part) : NULL;
		tell(id, m ?: it->problem, config->report_userdata);
	}
	pool_check_report_done(&report);
}

/* This node's topology segment: its node, its zone, and the operator's labels. */
static void segment_make(PoolBackend *pb, const BackendConfig *config)
{
	strmap_set(&pb->segment, BACKEND_TOPOLOGY_NODE, pb->node_id);
	strmap_set(&pb->segment, BACKEND_TOPOLOGY_ZONE, pb->zone);
	for (size_t i = 0; config->topology_labels && i < config->topology_labels->n; i++)
		strmap_set(&pb->segment, config->topology_labels->keys[i],
			   config->topology_labels->values[i]);
}

static char *open_error(const BackendConfig *config, const PoolSettings *ps, int r)
{
	_cleanup_free_ char *record = pool_record_path(ps->path);

	if (r == -ENOMEDIUM)
		return xasprintf("--pool %s: the pool is gone: the directory is absent or holds no "
				 "pool, but %s says volplugd made a pool there. Its volumes are "
				 "lost, or the filesystem holding them is not mounted: mount it "
				 "back; to start over with a new, empty pool there, start "
				 "volplugd with --pool-init",
				 ps->path, record);
	if (r == -ENOTEMPTY)
		return xasprintf("--pool %s --pool-init: it holds files but no pool: a new pool is "
				 "made in an absent or empty directory only",
				 ps->path);
	_cleanup_free_ char *damage = r != -EXDEV ? pool_layout_damage(ps->path) : NULL;
	if (damage)
		return xasprintf("--pool %s: cannot use it as a pool: %s", ps->path, damage);
	if (r != -EXDEV)
		return xasprintf("--pool %s: cannot use it as a pool: %s", ps->path, strerror(-r));
	_cleanup_free_ char *owner = pool_recorded_node(ps->path);
	return xasprintf("--node-id %s: pool %s serves node %s (its file 'node' says so): one "
			 "pool serves one node, whose ID the IDs of its volumes carry",
			 config->node_id, ps->path, owner ?: "?");
}

/* The node's data path: loop devices with direct I/O where the pool's filesystem takes it (told
 * once when it does not), and the trimmer that gives deleted files' space back. */
static int node_data_path(PoolBackend *pb, const BackendConfig *config, const PoolSettings *ps,
			  char **ret_error)
{
	int r = pool_node_direct_io_check(pb->pool);
	if (r < 0 && config->report) {
		_cleanup_free_ char *m = xasprintf(
			"pool %s: its filesystem refuses direct I/O (%s): volumes' loop devices "
			"work buffered, their data cached twice",
			pool_path(pb->pool), strerror(-r));
		config->report(NULL, m, config->report_userdata);
	}
	if (ps->trim_interval == 0)
		return 0;
	r = pool_trimmer_start(pb->pool, ps->trim_interval, &pb->trimmer);
	if (r < 0)
		return fail(r,
			    xasprintf("pool %s: starting the trimmer failed: %s",
				      pool_path(pb->pool), strerror(-r)),
			    ret_error);
	return 0;
}

BACKEND_NEW(pool);
BACKEND_NEW(pool)
{
	const PoolSettings *ps = config->settings ?: &pool_settings_default;
	PoolConfig pc = {
		.path = ps->path,
		.capacity = ps->capacity,
		.zone = config->zone,
		.node_id = config->node_id,
		.overprovision = ps->overprovision,
		.init = ps->init,
	};
	PoolBackend *pb = xnew0(PoolBackend, 1);
	int r;

	pb->base.ops = &pool_ops;
	pb->devnames = devnames_new(NULL);
	pb->restores = pool_restores_new();
	pb->node_id = xstrdup(config->node_id ?: "");
	pb->node_part = pool_backend_node_part(pb->node_id);
	pb->serves_node = config->roles & BACKEND_ROLE_NODE;
	pb->max_volumes = config->max_volumes_per_node;
	pb->zone = xstrdup(config->zone ?: "local");
	segment_make(pb, config);
	if ((r = pool_open(&pc, &pb->pool)) < 0) {
		*ret_error = open_error(config, ps, r);
		pb->pool = NULL;
		pool_backend_free(&pb->base);
		return r;
	}
	if ((config->roles & BACKEND_ROLE_NODE) &&
	    ((r = register_node(pb, ret_error)) < 0 ||
	     (r = node_data_path(pb, config, ps, ret_error)) < 0)) {
		pool_backend_free(&pb->base);
		return r;
	}
	if ((config->roles & BACKEND_ROLE_CONTROLLER) &&
	    (r = pool_store_new(ps, pb->pool, pb->node_id, &pb->store, ret_error)) < 0) {
		pool_backend_free(&pb->base);
		return r;
	}
	repair(pb, config);
	pool_store_start(pb->store);
	pool_metrics_start(pb);
	*ret = &pb->base;
	return 0;
}
